//! The history of NCCL runs: one JSON file per run in `<state dir>/nccl/<id>.json`, with
//! what the run was (collective, sizes, engine, the GPUDirect profile and its exact
//! environment, the machine type and where it came from), its busbw rows, and its verdict.
//! Written when a run starts (the profile is saved before the first row) and again when
//! it ends. Bounded: at most [`MAX_RUNS`] files (the oldest go) and [`MAX_ROWS`] rows each.
//!
//! [`compare`] puts two runs side by side per message size; it and [`prune`] are pure.

use super::expect::Verdict;
use super::parse::Report;
use super::transport::GpuDirect;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Runs kept in the history.
pub const MAX_RUNS: usize = 200;
/// Rows kept per run (a sweep of 8 B to 8 GiB by 2 has 31).
pub const MAX_ROWS: usize = 256;

/// What a run was asked to do.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SavedSpec {
    pub collective: String,
    /// `nccl-tests` or `torch`.
    pub engine: String,
    /// The benchmark's arguments, e.g. `-b 8 -e 8G -f 2 -g 2 -n 20 -w 5 -d float`.
    pub args: String,
    /// `none`, `tcpx`, `tcpxo` or `rdma`.
    pub profile: String,
    /// The profile's lines exactly as the node scripts set them.
    pub env: Vec<String>,
}

/// One row, the figures the history needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedRow {
    pub size: u64,
    /// Out-of-place busbw, GB/s.
    pub busbw: Option<f64>,
    pub in_place_busbw: Option<f64>,
    pub algbw: Option<f64>,
    pub time_us: Option<f64>,
}

/// A run in the history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SavedRun {
    pub id: String,
    pub fleet: String,
    pub started_at: u64,
    pub ended_at: Option<u64>,
    pub spec: SavedSpec,
    /// Node names, head first.
    pub nodes: Vec<String>,
    pub machine_type: Option<String>,
    /// `--machine-type`, `fleet instance_types` or `nccl-tests rank list`.
    pub machine_type_from: Option<String>,
    /// Per node, in node order; `None` while running or when unknown.
    pub exit_codes: Vec<Option<i32>>,
    pub nccl_version: Option<String>,
    pub ranks: Option<u32>,
    pub transport: Option<String>,
    pub avg_busbw: Option<f64>,
    pub peak_busbw: Option<f64>,
    pub rows: Vec<SavedRow>,
    pub verdict: Option<Verdict>,
    /// Why the run was made when not by hand, e.g. `stragglers: pair lab-0 lab-1`.
    #[serde(default)]
    pub purpose: Option<String>,
}

impl SavedRun {
    /// Fill the figures from a parsed report.
    pub fn set_report(&mut self, report: &Report) {
        self.nccl_version = report.nccl_version.clone();
        self.ranks = report.ranks();
        self.transport = report.transport_summary();
        self.avg_busbw = report.avg_busbw;
        self.peak_busbw = report.peak_busbw();
        self.rows = report
            .rows
            .iter()
            .take(MAX_ROWS)
            .map(|r| SavedRow {
                size: r.size,
                busbw: r.out_of_place.as_ref().map(|m| m.busbw),
                in_place_busbw: r.in_place.as_ref().map(|m| m.busbw),
                algbw: r.out_of_place.as_ref().map(|m| m.algbw),
                time_us: r.out_of_place.as_ref().map(|m| m.time_us),
            })
            .collect();
    }

