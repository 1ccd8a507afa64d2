//! `flightdeck doctor FLEET [--nodes ...] [--only CHECK,...] [--json]`: every check on
//! every node at once; each node's tally as it answers (on stderr), then the problems,
//! worst first, causes before what follows from them. Exit 1 when a check failed.

use super::{Cli, DoctorArgs, NcclProfile};
use crate::doctor::{self, run::Event, Outcome, Report};
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
    let width = nodes.iter().map(|n| n.name.len()).max().unwrap_or(0);
    let on = |e: Event| match e {
        Event::Node { node, findings } => status.print(&node_line(&node, width, &findings)),
        Event::Progress(p) => status.print(&p),
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
        report.add(rt.block_on(doctor::run::placement(
            &inventory,
            record.as_ref(),
            &nodes,
            compact,
        )));
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
        .map(|f| format!("{} {}: {}", f.outcome.as_str(), f.check, f.what))
        .collect();
    if bad.is_empty() {
        let pass = findings.iter().filter(|f| f.outcome == Outcome::Pass).count();
        let skip = findings.len() - pass;
        return format!(
            "{node:<width$}  ok: {pass} pass{}",
            if skip > 0 {
                format!(", {skip} skipped")
            } else {
                String::new()
            }
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
    let counts = report.counts();
    let n = |o: Outcome| counts.get(&o).copied().unwrap_or(0);
    let mut s = String::new();
    let problems = report.problems();
    if problems.is_empty() {
        s.push_str(&format!(
            "no problem found on {}: {} passed, {} skipped ({:.1} s)\n",
            crate::words::plural(report.nodes.len(), "node"),
            n(Outcome::Pass),
            n(Outcome::Skip),
            report.elapsed_ms as f64 / 1000.0
        ));
        return s;
    }
    s.push_str(&format!(
        "{} on {}: {} failed, {} warned, {} passed, {} skipped ({:.1} s)\n",
        crate::words::plural(problems.len(), "problem"),
        crate::words::plural(report.nodes.len(), "node"),
        n(Outcome::Fail),
        n(Outcome::Warn),
        n(Outcome::Pass),
        n(Outcome::Skip),
        report.elapsed_ms as f64 / 1000.0
    ));
    for (c, after) in problems {
        s.push_str(&format!(
            "{} {} {}: {}\n",
            c.outcome.as_str().to_uppercase(),
            c.node.as_deref().unwrap_or("fleet"),
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
