//! Expected busbw curves and the verdict of a run.
//!
//! A reference is keyed by machine type, collective and node count. Two sources:
//! - the figures the anchors publish ([`super::baseline::PUBLISHED`]: one point each, 2
//!   nodes x 8 GPUs, mostly at 8 GiB);
//! - our own measured curves (`measured.tsv`, copied from the recorded nccl-tests outputs
//!   in tests/fixtures/nccl: one node with 2 NVLinked H200s, the "2xH200" machine).
//!
//! The verdict compares the run's peak out-of-place busbw with the reference's peak over
//! the sizes the run covered: pass at 90% or more, warn from 70%, fail below 70%, and
//! unknown (with the reason) when there is no reference or it does not apply.
//! [`judge_run`] adds the run's GPUDirect profile: a run NCCL did not run on the
//! profile's network fails ([`super::transport::check_transport`]). [`judge_ended`] adds
//! how it ended: a node that did not finish fails it, with the line of its output that
//! says why.
//!
//! Machine types are GCP's (`a3-megagpu-8g`) or, for machines outside GCP, the GPU count
//! and model of one node as nccl-tests' rank list names them (`2xH200`).
//!
//! Pure: no I/O.

use super::baseline::PUBLISHED;
use super::parse::Report;
use super::transport::{check_transport, GpuDirect, TransportCheck};
use serde::{Deserialize, Serialize};

/// The measured curves (see the module doc).
const MEASURED: &str = include_str!("measured.tsv");

/// Pass at this share of the expected peak or more.
pub const PASS: f64 = 0.90;
/// Warn from this share up to [`PASS`]; fail below.
pub const WARN: f64 = 0.70;

/// An expected curve: out-of-place busbw per message size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reference {
    pub machine_type: String,
    pub collective: String,
    pub nodes: u32,
    /// Ranks of the figures, when known (nodes x GPUs per node).
    pub ranks: Option<u32>,
    /// (size in bytes, busbw GB/s), by size.
    pub points: Vec<(u64, f64)>,
    /// Where the figures come from.
    pub source: String,
    /// `published` (an anchor's documentation) or `measured` (our own runs).
    pub kind: &'static str,
}

impl Reference {
    /// The highest busbw among the points within `[lo, hi]` bytes, and its size.
    pub fn peak_within(&self, lo: u64, hi: u64) -> Option<(u64, f64)> {
        self.points
            .iter()
            .filter(|(s, _)| (lo..=hi).contains(s))
            .copied()
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// The highest busbw of the curve.
    pub fn peak(&self) -> Option<(u64, f64)> {
        self.peak_within(0, u64::MAX)
    }
}

/// The GPUs per node a machine type has: `a3-megagpu-8g` -> 8, `2xH200` -> 2.
pub fn gpus_per_node(machine_type: &str) -> Option<u32> {
    if let Some((n, _)) = machine_type.split_once('x') {
        if let Ok(n) = n.parse() {
            return Some(n);
        }
    }
    let last = machine_type.rsplit('-').next()?;
    last.strip_suffix('g')?.parse().ok()
}

fn measured() -> Vec<Reference> {
    let mut out: Vec<Reference> = vec![];
    for line in MEASURED
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let f: Vec<&str> = line.split('\t').collect();
        let (Some(machine), Some(coll), Some(nodes), Some(ranks), Some(size), Some(bw)) = (
            f.first(),
            f.get(1),
            f.get(2).and_then(|v| v.parse().ok()),
            f.get(3).and_then(|v| v.parse().ok()),
            f.get(4).and_then(|v| v.parse().ok()),
            f.get(5).and_then(|v| v.parse().ok()),
        ) else {
            continue;
        };
        match out
            .iter_mut()
            .find(|r| r.machine_type == *machine && r.collective == *coll && r.nodes == nodes)
        {
            Some(r) => r.points.push((size, bw)),
            None => out.push(Reference {
                machine_type: machine.to_string(),
                collective: coll.to_string(),
                nodes,
                ranks: Some(ranks),
                points: vec![(size, bw)],
                source: "measured here with nccl-tests 2.19.6, NCCL 2.28.9, 2x H200 over NVLink (NV18), 2026-11-22"
                    .into(),
                kind: "measured",
            }),
        }
    }
    out
}

