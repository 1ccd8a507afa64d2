//! `flightdeck nccl stragglers FLEET`: find the slow node or link. The decisions (which
//! groups to run, rankings, the verdict) are [`crate::nccl::straggler`]'s; this drives
//! them with real runs through the runner: each group is one detached run, recorded in
//! the state store and the history like any other (with its purpose), the groups of a
//! step in parallel.
//!
//! Engines: nccl-tests alone on a node with `-g N`, and for groups of nodes through
//! mpirun on the group's first node (flightdeck sets up the node-to-node SSH first); or
//! the torch engine, torchrun on every node of the group.
//!
//! Exit code: 0 when no node or link is slow, 1 when one is named (or a run failed).

use super::nccl_cmd;
use super::{Cli, StragglerArgs};
use crate::fleet::NodeTarget;
use crate::nccl::history::{self, StragglerReport};
use crate::nccl::launcher::Start;
use crate::nccl::remote;
use crate::nccl::runner::Engine;
use crate::nccl::straggler::{Finder, Finding, Stage, Step};
use crate::paths::Paths;
use crate::store;
use std::process::ExitCode;

fn stage_name(s: Stage) -> &'static str {
    match s {
        Stage::Singles => "single nodes",
        Stage::Ring => "ring of pairs",
        Stage::Bisect => "bisection",
    }
}

/// One group's run: its id and its peak busbw (`None` when it failed or printed no rows).
struct GroupRun {
    group: Vec<usize>,
    id: String,
    busbw: Option<f64>,
    error: Option<String>,
}