    /// Conclude the entry of an ended run: its figures, the exit codes (`codes` of the
    /// nodes that ran a script, in node order; the others, mpirun's, share the first's),
    /// the machine type from nccl-tests' rank list when nothing named it, the verdict
    /// ([`super::expect::verdict_of`]: busbw and the transport against the run's profile,
    /// the collective it was launched as; a node that did not finish fails it with `cause`).
    pub fn conclude(&mut self, report: &Report, codes: &[Option<i32>], cause: Option<&str>, now: u64) {
        self.set_report(report);
        // When it ended is when it was first seen ended: following it again later (Enter
        // in the cockpit, `nccl attach`) does not move it (ux-walk-2, item 4).
        self.ended_at = Some(self.ended_at.unwrap_or(now));
        let head = codes.first().copied().flatten();
        self.exit_codes = (0..self.nodes.len().max(1))
            .map(|i| codes.get(i).copied().unwrap_or(head))
            .collect();
        if self.machine_type.is_none() {
            if let Some((m, _)) = super::expect::machine_from_devices(report) {
                self.machine_type = Some(m);
                self.machine_type_from = Some("nccl-tests rank list".into());
            }
        }
        self.verdict = Some(super::expect::verdict_of(
            report,
            &self.launched(),
            Some(super::expect::Ended { codes, cause }),
        ));
    }

    /// What the run was launched as, for its verdict ([`super::expect::verdict_of`]).
    pub fn launched(&self) -> super::expect::Launched<'_> {
        super::expect::Launched {
            machine_type: self.machine_type.as_deref(),
            nodes: u32::try_from(self.nodes.len()).ok().filter(|n| *n > 0),
            profile: self.profile(),
            collective: Some(self.spec.collective.as_str()).filter(|c| !c.is_empty()),
        }
    }

    /// The GPUDirect profile the run was made with (`none` when the entry names none).
    pub fn profile(&self) -> GpuDirect {
        GpuDirect::parse(&self.spec.profile).unwrap_or(GpuDirect::None)
    }

    /// `pass`, `warn`, `fail`, `unknown`, or `-` without a verdict.
    pub fn grade(&self) -> &'static str {
        self.verdict.as_ref().map_or("-", |v| v.grade.as_str())
    }

    /// The worst exit code, `None` while any node has none.
    pub fn exit_code(&self) -> Option<i32> {
        if self.exit_codes.is_empty() || self.exit_codes.iter().any(Option::is_none) {
            return None;
        }
        self.exit_codes.iter().flatten().copied().max()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("nccl history: {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("nccl history: {path}: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

/// The history's directory in the state dir.
pub fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("nccl")
}

fn file(state_dir: &Path, id: &str) -> PathBuf {
    dir(state_dir).join(format!("{id}.json"))
}

/// Write (or rewrite) a run's file, atomically, then drop the oldest beyond [`MAX_RUNS`].
pub fn save(state_dir: &Path, run: &SavedRun) -> Result<(), HistoryError> {
    let d = dir(state_dir);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| HistoryError::Io { path, source }
    };
    std::fs::create_dir_all(&d).map_err(io(&d))?;
    let path = file(state_dir, &run.id);
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(run).map_err(|source| HistoryError::Json {
        path: path.clone(),
        source,
    })?;
    std::fs::write(&tmp, text).map_err(io(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(io(&path))?;
    let all = load_all(state_dir)?;
    let listed: Vec<(String, u64)> = all.iter().map(|r| (r.id.clone(), r.started_at)).collect();
    for id in prune(&listed, MAX_RUNS) {
        let p = file(state_dir, &id);
        std::fs::remove_file(&p).map_err(io(&p))?;
    }
    Ok(())
}

/// One run, `None` when it has no file.
pub fn load(state_dir: &Path, id: &str) -> Result<Option<SavedRun>, HistoryError> {
    let path = file(state_dir, id);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|source| HistoryError::Json { path, source }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(HistoryError::Io { path, source }),
    }
}

/// Every run of the history, newest first. A file that does not parse is skipped (it is
/// named in the log), so one damaged file does not hide the others.
pub fn load_all(state_dir: &Path) -> Result<Vec<SavedRun>, HistoryError> {
    let mut runs: Vec<SavedRun> =
        read_json_dir(&dir(state_dir), "nccl history: unreadable run file skipped")?;
    sort_newest_first(&mut runs);
    Ok(runs)
}

/// Newest first; ties by id, descending.
pub fn sort_newest_first(runs: &mut [SavedRun]) {
    runs.sort_by(|a, b| b.started_at.cmp(&a.started_at).then_with(|| b.id.cmp(&a.id)));
}

/// The ids to delete so that at most `cap` of `(id, started_at)` remain: the oldest.
pub fn prune(runs: &[(String, u64)], cap: usize) -> Vec<String> {
    let mut v: Vec<&(String, u64)> = runs.iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    v.into_iter().skip(cap).map(|(id, _)| id.clone()).collect()
}

/// A straggler finder result, kept per fleet (the last one) in
/// `<state dir>/nccl/stragglers/<fleet>.json`, shown by the cockpit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StragglerReport {
    pub fleet: String,
    /// Unix seconds when the finder ended.
    pub at: u64,
    pub collective: String,
    pub threshold: f64,
    pub nodes: Vec<String>,
    /// Nodes alone, slowest first: (node, peak busbw GB/s; `None`: the run failed).
    pub node_ranking: Vec<(String, Option<f64>)>,
    /// Node pairs, slowest first: (node, node, peak busbw).
    pub link_ranking: Vec<(String, String, Option<f64>)>,
    /// (node, why).
    pub slow_nodes: Vec<(String, String)>,
    /// (node, node, why).
    pub slow_links: Vec<(String, String, String)>,
    pub unresolved: Vec<String>,
    /// The one node to blame, when there is one.
    pub named: Option<String>,
}