fn published() -> Vec<Reference> {
    let mut out: Vec<Reference> = vec![];
    for b in PUBLISHED {
        // flightdeck provisions GCE VMs: a GCE figure is preferred to a GKE one for the
        // same machine and collective.
        let gce = |f: &str| f.contains("GCE");
        let has_gce = PUBLISHED.iter().any(|o| {
            o.machine_type == b.machine_type
                && o.collective == b.collective
                && o.nodes == b.nodes
                && gce(o.fabric)
        });
        if has_gce && !gce(b.fabric) {
            continue;
        }
        let source = format!("{} ({})", b.source, b.fabric);
        match out
            .iter_mut()
            .find(|r| r.machine_type == b.machine_type && r.collective == b.collective && r.nodes == b.nodes)
        {
            Some(r) => {
                r.points.push((b.size, b.busbw));
                r.source = format!("{}; {source}", r.source);
            }
            None => out.push(Reference {
                machine_type: b.machine_type.into(),
                collective: b.collective.into(),
                nodes: b.nodes,
                ranks: gpus_per_node(b.machine_type).map(|g| g * b.nodes),
                points: vec![(b.size, b.busbw)],
                source,
                kind: "published",
            }),
        }
    }
    out
}

/// Every reference, measured ones first; points sorted by size, one per size (the
/// highest).
pub fn references() -> Vec<Reference> {
    let mut all = measured();
    all.extend(published());
    for r in &mut all {
        r.points.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.total_cmp(&a.1)));
        r.points.dedup_by_key(|p| p.0);
    }
    all
}

/// The reference for a machine type, collective and node count.
pub fn reference(machine_type: &str, collective: &str, nodes: u32) -> Option<Reference> {
    references().into_iter().find(|r| {
        r.machine_type.eq_ignore_ascii_case(machine_type) && r.collective == collective && r.nodes == nodes
    })
}

/// The machine of a run from nccl-tests' rank list: `2xH200` for one host with two
/// `NVIDIA H200`s; `None` when the list is missing, spans several hosts with different
/// GPU counts, or mixes models. Returns the machine and the node count.
pub fn machine_from_devices(report: &Report) -> Option<(String, u32)> {
    let first = report.devices.first()?;
    let model = first.name.as_deref()?.trim();
    if report
        .devices
        .iter()
        .any(|d| d.name.as_deref().map(str::trim) != Some(model))
    {
        return None;
    }
    let per_host = super::parse::gpus_per_listed_node(&report.devices)?;
    if per_host.iter().any(|n| *n != per_host[0]) {
        return None;
    }
    let short: String = model
        .trim_start_matches("NVIDIA ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join("-");
    Some((format!("{}x{short}", per_host[0]), per_host.len() as u32))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Grade {
    Pass,
    Warn,
    Fail,
    Unknown,
}

impl Grade {
    pub fn as_str(self) -> &'static str {
        match self {
            Grade::Pass => "pass",
            Grade::Warn => "warn",
            Grade::Fail => "fail",
            Grade::Unknown => "unknown",
        }
    }

    /// The grade of `measured / expected`.
    pub fn of_ratio(ratio: f64) -> Grade {
        if !ratio.is_finite() {
            Grade::Unknown
        } else if ratio >= PASS {
            Grade::Pass
        } else if ratio >= WARN {
            Grade::Warn
        } else {
            Grade::Fail
        }
    }
}

/// A run judged against its reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub grade: Grade,
    /// The run's peak out-of-place busbw, GB/s.
    pub measured_peak_busbw: Option<f64>,
    /// The reference's peak over the sizes the run covered, GB/s, and its size.
    pub expected_peak_busbw: Option<f64>,
    pub expected_at: Option<u64>,
    /// measured / expected.
    pub ratio: Option<f64>,
    pub machine_type: Option<String>,
    pub nodes: Option<u32>,
    /// The reference's source and kind.
    pub reference: Option<String>,
    /// Why the grade is what it is, in a sentence.
    pub reason: String,
    /// For a run that failed (a node's exit code): the line of its output that says why
    /// ([`super::remote::failure_cause`]), as the node printed it.
    #[serde(default)]
    pub cause: Option<String>,
}

