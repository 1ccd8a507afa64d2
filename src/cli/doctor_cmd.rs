//! `flightdeck doctor FLEET [--nodes ...] [--only CHECK,...] [--json]`: every check on
//! every node at once; each node's tally as it answers (on stderr), then the problems,
//! worst first, causes before what follows from them. Exit 1 when a check failed.

use super::{Cli, DoctorArgs, NcclProfile};
use crate::doctor::{self, run::Event, tally, Outcome, Report};
use crate::fleet::NodeTarget;
use crate::nccl::GpuDirect;
use crate::paths::Paths;
use std::process::ExitCode;

/// `--only`'s ids, checked.
pub fn only(ids: &[String]) -> anyhow::Result<Vec<String>> {
    for id in ids {
        if doctor::check_def(id).is_none() {
            let hint = crate::yaml::did_you_mean(id, doctor::CHECKS.iter().map(|c| c.id));
            return Err(super::usage(format!(
                "--only {id}: no such check{hint} (`flightdeck doctor --list` lists them)"
            )));
        }
    }
    Ok(ids.to_vec())
}

pub fn flavour(p: NcclProfile) -> Option<GpuDirect> {
    match p {
        NcclProfile::Auto => None,
        NcclProfile::None => Some(GpuDirect::None),
        NcclProfile::Tcpx => Some(GpuDirect::Tcpx),
        NcclProfile::Tcpxo => Some(GpuDirect::Tcpxo),
        NcclProfile::Rdma => Some(GpuDirect::Rdma),
    }
}

pub fn run(args: &DoctorArgs, cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    if args.list {
        for c in doctor::CHECKS {
            outln!("{:<12} {}", c.id, c.explain);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let only = only(&args.only)?;
    let fleet_arg = args.fleet.as_deref().unwrap_or_default();
    let (fleet, family, all, reach) = super::resolve_fleet_kind_now(fleet_arg, cli, paths)?;
    let nodes: Vec<NodeTarget> = if args.nodes.is_empty() {
        all.clone()
    } else {
        crate::fleet::select_nodes(&all, &args.nodes).map_err(|e| super::usage(format!("--nodes {e}")))?
    };
    if nodes.is_empty() {
        anyhow::bail!("fleet `{fleet}` has no nodes");
    }
    let (ctx, compact) = doctor::context_for(
        &paths.state_dir,
        fleet_arg,
        &fleet,
        family,
        nodes.len(),
        doctor::Asked {
            machine_type: args.machine_type.clone(),
            flavour: flavour(args.profile),
            only,
        },
    );
    let rt = super::runtime()?;
    let status = super::StatusLine::start(&format!("doctor {fleet}"));
    status.print(&format!(
        "doctor {fleet}: {} on {}{}, GPUDirect {}",
        crate::words::plural(
            if ctx.only.is_empty() {
                doctor::CHECKS.len()
            } else {
                ctx.only.len()
            },
            "check"
        ),
        crate::words::plural(nodes.len(), "node"),
        ctx.machine_type
            .as_deref()
            .map(|m| format!(" ({m})"))
            .unwrap_or_default(),
        ctx.flavour.name()
    ));
    // The fleet's line (comparisons across nodes, the reach matrix) counts its own
    // checks, so the node lines and the fleet lines add up to the summary's counts.
    let width = nodes
        .iter()
        .map(|n| n.name.len())
        .max()
        .unwrap_or(0)
        .max("fleet".len());
    let on = |e: Event| match e {
        Event::Node { node, findings } => status.print(&node_line(&node, width, &findings)),
        Event::Progress(p) => status.print(&p),
        Event::Fleet(findings) if !findings.is_empty() => status.print(&node_line("fleet", width, &findings)),
        Event::Fleet(_) => {}
    };
    let kube = reach.kube().clone();
    // Debug pods the checks make on GKE nodes go at the end (or at Ctrl-C).
    let examined = rt.block_on(crate::cloud::gke::exec::removing_debug_pods(
        &kube,
        doctor::run::examine(reach, &fleet, &nodes, &ctx, &on),
    ));
    let Some(mut report) = examined else {
        drop(status);
        errln!("interrupted");
        return Ok(ExitCode::from(130));
    };
    if ctx.wants("placement") {
        let record = crate::store::Store::new(&paths.state_dir)
            .load()
            .ok()
            .and_then(|(s, _)| s.fleet(&fleet).ok().cloned());
        let inventory = super::inventory_context(paths)?.with_kube(kube);
        let found = rt.block_on(doctor::run::placement(
            &inventory,
            record.as_ref(),
            &nodes,
            compact,
        ));
        if !found.is_empty() {
            status.print(&node_line("fleet", width, &found));
        }
        report.add(found);
        report.link_causes();
    }
    drop(status);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&json(&report))?);
    } else {
        out!("{}", text(&report, args.evidence));
    }
    Ok(if report.worst() == Outcome::Fail {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// A node's line as it answers: its problems, or its tally.
fn node_line(node: &str, width: usize, findings: &[doctor::Finding]) -> String {
    let worst = findings.iter().map(|f| f.outcome).max().unwrap_or(Outcome::Pass);
    let bad: Vec<String> = findings
        .iter()
        .filter(|f| f.outcome >= Outcome::Warn)
        // `tb-3  warn: sysctl: …`, not `warn: warn sysctl`: a finding's own outcome is
        // said only where it is not the line's.
        .map(|f| match f.outcome == worst {
            true => format!("{}: {}", f.check, f.what),
            false => format!("{} {}: {}", f.outcome.as_str(), f.check, f.what),
        })
        .collect();
    if bad.is_empty() {
        return format!(
            "{node:<width$}  ok: {}",
            tally(findings.iter().map(|f| f.outcome))
        );
    }
    format!("{node:<width$}  {}: {}", worst.as_str(), bad.join("; "))
}

#[derive(serde::Serialize)]
struct Json<'a> {
    #[serde(flatten)]
    report: &'a Report,
    worst: Outcome,
    problems: Vec<String>,
    checks: &'static [doctor::CheckDef],
}

fn json(report: &Report) -> Json<'_> {
    Json {
        report,
        worst: report.worst(),
        problems: report.summary_lines(),
        checks: doctor::CHECKS,
    }
}