fn stragglers_dir(state_dir: &Path) -> PathBuf {
    dir(state_dir).join("stragglers")
}

/// Save a straggler finder result (replacing the fleet's previous one), atomically.
pub fn save_stragglers(state_dir: &Path, r: &StragglerReport) -> Result<(), HistoryError> {
    let d = stragglers_dir(state_dir);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| HistoryError::Io { path, source }
    };
    std::fs::create_dir_all(&d).map_err(io(&d))?;
    let name: String = r
        .fleet
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = d.join(format!("{name}.json"));
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(r).map_err(|source| HistoryError::Json {
        path: path.clone(),
        source,
    })?;
    std::fs::write(&tmp, text).map_err(io(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(io(&path))
}

/// The newest straggler finder result of any fleet; `None` before the first. Files that
/// do not parse are skipped (and logged).
pub fn load_stragglers(state_dir: &Path) -> Result<Option<StragglerReport>, HistoryError> {
    let all: Vec<StragglerReport> = read_json_dir(
        &stragglers_dir(state_dir),
        "nccl stragglers: unreadable result skipped",
    )?;
    Ok(all
        .into_iter()
        .max_by(|a, b| (a.at, &a.fleet).cmp(&(b.at, &b.fleet))))
}

/// Every `*.json` file of `d` that parses as `T` (none when `d` does not exist); a file
/// that does not is skipped and logged with `skipped`, so one damaged file does not hide
/// the others.
fn read_json_dir<T: serde::de::DeserializeOwned>(d: &Path, skipped: &str) -> Result<Vec<T>, HistoryError> {
    let entries = match std::fs::read_dir(d) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(source) => {
            return Err(HistoryError::Io {
                path: d.to_path_buf(),
                source,
            })
        }
    };
    let mut out = vec![];
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        match std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<T>(&t).ok())
        {
            Some(r) => out.push(r),
            None => tracing::warn!(path = %path.display(), "{skipped}"),
        }
    }
    Ok(out)
}

/// One message size of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareRow {
    pub size: u64,
    /// Out-of-place busbw of the first and the second run, GB/s.
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// b / a, when both are there and a is not zero.
    pub ratio: Option<f64>,
}

/// Two runs side by side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    /// Every size either run measured, ascending.
    pub rows: Vec<CompareRow>,
    pub peak_a: Option<f64>,
    pub peak_b: Option<f64>,
    /// peak_b / peak_a.
    pub peak_ratio: Option<f64>,
    /// Differences worth a note: another collective, node count or machine type.
    pub notes: Vec<String>,
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a != 0.0 && a.is_finite() && b.is_finite() => Some(b / a),
        _ => None,
    }
}