/// Judge `report` as a run on `nodes` nodes of `machine_type` with the GPUDirect
/// `profile` it ran with: [`judge`]'s busbw verdict, then the transport rule
/// ([`check_transport`]): a run NCCL did not run on the profile's network fails, the
/// reason saying what it used instead; one whose transport nothing shows says so in
/// its reason, its grade kept.
pub fn judge_run(
    report: &Report,
    machine_type: Option<&str>,
    nodes: Option<u32>,
    profile: GpuDirect,
) -> Verdict {
    let mut v = judge(report, machine_type, nodes);
    match check_transport(profile, report.transport.as_ref(), v.nodes.or(nodes)) {
        TransportCheck::Wrong(what) => {
            v.grade = Grade::Fail;
            v.reason = format!("{what}; {}", v.reason);
        }
        TransportCheck::Unverified(why) => {
            v.reason = format!(
                "{}; the transport of profile {} is unverified: {why}",
                v.reason,
                profile.name()
            );
        }
        TransportCheck::NotApplicable | TransportCheck::Verified(_) => {}
    }
    v
}

/// The verdict of a run that ended: `verdict` (its rows judged), made a failure when a
/// node did not finish: it ended with a non-zero exit code (255: lost), or no exit code
/// came back while the run had not concluded. The reason then says so, with `cause`,
/// the line of the output that says why ([`super::remote::failure_cause`]), which the
/// verdict keeps. `codes`: each node's exit code, `None` when none came back.
pub fn judge_ended(
    mut verdict: Verdict,
    report: &Report,
    codes: &[Option<i32>],
    cause: Option<&str>,
) -> Verdict {
    let failed: Vec<i32> = codes.iter().flatten().copied().filter(|c| *c != 0).collect();
    let unfinished = !report.concluded && report.avg_busbw.is_none();
    let rows = crate::words::plural(report.rows.len(), "row");
    let what = if let Some(worst) = failed.iter().max() {
        let lost = if *worst == crate::exec::UNREACHABLE {
            " (lost: its connection or the node died)"
        } else {
            ""
        };
        if report.rows.is_empty() {
            format!("the run failed before its first row: a node ended with exit {worst}{lost}")
        } else {
            format!("the run did not finish: a node ended with exit {worst}{lost} after {rows}")
        }
    } else if unfinished && codes.iter().any(Option::is_none) {
        format!(
            "the run did not finish: no exit code came back from a node (lost: its connection or the node died) after {rows}"
        )
    } else {
        return verdict;
    };
    verdict.grade = Grade::Fail;
    verdict.cause = cause.map(str::to_string);
    verdict.reason = match cause {
        Some(c) => format!("{what}; cause: {c}"),
        None => what,
    };
    verdict
}

/// What a run flightdeck made is judged by besides its output: what it launched.
#[derive(Debug, Clone, Copy)]
pub struct Launched<'a> {
    /// The machine type of its nodes (`None`: unknown; nccl-tests' rank list may say).
    pub machine_type: Option<&'a str>,
    /// How many nodes it ran on.
    pub nodes: Option<u32>,
    /// The GPUDirect profile it ran with.
    pub profile: GpuDirect,
    /// The collective flightdeck started (`all_reduce`): used when the output does not
    /// name one (a run that died before nccl-tests' banner, or a banner cut off).
    pub collective: Option<&'a str>,
}

/// How a run ended: each node's exit code (`None` when none came back) and the line of
/// its output that says why it failed ([`super::remote::failure_cause`]).
#[derive(Debug, Clone, Copy)]
pub struct Ended<'a> {
    pub codes: &'a [Option<i32>],
    pub cause: Option<&'a str>,
}

/// The verdict of a run flightdeck launched, the one rule of `nccl run`, `nccl attach`,
/// the history and the cockpit: busbw and transport ([`judge_run`]) against what it
/// launched (its collective when the output names none), then how it ended
/// ([`judge_ended`], once it has: `ended`).
pub fn verdict_of(report: &Report, launched: &Launched, ended: Option<Ended>) -> Verdict {
    let named;
    // What flightdeck launched outranks what the table is read to be.
    let named_by_output = report.collective.is_some() && report.collective_from != Some("the table");
    let report = match (named_by_output, launched.collective) {
        (false, Some(c)) => {
            named = Report {
                collective: Some(c.to_string()),
                ..report.clone()
            };
            &named
        }
        _ => report,
    };
    let v = judge_run(report, launched.machine_type, launched.nodes, launched.profile);
    match ended {
        Some(e) => judge_ended(v, report, e.codes, e.cause),
        None => v,
    }
}