pub fn run(args: &StragglerArgs, cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    if !(0.0..=1.0).contains(&args.threshold) || args.threshold == 0.0 {
        anyhow::bail!(
            "--threshold {}: give a share between 0 and 1, e.g. 0.9",
            args.threshold
        );
    }
    let (fleet, kind, nodes, reach) = super::resolve_fleet_kind(&args.fleet, cli, paths)?;
    if nodes.is_empty() {
        anyhow::bail!("fleet `{fleet}` has no nodes");
    }
    let plan = nccl_cmd::plan(&args.bench, &args.fleet, &fleet, kind, paths)?;
    let (spec, machine) = (plan.spec, plan.machine);
    let rt = super::runtime()?;
    if !args.bench.no_preflight {
        rt.block_on(crate::bootstrap::preflight::check_nodes(
            reach.clone(),
            &nodes,
            spec.profile,
            &spec.env_lines(),
            &|m| errln!("{m}"),
        ))
        .map_err(anyhow::Error::msg)?;
    }
    let mut finder = Finder::new(nodes.len());
    finder.threshold = args.threshold;
    let mut ssh_ready = false;
    let mut runs: Vec<GroupRun> = vec![];
    let status = super::StatusLine::start(&format!("stragglers {}", args.fleet));
    let finding: Finding = loop {
        match finder.next_step() {
            Step::Done(f) => break f,
            Step::Run { stage, groups } => {
                let names: Vec<String> = groups
                    .iter()
                    .map(|g| {
                        g.iter()
                            .map(|i| nodes[*i].name.as_str())
                            .collect::<Vec<_>>()
                            .join("+")
                    })
                    .collect();
                status.print(&format!("{}: {}", stage_name(stage), names.join(", ")));
                let total = groups.len();
                status.print(&crate::progress::tally(0, total, "runs of this stage"));
                if spec.engine == Engine::NcclTests && groups.iter().any(|g| g.len() > 1) && !ssh_ready {
                    status.print(&format!(
                        "setting up SSH between the {} nodes for mpirun",
                        nodes.len()
                    ));
                    rt.block_on(crate::nccl::nodes::setup_node_ssh(reach.clone(), &fleet, &nodes))?;
                    ssh_ready = true;
                }
                let mut handles = vec![];
                for g in groups {
                    let group_nodes: Vec<NodeTarget> = g.iter().map(|i| nodes[*i].clone()).collect();
                    let purpose = format!(
                        "stragglers, {}: {}",
                        stage_name(stage),
                        group_nodes
                            .iter()
                            .map(|n| n.name.as_str())
                            .collect::<Vec<_>>()
                            .join(" ")
                    );
                    let (reach, spec, paths, fleet, mpirun) = (
                        reach.clone(),
                        spec.clone(),
                        paths.clone(),
                        fleet.clone(),
                        args.bench.mpirun.clone(),
                    );
                    let machine = machine.clone();
                    handles.push(rt.spawn(async move {
                        let start = Start {
                            fleet: fleet.clone(),
                            nodes: group_nodes,
                            reach: reach.clone(),
                            spec,
                            mpirun,
                            machine,
                            purpose: Some(purpose),
                            node_ssh: false,
                            preflight: false,
                        };
                        let started = match crate::nccl::nodes::start(&paths.state_dir, &start, &|_| {}).await
                        {
                            Ok(s) => s,
                            Err(e) => {
                                return GroupRun {
                                    group: g,
                                    id: String::new(),
                                    busbw: None,
                                    error: Some(e.to_string()),
                                }
                            }
                        };
                        let (id, heads) = (started.id, started.heads);
                        let (f, _) =
                            remote::follow_to_end(&paths.state_dir, reach, &fleet, &id, &heads, |_, _| {})
                                .await;
                        let worst = f.worst();
                        let busbw = if worst == 0 { f.report.peak_busbw() } else { None };
                        let error = match (worst, busbw) {
                            (0, Some(_)) => None,
                            (0, None) => Some("no rows of nccl-tests output".to_string()),
                            (c, _) => Some(format!(
                                "exit {c}: {}",
                                f.head_tail
                                    .iter()
                                    .rev()
                                    .find(|l| !l.starts_with('#') && !l.trim().is_empty())
                                    .map_or("", |l| l.as_str())
                            )),
                        };
                        GroupRun {
                            group: g,
                            id,
                            busbw,
                            error,
                        }
                    }));
                }
                let mut figures = vec![];
                for h in handles {
                    let r = rt.block_on(h)?;
                    let label = r
                        .group
                        .iter()
                        .map(|i| nodes[*i].name.as_str())
                        .collect::<Vec<_>>()
                        .join("+");
                    match (&r.busbw, &r.error) {
                        (Some(b), _) => status.print(&format!("  {label}: peak busbw {b} GB/s ({})", r.id)),
                        (None, e) => status.print(&format!(
                            "  {label}: failed ({}): {}",
                            r.id,
                            e.as_deref().unwrap_or("?")
                        )),
                    }
                    figures.push((r.group.clone(), r.busbw));
                    status.print(&crate::progress::tally(
                        figures.len(),
                        total,
                        "runs of this stage",
                    ));
                    runs.push(r);
                }
                finder.record(&figures);
            }
        }
    };
    drop(status);
    let name = |i: usize| nodes[i].name.clone();
    let run_id = |group: &[usize]| runs.iter().find(|r| r.group == group).map(|r| r.id.clone());
    let saved = StragglerReport {
        fleet: fleet.clone(),
        at: store::now_unix(),
        collective: spec.collective.clone(),
        threshold: args.threshold,
        nodes: nodes.iter().map(|n| n.name.clone()).collect(),
        node_ranking: finding.node_ranking.iter().map(|(i, b)| (name(*i), *b)).collect(),
        link_ranking: finding
            .link_ranking
            .iter()
            .map(|((a, b), bw)| (name(*a), name(*b), *bw))
            .collect(),
        slow_nodes: finding
            .slow_nodes
            .iter()
            .map(|b| (name(b.nodes[0]), b.reason.clone()))
            .collect(),
        slow_links: finding
            .slow_links
            .iter()
            .map(|b| (name(b.nodes[0]), name(b.nodes[1]), b.reason.clone()))
            .collect(),
        unresolved: finding.unresolved.iter().map(|i| name(*i)).collect(),
        named: finding.named().map(name),
    };
    if let Err(e) = history::save_stragglers(&paths.state_dir, &saved) {
        errln!("the result could not be kept for the cockpit: {e}");
    }
    if args.json {
        let doc = serde_json::json!({
            "fleet": fleet,
            "nodes": nodes.iter().map(|n| n.name.clone()).collect::<Vec<_>>(),
            "collective": spec.collective,
            "threshold": args.threshold,
            "runs": finding.runs.iter().map(|m| serde_json::json!({
                "stage": m.stage, "nodes": m.nodes.iter().map(|i| name(*i)).collect::<Vec<_>>(),
                "busbw": m.busbw, "slow": m.slow, "id": run_id(&m.nodes),
            })).collect::<Vec<_>>(),
            "node_ranking": finding.node_ranking.iter().map(|(i, b)| serde_json::json!({"node": name(*i), "busbw": b})).collect::<Vec<_>>(),
            "link_ranking": finding.link_ranking.iter().map(|((a, b), bw)| serde_json::json!({"nodes": [name(*a), name(*b)], "busbw": bw})).collect::<Vec<_>>(),
            "slow_nodes": finding.slow_nodes.iter().map(|b| serde_json::json!({"node": name(b.nodes[0]), "reason": b.reason})).collect::<Vec<_>>(),
            "slow_links": finding.slow_links.iter().map(|b| serde_json::json!({"nodes": b.nodes.iter().map(|i| name(*i)).collect::<Vec<_>>(), "reason": b.reason})).collect::<Vec<_>>(),
            "unresolved": finding.unresolved.iter().map(|i| name(*i)).collect::<Vec<_>>(),
            "named": finding.named().map(name),
        });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        out!("{}", report(&finding, &|i| name(i)));
    }
    let slow =
        !finding.slow_nodes.is_empty() || !finding.slow_links.is_empty() || !finding.unresolved.is_empty();
    Ok(if slow {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The text report: rankings, then what is slow and why.
fn report(f: &Finding, name: &dyn Fn(usize) -> String) -> String {
    use std::fmt::Write as _;
    let bw = |b: Option<f64>| b.map_or("failed".to_string(), |x| format!("{x:.2} GB/s"));
    let mut s = String::from("nodes alone, slowest first:\n");
    for (i, b) in &f.node_ranking {
        let _ = writeln!(s, "  {:<20} {}", name(*i), bw(*b));
    }
    if !f.link_ranking.is_empty() {
        s.push_str("node pairs, slowest first:\n");
        for ((a, b), x) in &f.link_ranking {
            let _ = writeln!(s, "  {:<20} {}", format!("{}+{}", name(*a), name(*b)), bw(*x));
        }
    }
    for b in &f.slow_nodes {
        let _ = writeln!(s, "SLOW NODE {}: {}", name(b.nodes[0]), b.reason);
    }
    for b in &f.slow_links {
        let _ = writeln!(
            s,
            "SLOW LINK {}-{}: {}",
            name(b.nodes[0]),
            name(b.nodes[1]),
            b.reason
        );
    }
    if !f.unresolved.is_empty() {
        let _ = writeln!(
            s,
            "UNRESOLVED: {} (every pair with them slow or failed, and no good node to test them with)",
            f.unresolved
                .iter()
                .map(|i| name(*i))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if f.slow_nodes.is_empty() && f.slow_links.is_empty() && f.unresolved.is_empty() {
        s.push_str("no slow node or link: every figure is within the threshold of its stage's usual one\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use crate::cli::{Cli, Command, NcclCommand};
    use clap::Parser;

    /// The shared benchmark flags with each command's size defaults, and given flags
    /// taken alike by both.
    #[test]
    fn each_command_has_its_size_defaults() {
        let bench = |args: &[&str]| match Cli::try_parse_from(args).unwrap().command {
            Some(Command::Nccl(NcclCommand::Run(a))) => a.bench,
            Some(Command::Nccl(NcclCommand::Stragglers(a))) => a.bench,
            other => panic!("{other:?}"),
        };
        let run = bench(&["flightdeck", "nccl", "run", "lab"]);
        assert_eq!((run.min_bytes.as_str(), run.max_bytes.as_str()), ("8", "8G"));
        let s = bench(&["flightdeck", "nccl", "stragglers", "lab"]);
        assert_eq!((s.min_bytes.as_str(), s.max_bytes.as_str()), ("64M", "4G"));
        assert_eq!((s.iters, s.warmup, s.dtype.as_str()), (20, 5, "float"));
        let s = bench(&["flightdeck", "nccl", "stragglers", "lab", "-b", "1M", "-n", "3"]);
        assert_eq!(
            (s.min_bytes.as_str(), s.max_bytes.as_str(), s.iters),
            ("1M", "4G", 3)
        );
    }
}