/// Compare run `b` against run `a`.
pub fn compare(a: &SavedRun, b: &SavedRun) -> Comparison {
    let mut sizes: Vec<u64> = a.rows.iter().chain(&b.rows).map(|r| r.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let at = |run: &SavedRun, size: u64| run.rows.iter().find(|r| r.size == size).and_then(|r| r.busbw);
    let rows = sizes
        .into_iter()
        .map(|size| {
            let (x, y) = (at(a, size), at(b, size));
            CompareRow {
                size,
                a: x,
                b: y,
                ratio: ratio(x, y),
            }
        })
        .collect();
    let mut notes = vec![];
    if a.spec.collective != b.spec.collective {
        notes.push(format!(
            "different collectives ({} and {}): busbw factors differ",
            a.spec.collective, b.spec.collective
        ));
    }
    if a.nodes.len() != b.nodes.len() {
        notes.push(format!(
            "different node counts ({} and {})",
            a.nodes.len(),
            b.nodes.len()
        ));
    }
    if a.ranks != b.ranks {
        let r = |x: Option<u32>| x.map_or("?".into(), |v| v.to_string());
        notes.push(format!(
            "different rank counts ({} and {})",
            r(a.ranks),
            r(b.ranks)
        ));
    }
    if a.machine_type != b.machine_type {
        let m = |x: &Option<String>| x.clone().unwrap_or_else(|| "unknown".into());
        notes.push(format!(
            "different machine types ({} and {})",
            m(&a.machine_type),
            m(&b.machine_type)
        ));
    }
    if a.spec.profile != b.spec.profile || a.spec.env != b.spec.env {
        notes.push(format!(
            "different NCCL environments ({} and {})",
            a.spec.profile, b.spec.profile
        ));
    }
    Comparison {
        a: a.id.clone(),
        b: b.id.clone(),
        rows,
        peak_a: a.peak_busbw,
        peak_b: b.peak_busbw,
        peak_ratio: ratio(a.peak_busbw, b.peak_busbw),
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, rows: &[(u64, f64)]) -> SavedRun {
        SavedRun {
            id: id.into(),
            fleet: "lab".into(),
            spec: SavedSpec {
                collective: "all_reduce".into(),
                profile: "none".into(),
                ..Default::default()
            },
            nodes: vec!["lab-0".into()],
            rows: rows
                .iter()
                .map(|(s, b)| SavedRow {
                    size: *s,
                    busbw: Some(*b),
                    in_place_busbw: None,
                    algbw: None,
                    time_us: None,
                })
                .collect(),
            peak_busbw: rows.iter().map(|r| r.1).reduce(f64::max),
            ..Default::default()
        }
    }

    #[test]
    fn comparison_per_size_with_ratios_and_gaps() {
        let a = run("a", &[(1024, 1.0), (2048, 4.0), (4096, 0.0)]);
        let b = run("b", &[(2048, 3.0), (4096, 2.0), (8192, 9.0)]);
        let c = compare(&a, &b);
        assert_eq!(
            c.rows,
            vec![
                CompareRow {
                    size: 1024,
                    a: Some(1.0),
                    b: None,
                    ratio: None
                },
                CompareRow {
                    size: 2048,
                    a: Some(4.0),
                    b: Some(3.0),
                    ratio: Some(0.75)
                },
                CompareRow {
                    size: 4096,
                    a: Some(0.0),
                    b: Some(2.0),
                    ratio: None
                },
                CompareRow {
                    size: 8192,
                    a: None,
                    b: Some(9.0),
                    ratio: None
                },
            ]
        );
        assert_eq!(c.peak_ratio, Some(9.0 / 4.0));
        assert!(c.notes.is_empty());
        let mut d = run("d", &[]);
        d.spec.collective = "all_gather".into();
        d.nodes.push("lab-1".into());
        d.spec.profile = "tcpx".into();
        let notes = compare(&a, &d).notes;
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(notes[0].starts_with("different collectives (all_reduce and all_gather)"));
    }

    #[test]
    fn prune_keeps_the_newest() {
        let runs: Vec<(String, u64)> = (0..5).map(|i| (format!("r{i}"), i)).collect();
        assert_eq!(prune(&runs, 3), vec!["r1".to_string(), "r0".into()]);
        assert!(prune(&runs, 5).is_empty());
    }

    #[test]
    fn save_load_and_bound() {
        let dir = tempfile::tempdir().unwrap();
        let report = crate::nccl::parse_text(include_str!("../../tests/fixtures/nccl/h200x2-all_reduce.txt"))
            .remove(0);
        let mut r = run("nccl-all_reduce-1-0000", &[]);
        r.set_report(&report);
        assert_eq!(r.rows.len(), 31);
        assert_eq!(r.peak_busbw, Some(347.71));
        save(dir.path(), &r).unwrap();
        assert_eq!(load(dir.path(), &r.id).unwrap().as_ref(), Some(&r));
        assert_eq!(load(dir.path(), "nope").unwrap(), None);
        // A damaged file is skipped, the others still listed.
        std::fs::write(dir.path().join("nccl/bad.json"), "{").unwrap();
        assert_eq!(load_all(dir.path()).unwrap().len(), 1);
        std::fs::remove_file(dir.path().join("nccl/bad.json")).unwrap();
        for i in 0..(MAX_RUNS as u64 + 3) {
            let mut x = run(&format!("r{i:04}"), &[]);
            x.started_at = 10 + i;
            save(dir.path(), &x).unwrap();
        }
        let all = load_all(dir.path()).unwrap();
        assert_eq!(all.len(), MAX_RUNS);
        assert_eq!(all[0].id, format!("r{:04}", MAX_RUNS + 2));
        assert!(all.iter().all(|x| x.started_at >= 13), "the oldest went first");
    }

    /// The entry of a failed run keeps the cause, and its verdict is judged with the
    /// run's own profile.
    #[test]
    fn conclude_judges_with_the_profile_and_keeps_the_cause() {
        let text = include_str!("../../tests/fixtures/nccl/composed/nccl2.27.7-rdma-no-gib-all_reduce.txt");
        let report = crate::nccl::parse_text(text).remove(0);
        let mut r = run("nccl-all_reduce-1-0001", &[]);
        r.spec.profile = "rdma".into();
        assert_eq!(r.profile(), GpuDirect::Rdma);
        let cause = crate::nccl::remote::failure_cause(text.lines());
        r.conclude(&report, &[Some(3)], cause.as_deref(), 9);
        // Concluded again later (opened again, attached): it still ended at 9.
        r.conclude(&report, &[Some(3)], cause.as_deref(), 600);
        assert_eq!(r.ended_at, Some(9));
        let v = r.verdict.as_ref().unwrap();
        assert_eq!(r.grade(), "fail");
        assert_eq!(
            v.cause.as_deref(),
            Some("NCCL WARN Failed to initialize any NET plugin")
        );
        assert_eq!(
            v.reason,
            "the run failed before its first row: a node ended with exit 3; \
             cause: NCCL WARN Failed to initialize any NET plugin"
        );
        // An old entry without a profile is judged as `none`.
        let mut old = run("old", &[]);
        old.spec.profile = String::new();
        assert_eq!(old.profile(), GpuDirect::None);
        // A verdict saved before `cause` existed still reads.
        let json = serde_json::to_string(&r)
            .unwrap()
            .replace(",\"cause\":\"NCCL WARN Failed to initialize any NET plugin\"", "");
        assert!(!json.contains("\"cause\""), "{json}");
        let back: SavedRun = serde_json::from_str(&json).unwrap();
        assert_eq!(back.verdict.unwrap().cause, None);
    }
}