/// Judge `report` as a run on `nodes` nodes of `machine_type`, by its busbw alone (no
/// profile: see [`judge_run`]).
pub fn judge(report: &Report, machine_type: Option<&str>, nodes: Option<u32>) -> Verdict {
    let measured = report.peak_busbw();
    let mut v = Verdict {
        grade: Grade::Unknown,
        measured_peak_busbw: measured,
        expected_peak_busbw: None,
        expected_at: None,
        ratio: None,
        machine_type: machine_type.map(str::to_string),
        nodes,
        reference: None,
        reason: String::new(),
        cause: None,
    };
    let Some(machine) = machine_type else {
        v.reason = "no machine type known (give --machine-type)".into();
        return v;
    };
    let Some(collective) = report.collective.as_deref() else {
        v.reason = "the output does not name its collective".into();
        return v;
    };
    // The node count: given, else the rank count over the machine's GPUs per node.
    let nodes = nodes.or_else(|| {
        let (r, g) = (report.ranks()?, gpus_per_node(machine)?);
        (g > 0 && r % g == 0 && r >= g).then_some(r / g)
    });
    v.nodes = nodes;
    let Some(nodes) = nodes else {
        v.reason = format!("the node count of the run is unknown; no reference for {machine} can be chosen");
        return v;
    };
    let Some(reference) = reference(machine, collective, nodes) else {
        v.reason = format!(
            "no reference for {collective} on {} of {machine}",
            crate::words::plural(nodes as usize, "node")
        );
        return v;
    };
    v.reference = Some(format!("{}: {}", reference.kind, reference.source));
    if let (Some(want), Some(have)) = (reference.ranks, report.ranks()) {
        if want != have {
            v.reason = format!("the reference is for {want} ranks, the run had {have}");
            return v;
        }
    }
    let Some(measured) = measured else {
        v.reason = "the run has no rows".into();
        return v;
    };
    let lo = report.rows.iter().map(|r| r.size).min().unwrap_or(0);
    let hi = report.rows.iter().map(|r| r.size).max().unwrap_or(0);
    let Some((at, expected)) = reference.peak_within(lo, hi) else {
        let sizes: Vec<String> = reference.points.iter().map(|p| super::human_size(p.0)).collect();
        let smallest = reference.points.iter().map(|p| p.0).min().unwrap_or(0);
        // A sweep that stopped short of the reference's figures (published ones are at
        // 8 GiB, where busbw has reached its plateau) is not judged at a size the
        // reference has no figure for: that would call a healthy run slow.
        v.reason = if hi < smallest {
            format!(
                "the sweep stopped at {}, below the reference's figures ({}, {}), where busbw is still climbing: not judged; run up to {} (-e {})",
                super::human_size(hi),
                sizes.join(", "),
                reference.kind,
                super::human_size(smallest),
                super::human_size(smallest)
            )
        } else {
            format!(
                "the run covered {}..{}; the reference has figures only at {}",
                super::human_size(lo),
                super::human_size(hi),
                sizes.join(", ")
            )
        };
        return v;
    };
    let ratio = measured / expected;
    v.expected_peak_busbw = Some(expected);
    v.expected_at = Some(at);
    v.ratio = Some(ratio);
    v.grade = Grade::of_ratio(ratio);
    v.reason = format!(
        "peak {measured} GB/s is {:.0}% of the expected {expected} GB/s ({} at {}); pass from {:.0}%, warn from {:.0}%",
        ratio * 100.0,
        reference.kind,
        super::human_size(at),
        PASS * 100.0,
        WARN * 100.0
    );
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nccl::parse_text;

    fn fixture(name: &str) -> Report {
        let text = std::fs::read_to_string(format!(
            "{}/tests/fixtures/nccl/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        parse_text(&text).remove(0)
    }

    /// Scale every busbw of a report (a slower copy of a recorded run).
    fn scaled(mut r: Report, k: f64) -> Report {
        for row in &mut r.rows {
            for m in [row.out_of_place.as_mut(), row.in_place.as_mut()]
                .into_iter()
                .flatten()
            {
                m.busbw *= k;
            }
        }
        r
    }

    /// A sweep that stops short of a published figure (8 GiB) says so and is not judged.
    #[test]
    fn a_sweep_short_of_the_reference_says_which_size_it_needs() {
        let mut r = fixture("h200x2-all_gather.txt");
        r.rows.retain(|row| row.size <= 1 << 30);
        assert_eq!(r.collective.as_deref(), Some("all_gather"));
        r.devices.clear();
        let v = judge(&r, Some("a3-megagpu-8g"), Some(2));
        assert_eq!(v.grade, Grade::Unknown);
        assert!(
            v.reason.starts_with("the sweep stopped at 1G, below the reference's figures (8G, published), where busbw is still climbing: not judged; run up to 8G (-e 8G)"),
            "{}",
            v.reason
        );
    }

    #[test]
    fn the_measured_curves_are_the_recorded_outputs() {
        for coll in [
            "all_reduce",
            "all_gather",
            "reduce_scatter",
            "alltoall",
            "sendrecv",
        ] {
            let report = fixture(&format!("h200x2-{coll}.txt"));
            let r = reference("2xH200", coll, 1).unwrap();
            let want: Vec<(u64, f64)> = report
                .rows
                .iter()
                .filter(|row| row.size > 0)
                .map(|row| (row.size, row.out_of_place.as_ref().unwrap().busbw))
                .collect();
            assert_eq!(r.points, want, "{coll}");
            assert_eq!(r.peak().map(|p| p.1), report.peak_busbw(), "{coll}");
        }
        assert_eq!(
            reference("2xH200", "all_reduce", 1).unwrap().peak(),
            Some((8 << 30, 347.71))
        );
    }

    #[test]
    fn published_references_prefer_gce_figures() {
        let r = reference("a3-highgpu-8g", "all_gather", 2).unwrap();
        assert_eq!(
            r.points,
            vec![(8 << 30, 50.17)],
            "the GKE 70.90 at 512M is not a GCE figure"
        );
        assert_eq!(r.ranks, Some(16));
        let u = reference("a3-ultragpu-8g", "all_gather", 2).unwrap();
        assert_eq!(
            u.points,
            vec![(8 << 30, 328.85)],
            "GKE only: the higher of two at one size"
        );
        assert!(reference("a4-highgpu-8g", "all_gather", 2).is_none());
        assert!(reference("a4-highgpu-8g", "all_reduce", 1).is_none());
    }

    #[test]
    fn machines_and_gpus_per_node() {
        assert_eq!(gpus_per_node("a3-megagpu-8g"), Some(8));
        assert_eq!(gpus_per_node("2xH200"), Some(2));
        assert_eq!(gpus_per_node("n1-standard-4"), None);
        assert_eq!(
            machine_from_devices(&fixture("h200x2-all_reduce.txt")),
            Some(("2xH200".into(), 1))
        );
        assert_eq!(machine_from_devices(&Report::default()), None);
    }

    #[test]
    fn grades_at_the_thresholds() {
        for (ratio, g) in [
            (1.2, Grade::Pass),
            (0.90, Grade::Pass),
            (0.8999, Grade::Warn),
            (0.70, Grade::Warn),
            (0.6999, Grade::Fail),
            (0.0, Grade::Fail),
            (f64::NAN, Grade::Unknown),
        ] {
            assert_eq!(Grade::of_ratio(ratio), g, "{ratio}");
        }
    }

    #[test]
    fn verdicts_of_recorded_runs() {
        let run = fixture("h200x2-all_reduce.txt");
        let v = judge(&run, Some("2xH200"), Some(1));
        assert_eq!(v.grade, Grade::Pass);
        assert_eq!(
            (v.measured_peak_busbw, v.expected_peak_busbw),
            (Some(347.71), Some(347.71))
        );
        assert_eq!(v.expected_at, Some(8 << 30));
        // The node count follows from the ranks when not given.
        assert_eq!(judge(&run, Some("2xH200"), None).nodes, Some(1));
        let warn = judge(&scaled(run.clone(), 0.8), Some("2xH200"), Some(1));
        assert_eq!(warn.grade, Grade::Warn);
        assert!(
            warn.reason.contains("80% of the expected 347.71"),
            "{}",
            warn.reason
        );
        assert_eq!(
            judge(&scaled(run.clone(), 0.5), Some("2xH200"), Some(1)).grade,
            Grade::Fail
        );
        // Unknowns say why.
        let none = judge(&run, None, None);
        assert_eq!(none.grade, Grade::Unknown);
        assert!(none.reason.contains("--machine-type"));
        let other = judge(&run, Some("g2-standard-48"), Some(1));
        assert!(other
            .reason
            .contains("no reference for all_reduce on 1 node of g2-standard-48"));
        // A run that stopped before the published size cannot be judged by that figure.
        let mut short = fixture("gke-b200-2node-all_gather.txt");
        short.rows.retain(|r| r.size <= 1 << 30);
        short.collective = Some("all_gather".into());
        let a3u = judge(&short, Some("a3-ultragpu-8g"), Some(2));
        assert_eq!(a3u.grade, Grade::Unknown);
        assert!(
            a3u.reason
                .contains("below the reference's figures (8G, published)"),
            "{}",
            a3u.reason
        );
        // Two ranks cannot be judged by a 16-rank figure.
        let ranks = judge(&fixture("h200x2-all_gather.txt"), Some("a3-ultragpu-8g"), Some(2));
        assert_eq!(ranks.grade, Grade::Unknown);
        assert_eq!(ranks.reason, "the reference is for 16 ranks, the run had 2");
    }

    /// A recorded run given NCCL debug lines: `lines` before its first row.
    fn with_debug(mut r: Report, lines: &[&str]) -> Report {
        let mut d = crate::nccl::TransportDetector::new();
        for l in lines {
            d.feed(l);
        }
        r.transport = Some(d.transport());
        r
    }

    /// A GPUDirect run that NCCL ran over sockets, or with no plugin or another one, is
    /// a failure whatever its busbw, with what NCCL did as the reason; one node is not
    /// judged by its network; no INFO lines leave the transport unverified, said so.
    #[test]
    fn the_profile_judges_the_transport() {
        let run = fixture("h200x2-all_reduce.txt");
        let two = "comm 0x1 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0";
        let socket = with_debug(
            run.clone(),
            &[
                "NET/Plugin: Could not find: libnccl-net.so",
                "Using network Socket",
                two,
            ],
        );
        let v = judge_run(&socket, Some("2xH200"), Some(1), GpuDirect::Rdma);
        assert_eq!(v.grade, Grade::Fail, "{}", v.reason);
        assert!(
            v.reason.starts_with(
                "profile rdma expects gIB, but NCCL used NET/Socket (no plugin found: libnccl-net.so); peak 347.71 GB/s"
            ),
            "{}",
            v.reason
        );
        // Without a profile the same run passes: the busbw alone.
        assert_eq!(
            judge_run(&socket, Some("2xH200"), Some(1), GpuDirect::None).grade,
            Grade::Pass
        );
        assert_eq!(judge(&socket, Some("2xH200"), Some(1)).grade, Grade::Pass);
        // The plugin loaded is another profile's.
        let tcpx = with_debug(
            run.clone(),
            &[
                "NET/Plugin: Loaded net plugin GPUDirectTCPX_v7 (v7)",
                "Using network GPUDirectTCPX_v7",
                two,
            ],
        );
        let v = judge_run(&tcpx, Some("2xH200"), Some(1), GpuDirect::Rdma);
        assert_eq!(v.grade, Grade::Fail);
        assert!(
            v.reason.contains("loaded the GPUDirectTCPX_v7 plugin"),
            "{}",
            v.reason
        );
        assert_eq!(
            judge_run(&tcpx, Some("2xH200"), Some(1), GpuDirect::Tcpx).grade,
            Grade::Pass
        );
        // One node (as NCCL counts them): the network is not used.
        let one = with_debug(
            run.clone(),
            &[
                "NET/Plugin: Could not find: libnccl-net.so",
                "Using network Socket",
                "comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
            ],
        );
        let v = judge_run(&one, Some("2xH200"), Some(1), GpuDirect::Rdma);
        assert_eq!(v.grade, Grade::Pass, "{}", v.reason);
        // No INFO lines on a GPUDirect profile over two nodes: said, not failed.
        let v = judge_run(&run, Some("a3-ultragpu-8g"), Some(2), GpuDirect::Rdma);
        assert_eq!(v.grade, Grade::Unknown);
        assert!(
            v.reason
                .contains("the transport of profile rdma is unverified: no NCCL_DEBUG=INFO lines"),
            "{}",
            v.reason
        );
    }

    /// A run a node did not finish fails with its cause, whatever its rows; one that
    /// ended 0 keeps its verdict.
    #[test]
    fn an_ended_run_fails_with_its_cause() {
        let run = fixture("h200x2-all_reduce.txt");
        let v = judge_run(&run, Some("2xH200"), Some(1), GpuDirect::None);
        assert_eq!(judge_ended(v.clone(), &run, &[Some(0)], None), v);
        let mut cut = run.clone();
        cut.rows.truncate(5);
        cut.avg_busbw = None;
        cut.concluded = false;
        let unknown = judge_run(&cut, Some("2xH200"), Some(1), GpuDirect::None);
        let failed = judge_ended(
            unknown,
            &cut,
            &[Some(3)],
            Some("NCCL WARN Cuda failure 'an illegal memory access was encountered'"),
        );
        assert_eq!(failed.grade, Grade::Fail);
        assert_eq!(
            failed.reason,
            "the run did not finish: a node ended with exit 3 after 5 rows; \
             cause: NCCL WARN Cuda failure 'an illegal memory access was encountered'"
        );
        assert_eq!(
            failed.cause.as_deref(),
            Some("NCCL WARN Cuda failure 'an illegal memory access was encountered'")
        );
        let empty = Report::default();
        let none = judge_ended(
            judge(&empty, None, None),
            &empty,
            &[Some(3)],
            Some("NCCL WARN Failed to initialize any NET plugin"),
        );
        assert_eq!(
            (none.grade, none.reason.as_str()),
            (
                Grade::Fail,
                "the run failed before its first row: a node ended with exit 3; cause: NCCL WARN Failed to initialize any NET plugin"
            )
        );
        let lost = judge_ended(judge(&cut, None, None), &cut, &[None], None);
        assert_eq!(lost.grade, Grade::Fail);
        assert!(lost.reason.contains("no exit code came back"), "{}", lost.reason);
    }

    /// The one verdict of CLI and cockpit: an output that does not name its collective
    /// is judged as the collective flightdeck launched; a node's non-zero exit after rows
    /// is FAIL (the run did not finish) with its cause.
    #[test]
    fn a_launched_run_is_judged_as_what_was_launched() {
        let mut run = fixture("h200x2-all_reduce.txt");
        run.collective = None;
        let launched = Launched {
            machine_type: Some("2xH200"),
            nodes: Some(1),
            profile: GpuDirect::None,
            collective: None,
        };
        assert_eq!(verdict_of(&run, &launched, None).grade, Grade::Unknown);
        let launched = Launched {
            collective: Some("all_reduce"),
            ..launched
        };
        let v = verdict_of(&run, &launched, None);
        assert_eq!(v.grade, Grade::Pass, "{}", v.reason);
        // The output's own name wins over what was launched.
        let mut named = run.clone();
        named.collective = Some("all_reduce".into());
        let other = Launched {
            collective: Some("all_gather"),
            ..launched
        };
        assert_eq!(verdict_of(&named, &other, None), v);
        run.rows.truncate(4);
        run.avg_busbw = None;
        run.concluded = false;
        let cause = "vm: Test NCCL failure common.cu:1005 'unhandled system error'";
        let failed = verdict_of(
            &run,
            &launched,
            Some(Ended {
                codes: &[Some(3)],
                cause: Some(cause),
            }),
        );
        assert_eq!(failed.grade, Grade::Fail);
        assert_eq!(
            failed.reason,
            format!("the run did not finish: a node ended with exit 3 after 4 rows; cause: {cause}")
        );
    }
}