/// The report as text: the problems (with their evidence when asked), or the all-clear.
pub fn text(report: &Report, evidence: bool) -> String {
    // Every finding, the nodes' and the fleet's: the sum of the lines printed as they came.
    let counts = tally(report.findings.iter().map(|f| f.outcome));
    let mut s = String::new();
    let problems = report.problems();
    if problems.is_empty() {
        s.push_str(&format!(
            "no problem found on {}: {counts} ({:.1} s)\n",
            crate::words::plural(report.nodes.len(), "node"),
            report.elapsed_ms as f64 / 1000.0
        ));
        return s;
    }
    s.push_str(&format!(
        "{} on {}: {counts} ({:.1} s)\n",
        crate::words::plural(problems.len(), "problem"),
        crate::words::plural(report.nodes.len(), "node"),
        report.elapsed_ms as f64 / 1000.0
    ));
    // The same finding on several nodes (the same check, outcome, words and fix, nothing
    // following from it) is one entry naming its nodes: four nodes' sysctl warning is
    // read, and its fix printed, once.
    let alone =
        |c: &doctor::Finding, after: &[&doctor::Finding]| evidence || !after.is_empty() || c.node.is_none();
    let same = |a: &doctor::Finding, b: &doctor::Finding| {
        (a.outcome, &a.check, &a.what, &a.fix) == (b.outcome, &b.check, &b.what, &b.fix)
    };
    let mut done = vec![false; problems.len()];
    for (i, (c, after)) in problems.iter().enumerate() {
        if done[i] {
            continue;
        }
        let mut nodes = vec![c.node.clone().unwrap_or_else(|| "fleet".into())];
        if !alone(c, after) {
            for (j, (d, more)) in problems.iter().enumerate().skip(i + 1) {
                if !done[j] && !alone(d, more) && same(c, d) {
                    done[j] = true;
                    nodes.extend(d.node.clone());
                }
            }
        }
        s.push_str(&format!(
            "{} {} {}: {}\n",
            c.outcome.as_str().to_uppercase(),
            if nodes.len() > 3 {
                format!("{} nodes ({})", nodes.len(), crate::words::compress_names(&nodes))
            } else {
                nodes.join(", ")
            },
            c.check,
            c.what
        ));
        if evidence {
            for l in c.evidence.iter().take(12) {
                s.push_str(&format!("    | {l}\n"));
            }
        }
        if !c.fix.is_empty() {
            s.push_str(&format!("    fix: {}\n", c.fix));
        }
        for a in after {
            s.push_str(&format!(
                "    └ {} {}: {} (follows from it)\n",
                a.node.as_deref().unwrap_or("fleet"),
                a.check,
                a.what
            ));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use doctor::Finding;

    fn f(node: Option<&str>, check: &'static str, outcome: Outcome) -> Finding {
        Finding {
            check,
            node: node.map(str::to_string),
            outcome,
            what: format!("{check} said so"),
            evidence: vec![],
            fix: String::new(),
            follows: None,
        }
    }

    /// ux-walk-2 item 10: four nodes' identical sysctl warning is one entry with its fix
    /// once; a node's line says its outcome once (`warn: sysctl: …`, not `warn: warn`).
    #[test]
    fn the_same_finding_on_several_nodes_is_one_entry() {
        let warn = |n: &str| Finding {
            fix: "sudo sysctl -w net.core.rmem_max=16777216".into(),
            ..f(Some(n), "sysctl", Outcome::Warn)
        };
        let mut findings: Vec<Finding> = (0..4).map(|i| warn(&format!("tb-{i}"))).collect();
        findings.push(f(Some("tb-2"), "nics", Outcome::Fail));
        let report = Report {
            fleet: "tb".into(),
            nodes: (0..4).map(|i| format!("tb-{i}")).collect(),
            findings,
            elapsed_ms: 1800,
        };
        let t = text(&report, false);
        assert_eq!(t.matches("fix: sudo sysctl").count(), 1, "{t}");
        assert!(
            t.contains("WARN 4 nodes (tb-[0-3]) sysctl: sysctl said so\n"),
            "{t}"
        );
        assert!(t.contains("FAIL tb-2 nics: nics said so\n"), "{t}");
        assert_eq!(
            node_line("tb-3", 4, &[warn("tb-3")]),
            "tb-3  warn: sysctl: sysctl said so"
        );
        // With evidence asked for, each node's own evidence is shown: not grouped.
        assert_eq!(text(&report, true).matches("fix: sudo sysctl").count(), 4);
    }

    /// The walk's disagreement: `lab-0 ok: 1 pass, 11 skipped` over `3 passed, 12
    /// skipped` in the summary. Each line now says what it counts, in the same words, and
    /// the node's line and the fleet's add up to the summary.
    #[test]
    fn node_fleet_and_summary_counts_add_up() {
        let mut node = vec![f(Some("lab-0"), "gpus", Outcome::Pass)];
        let skipped = ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9", "c10"];
        node.extend(skipped.map(|c| f(Some("lab-0"), c, Outcome::Skip)));
        let fleet = vec![
            f(None, "versions", Outcome::Pass),
            f(None, "clocks", Outcome::Pass),
            f(None, "reach", Outcome::Skip),
        ];
        let width = "fleet".len();
        assert_eq!(
            node_line("lab-0", width, &node),
            "lab-0  ok: 1 check passed, 11 skipped"
        );
        assert_eq!(
            node_line("fleet", width, &fleet),
            "fleet  ok: 2 checks passed, 1 skipped"
        );
        let report = Report {
            fleet: "lab".into(),
            nodes: vec!["lab-0".into()],
            findings: node.into_iter().chain(fleet).collect(),
            elapsed_ms: 1500,
        };
        assert_eq!(
            text(&report, false),
            "no problem found on 1 node: 3 checks passed, 12 skipped (1.5 s)\n"
        );
        assert_eq!(
            tally([Outcome::Fail, Outcome::Pass, Outcome::Pass, Outcome::Warn].into_iter()),
            "1 check failed, 1 warned, 2 passed"
        );
    }
}
