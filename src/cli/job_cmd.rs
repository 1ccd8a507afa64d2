//! `flightdeck job run|list|show|logs|stop`: training jobs launched detached on every
//! node of a fleet, followed, re-attached, judged from their logs and stopped.

use super::{Cli, JobCommand};
use crate::detach::Status;
use crate::exec;
use crate::fleet::BackendKind;
use crate::jobs::remote;
use crate::jobs::{self, metrics, state_word, FollowEvent, JobMetrics, JobNode, JobRunner};
use crate::paths::Paths;
use crate::store::{self, JobRecord, Store};
use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

pub fn run(c: &JobCommand, cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    match c {
        JobCommand::Run {
            file,
            detach,
            stop_on_failure,
            no_preflight,
            files_outside,
            dry_run,
        } if *dry_run => {
            let _ = (detach, stop_on_failure, no_preflight, files_outside);
            dry_run_job(file, cli, paths)
        }
        JobCommand::Run {
            file,
            detach,
            stop_on_failure,
            no_preflight,
            files_outside,
            ..
        } => run_job(
            file,
            *detach,
            *stop_on_failure,
            *no_preflight,
            *files_outside,
            cli,
            paths,
        ),
        JobCommand::List { json } => list(*json, cli, paths),
        JobCommand::Show { name, json } => show(name, *json, cli, paths),
        JobCommand::Logs {
            name,
            node,
            follow,
            tail,
        } => logs(name, *node, *follow, *tail, cli, paths),
        JobCommand::Stop { name, grace } => stop(name, *grace, cli, paths),
    }
}

/// Where a job on `fleet` starts: the fleet's name, backend family, nodes and reach,
/// and its file's spec when it has one (preflight on, no `files:` from outside). The
/// nodes are those the cloud has now where nodes come and go without flightdeck (a GKE
/// pool that DWS or the autoscaler emptied since `fleet apply`: gke review H1), unless
/// `recorded` (a dry run, which asks no cluster).
fn fleet_of(fleet: &str, cli: &Cli, paths: &Paths, recorded: bool) -> anyhow::Result<remote::Target> {
    let (name, _, nodes, reach) = if recorded {
        super::resolve_fleet_kind(fleet, cli, paths)?
    } else {
        super::resolve_fleet_kind_now(fleet, cli, paths)?
    };
    let (state, _) = Store::new(&paths.state_dir).load()?;
    let record = state.fleet(&name).ok();
    // What was applied, never the file as it is now; a fleet file not applied as read.
    let loaded = crate::fleet::applied::applied_or_file(record, fleet);
    let backend = family(record, loaded.as_ref(), fleet)?;
    Ok(remote::Target {
        fleet: name,
        backend,
        nodes,
        reach,
        spec: loaded.map(|f| f.spec),
        preflight: true,
        files_outside: false,
    })
}

/// A fleet's backend family: its record's, else (a fleet file not applied) its file's.
fn family(
    record: Option<&store::FleetRecord>,
    file: Option<&crate::fleet::Fleet>,
    fleet: &str,
) -> anyhow::Result<BackendKind> {
    record
        .map(|r| r.backend)
        .or(file.map(|f| f.backend))
        .ok_or_else(|| anyhow::anyhow!("no fleet `{fleet}` in the state, and no fleet file there"))
}

fn run_job(
    file: &std::path::Path,
    detach: bool,
    stop_on_failure: bool,
    no_preflight: bool,
    files_outside: bool,
    cli: &Cli,
    paths: &Paths,
) -> anyhow::Result<ExitCode> {
    let Some(job) = load_job(file) else {
        return Ok(ExitCode::FAILURE);
    };
    let target = remote::Target {
        preflight: !no_preflight,
        files_outside,
        ..fleet_of(&fleet_arg(&job, paths), cli, paths, false)?
    };
    let runner = jobs::runner_for(target.backend, target.reach.clone());
    let rt = super::runtime()?;
    let store = Store::new(&paths.state_dir);
    let name = job.name.clone();
    let progress = |m: String| errln!("job {name}: {m}");
    let (record, nodes) = rt
        .block_on(remote::start(&store, &job, target, stop_on_failure, &progress))
        .map_err(anyhow::Error::msg)?;
    let id = record.id.clone();
    errln!(
        "job {id} started; it runs on without this terminal: `flightdeck job logs {} --follow` follows it again, `flightdeck job stop {}` ends it",
        job.name, job.name
    );
    if detach {
        outln!("{id}");
        return Ok(ExitCode::SUCCESS);
    }
    let watched = nodes.iter().map(|n| (n.clone(), 1)).collect();
    follow_and_report(&rt, runner, &record, &nodes, watched, true, paths)
}

/// What a job file's `fleet:` names: a recorded fleet, else a fleet file (a relative
/// path is the job file's folder's, else the working directory's).
fn fleet_arg(job: &jobs::Job, paths: &Paths) -> String {
    let recorded = Store::new(&paths.state_dir)
        .load()
        .ok()
        .is_some_and(|(s, _)| s.fleet(&job.fleet).is_ok());
    if recorded {
        return job.fleet.clone();
    }
    let beside = job
        .file
        .parent()
        .map(|d| d.join(&job.fleet))
        .filter(|p| p.is_file());
    match beside {
        Some(p) => p.display().to_string(),
        None => job.fleet.clone(),
    }
}

/// `job run --dry-run` on a GKE fleet: the JobSet the job would create, built by the
/// builder `job run` uses ([`jobs::jobset::job_jobset`]),
/// as YAML on stdout; nothing is created and no cluster is asked. The ranks come from
/// `nodes:` (else the fleet's recorded nodes), the GPUs a node has from `gpus_per_node:`
/// (else the fleet file's machine type), DWS flex-start from the fleet file's
/// `flex_start` (a run also reads the flex-start label of a recorded node).
fn dry_run_job(file: &std::path::Path, cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    use crate::nccl::profile;
    let Some(job) = load_job(file) else {
        return Ok(ExitCode::FAILURE);
    };
    let target = fleet_of(&fleet_arg(&job, paths), cli, paths, true)?;
    let spec = target.spec.as_ref();
    let g = match spec {
        Some(s) => s.gke.as_ref().ok_or_else(|| {
            anyhow::anyhow!(
                "{}: --dry-run prints the JobSet of a job on a GKE fleet; `{}` is {}",
                file.display(),
                target.fleet,
                target.backend.a_fleet()
            )
        })?,
        None => anyhow::bail!(
            "{}: fleet `{}` has no fleet file to read its cluster, pools and queue from: name the fleet file in `fleet:`",
            file.display(),
            target.fleet
        ),
    };
    jobs::runner_for(target.backend, target.reach.clone())
        .admits(&job)
        .map_err(anyhow::Error::msg)?;
    let want = match (job.spec.nodes, target.nodes.len()) {
        (Some(n), _) => n as usize,
        (None, 0) => anyhow::bail!(
            "{}: fleet `{}` has no recorded nodes (a pool at zero): give `nodes:` (how many pods) in the job file",
            file.display(),
            target.fleet
        ),
        (None, n) => n,
    };
    let ranks = crate::cloud::gke::backend::Target::from_gke(g).pad(&target.fleet, &target.nodes, want);
    let node = ranks
        .first()
        .and_then(|n| n.kube().cloned())
        .ok_or_else(|| anyhow::anyhow!("fleet `{}`: no GKE rank", target.fleet))?;
    let (fleet_profile, _) = profile::fleet_facts(spec);
    let flavour = jobs::profile(&job, fleet_profile);
    let lines = profile::env_lines(target.backend, flavour);
    let machine_type = spec
        .and_then(|s| s.instance_types.as_ref())
        .and_then(|t| t.first().cloned());
    let gpus = job
        .spec
        .gpus_per_node
        .or_else(|| machine_type.as_deref().and_then(crate::nccl::expect::gpus_per_node))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{}: --dry-run asks no cluster how many GPUs a node has: give `gpus_per_node:` in the job file (or `instance_types` in fleet `{}`'s file)",
                file.display(),
                target.fleet
            )
        })?
        .max(1);
    let at = jobs::jobset::Placement {
        node: &node,
        pools: g.node_pools.as_deref().unwrap_or(&[]),
        queue: g.queue.as_deref(),
        flex_start: spec.and_then(|s| s.flex_start).map(|d| d.0),
        topology: g.topology.as_ref(),
    };
    let id = jobs::launch::new_id(&job.name, store::now_unix());
    let owner = crate::cloud::gke::Owner::of_process();
    let mut set =
        jobs::jobset::job_jobset(&job, &id, want, gpus, &lines, &at, flavour, g.networks.as_deref())
            .map_err(anyhow::Error::msg)?;
    crate::cloud::gke::stamp_owner(&owner, &mut set);
    let mut objects = vec![set];
    // The env's Secret as it would be created, its values left out: a dry run's output
    // goes to terminals, files and CI logs (the uid is the JobSet's once it exists).
    if let Some(mut secret) = jobs::jobset::env_secret(&job, &id, &at, "(the JobSet's uid)") {
        crate::cloud::gke::stamp_owner(&owner, &mut secret);
        if let Some(data) = secret["stringData"].as_object_mut() {
            for v in data.values_mut() {
                *v = "(from the job file's env; not printed)".into();
            }
        }
        objects.push(secret);
    }
    outln!("{}", crate::nccl::pods::objects_yaml(&objects).trim_end());
    Ok(ExitCode::SUCCESS)
}

/// Job file `file` read, its warnings and errors printed (None after errors).
fn load_job(file: &std::path::Path) -> Option<jobs::spec::Job> {
    let lookup = |k: &str| std::env::var(k).ok();
    match jobs::spec::load(file, &lookup) {
        Ok(job) => {
            for w in &job.warnings {
                errln!("{w}");
            }
            Some(job)
        }
        Err(diags) => {
            for d in diags {
                errln!("{}", super::common::diag_line(&d));
            }
            None
        }
    }
}

/// Which job a NAME means: an id, or the latest job of that name.
fn find(paths: &Paths, name: &str) -> anyhow::Result<JobRecord> {
    let (state, _) = Store::new(&paths.state_dir).load()?;
    if let Some(j) = state.jobs.iter().find(|j| j.id == name) {
        return Ok(j.clone());
    }
    // The latest: by start time, then by place in the state (a later launch within the
    // same second is recorded after; ids end in random digits and do not order).
    state
        .jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| j.name == name)
        .max_by_key(|(i, j)| (j.started_at, *i))
        .map(|(_, j)| j.clone())
        .ok_or_else(|| {
            let names: Vec<&str> = state.jobs.iter().map(|j| j.name.as_str()).collect();
            let hint = crate::yaml::did_you_mean(name, names.iter().copied());
            anyhow::anyhow!("no job `{name}` in the state{hint}")
        })
}

/// The job's nodes as the fleet resolves them now, and its fleet's runner.
fn job_nodes(
    record: &JobRecord,
    cli: &Cli,
    paths: &Paths,
) -> anyhow::Result<(Vec<JobNode>, Arc<dyn JobRunner>)> {
    let (_, all, reach) = super::resolve_fleet(&record.fleet, cli, paths)?;
    let (state, _) = Store::new(&paths.state_dir).load()?;
    let (runner, nodes) = match state.fleet(&record.fleet).ok() {
        Some(f) => {
            let runner = jobs::runner_for(f.backend, reach);
            let nodes = runner.job_nodes(record, f);
            (runner, nodes)
        }
        None => {
            // Not applied: a fleet file of that name, as `resolve_fleet` found it.
            let file = crate::fleet::load(std::path::Path::new(&record.fleet)).ok();
            let kind = family(None, file.as_ref(), &record.fleet)?;
            (
                jobs::runner_for(kind, reach),
                jobs::runner::job_nodes(record, &all),
            )
        }
    };
    Ok((nodes.map_err(anyhow::Error::msg)?, runner))
}

fn record_codes(
    paths: &Paths,
    id: &str,
    found: &[(usize, Result<Status, String>)],
    stop: remote::Stop,
) -> anyhow::Result<()> {
    Ok(remote::record_codes(
        &Store::new(&paths.state_dir),
        id,
        found,
        stop,
    )?)
}

fn metrics_for(record: &JobRecord) -> JobMetrics {
    let patterns = record
        .metrics
        .iter()
        .filter_map(|p| metrics::Pattern::new(p).ok())
        .collect();
    JobMetrics::new(patterns, record.flops_per_token, record.peak_tflops)
}

/// Follow `watched` (nodes, and the line to start each at), printing lines prefixed by node,
/// reporting a failing node at once (and stopping the others when the job asks), then
/// a summary. Exit status: the worst node's.
fn follow_and_report(
    rt: &tokio::runtime::Runtime,
    runner: Arc<dyn JobRunner>,
    record: &JobRecord,
    nodes: &[JobNode],
    watched: Vec<(JobNode, usize)>,
    summary: bool,
    paths: &Paths,
) -> anyhow::Result<ExitCode> {
    if watched.is_empty() {
        anyhow::bail!("job {} has no such node", record.id);
    }
    let prefix = watched.len() > 1;
    let width = nodes.iter().map(|n| n.target.name.len()).max().unwrap_or(0);
    let mut m = metrics_for(record);
    let mut codes: BTreeMap<usize, Option<i32>> = BTreeMap::new();
    // Each node's start and end by its clock, from its wrapper.
    let mut times: BTreeMap<usize, (Option<u64>, Option<u64>)> = BTreeMap::new();
    let mut lost: Vec<(usize, String)> = vec![];
    // The rank whose failure stopped the others (stop_on_failure), once one did.
    let mut failed: Option<usize> = None;
    rt.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::channel(4096);
        let h = tokio::spawn(runner.follow(record.id.clone(), watched.clone(), tx));
        let mut stdout = std::io::stdout().lock();
        while let Some(ev) = rx.recv().await {
            match ev {
                FollowEvent::Line { rank, text } => {
                    m.push_line(rank, &text);
                    let text = crate::term::visible::for_stdout(&text);
                    // A stream: colour on a terminal, every byte into a pipe.
                    let r = if prefix {
                        // stream
                        writeln!(stdout, "{:>width$}: {text}", nodes[rank].target.name)
                    } else {
                        // stream
                        writeln!(stdout, "{text}")
                    };
                    if r.is_err() {
                        break;
                    }
                }
                FollowEvent::Exit {
                    rank,
                    code,
                    started,
                    ended,
                } => {
                    let _ = stdout.flush();
                    codes.insert(rank, code);
                    times.insert(rank, (started, ended));
                    if code != Some(0) {
                        errln!(
                            "job {}: {} exited with {}",
                            record.id,
                            nodes[rank].target.name,
                            code.map_or("an unknown code".into(), |c| c.to_string())
                        );
                        if record.stop_on_failure && failed.is_none() {
                            failed = Some(rank);
                            errln!("job {}: stop_on_failure: stopping the other nodes", record.id);
                            let others: Vec<JobNode> =
                                nodes.iter().filter(|n| n.rank != rank).cloned().collect();
                            let (r, id, grace) = (runner.clone(), record.id.clone(), record.stop_grace);
                            tokio::spawn(async move { r.stop(&id, &others, grace).await });
                        }
                    }
                }
                FollowEvent::Lost { rank, error } => {
                    errln!("job {}: lost {}: {error}", record.id, nodes[rank].target.name);
                    lost.push((rank, error));
                }
            }
        }
        let _ = stdout.flush();
        drop(rx);
        let _ = h.await;
    });
    let found: Vec<(usize, Result<Status, String>)> = codes
        .iter()
        .filter_map(|(r, c)| {
            let (started, ended) = times.get(r).copied().unwrap_or_default();
            c.map(|code| (*r, Ok(Status::Exited { code, started, ended })))
        })
        .collect();
    let stop = failed.map_or(remote::Stop::No, remote::Stop::Failure);
    record_codes(paths, &record.id, &found, stop)?;
    if summary {
        err!("{}", summary_text(&m, nodes));
    }
    // The failure that ended the job, not the stop it caused (143 from the others'
    // SIGTERM); else the worst node's.
    let code_of = |rank: usize| codes.get(&rank).copied().flatten().unwrap_or(exec::UNREACHABLE);
    let worst = match failed {
        Some(rank) => code_of(rank),
        None => watched.iter().map(|(n, _)| code_of(n.rank)).max().unwrap_or(0),
    };
    if !lost.is_empty() {
        errln!(
            "job {}: following ended on {} before the job did; it may still run: `flightdeck job logs {} --follow`",
            record.id,
            crate::words::plural(lost.len(), "node"),
            record.name
        );
    }
    Ok(ExitCode::from(worst.clamp(0, 255) as u8))
}

/// The metrics in a few lines: steps, loss first and last, rates, MFU, drifting nodes.
fn summary_text(m: &JobMetrics, nodes: &[JobNode]) -> String {
    let Some(parts) = m.summary().parts() else {
        return "no metric lines seen (step/loss lines in a known format or the job's `metrics` patterns)\n"
            .into();
    };
    let mut out = parts.join(" · ") + "\n";
    for d in m.drift() {
        out.push_str(&format!(
            "SLOW NODE: {} median step time {:.3} s, {:.0}% above the nodes' median {:.3} s\n",
            nodes.get(d.node).map_or("?", |n| n.target.name.as_str()),
            d.median_step_time,
            (d.median_step_time / d.fleet_median - 1.0) * 100.0,
            d.fleet_median
        ));
    }
    out
}

/// Ask the nodes of unfinished jobs how they are, and record what they say; notes on
/// what could not be asked.
fn refresh(paths: &Paths, cli: &Cli, rt: &tokio::runtime::Runtime) -> anyhow::Result<Vec<(String, String)>> {
    let store = Store::new(&paths.state_dir);
    let (state, _) = store.load()?;
    let found = rt.block_on(remote::refresh(&store, &state.jobs, |j| {
        job_nodes(j, cli, paths)
            .map(|(nodes, runner)| (runner, nodes))
            .map_err(|e| e.to_string())
    }));
    Ok(found.notes)
}

/// How long the job ran ([`crate::jobs::duration`], the cockpit's too).
fn duration(j: &JobRecord) -> u64 {
    crate::jobs::duration(j, store::now_unix())
}

fn hms(s: u64) -> String {
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

fn list(json: bool, cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    let rt = super::runtime()?;
    let notes = refresh(paths, cli, &rt)?;
    for (id, n) in &notes {
        errln!("job {id}: {n}");
    }
    let (state, _) = Store::new(&paths.state_dir).load()?;
    let mut jobs: Vec<&JobRecord> = state.jobs.iter().collect();
    jobs.sort_by_key(|j| std::cmp::Reverse(j.started_at));
    if json {
        let doc: Vec<serde_json::Value> = jobs.iter().map(|j| job_json(j)).collect();
        outln!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(ExitCode::SUCCESS);
    }
    use super::table::{render, stdout_width, Col};
    let cols = [
        Col::left("NAME").shrink(),
        Col::left("ID"),
        Col::left("FLEET").drop(2),
        Col::left("STATE"),
        Col::right("NODES").drop(1),
        Col::right("DURATION"),
        Col::left("EXIT CODES").drop(3),
    ];
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|j| {
            vec![
                j.name.clone(),
                j.id.clone(),
                j.fleet.clone(),
                state_word(j).to_string(),
                j.nodes.len().to_string(),
                hms(duration(j)),
                exit_codes(j),
            ]
        })
        .collect();
    out!("{}", render(&cols, &rows, stdout_width()));
    Ok(ExitCode::SUCCESS)
}

fn exit_codes(j: &JobRecord) -> String {
    j.nodes
        .iter()
        .map(|n| n.exit_code.map_or("-".into(), |c| c.to_string()))
        .collect::<Vec<_>>()
        .join(",")
}

fn job_json(j: &JobRecord) -> serde_json::Value {
    serde_json::json!({
        "name": j.name,
        "id": j.id,
        "fleet": j.fleet,
        "state": state_word(j),
        "started_at": store::format_utc(j.started_at),
        "ended_at": j.ended_at.map(store::format_utc),
        "duration_s": duration(j),
        "profile": j.profile,
        "failed_rank": j.culprit(),
        "nodes": j.nodes.iter().enumerate().map(|(rank, n)| serde_json::json!({
            "rank": rank, "node": n.node, "pid": n.pid, "exit_code": n.exit_code, "log": n.log,
            "cause": n.exit_code.and_then(crate::detach::code_cause),
        })).collect::<Vec<_>>(),
    })
}

/// The causes flightdeck's own exit codes name on a job's nodes (`rank N: cause`), one
/// per line, for the text of `job show` and `job run`.
fn code_causes(j: &JobRecord) -> Vec<String> {
    j.nodes
        .iter()
        .enumerate()
        .filter_map(|(rank, n)| {
            Some(format!(
                "rank {rank}: {}",
                crate::detach::code_cause(n.exit_code?)?
            ))
        })
        .collect()
}

fn show(name: &str, json: bool, cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    let rt = super::runtime()?;
    let record = find(paths, name)?;
    let (nodes, runner) = job_nodes(&record, cli, paths)?;
    if !record.finished() {
        let mut st = rt.block_on(runner.status(&record.id, &nodes));
        // As `job list` does: a node without the job's directory (yet) records nothing; a
        // launch may still be on its way there.
        st.retain(|(_, s)| !matches!(s, Ok(Status::Missing)));
        record_codes(paths, &record.id, &st, remote::Stop::No)?;
    }
    let record = find(paths, &record.id)?;
    // A GKE job's ranks that wait: why, and the latest events about their pods.
    let waiting: Vec<crate::cloud::gke::jobs::Waiting> = match nodes.iter().find_map(|n| n.target.kube()) {
        Some(k) if !record.finished() => rt
            .block_on(crate::cloud::gke::jobs::waiting(
                &crate::cloud::gke::Clients::default(),
                k,
                &record.id,
            ))
            .unwrap_or_default(),
        _ => vec![],
    };
    let logs = rt.block_on(runner.tail(&record.id, &nodes, Some(metrics::KEEP)));
    let mut m = metrics_for(&record);
    let mut unreadable = vec![];
    for (rank, res) in &logs {
        match res {
            Ok(text) => {
                for line in text.lines() {
                    m.push_line(*rank, line);
                }
            }
            Err(e) => unreadable.push(format!("{}: {e}", nodes[*rank].target.name)),
        }
    }
    if json {
        let mut doc = job_json(&record);
        doc["metrics"] = serde_json::to_value(m.summary())?;
        doc["per_node"] = serde_json::Value::Array(
            nodes
                .iter()
                .map(|n| {
                    let series = m.nodes.get(&n.rank);
                    let last = series.and_then(|s| s.samples.back());
                    serde_json::json!({
                        "rank": n.rank,
                        "name": n.target.name,
                        "metric_lines": series.map_or(0, |s| s.seen),
                        "last": last,
                    })
                })
                .collect(),
        );
        doc["slow_nodes"] = serde_json::Value::Array(
            m.drift()
                .iter()
                .map(|d| {
                    serde_json::json!({
                        "rank": d.node,
                        "name": nodes.get(d.node).map(|n| n.target.name.clone()),
                        "median_step_time_s": d.median_step_time,
                        "nodes_median_step_time_s": d.fleet_median,
                    })
                })
                .collect(),
        );
        doc["unreadable"] = serde_json::json!(unreadable);
        doc["waiting"] = serde_json::to_value(&waiting)?;
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        outln!(
            "job {} ({}) on `{}`: {}, {}, {} elapsed, exit codes {}",
            record.name,
            record.id,
            record.fleet,
            state_word(&record),
            crate::words::plural(record.nodes.len(), "node"),
            hms(duration(&record)),
            exit_codes(&record)
        );
        for c in code_causes(&record) {
            outln!("  {c}");
        }
        for w in &waiting {
            outln!("  {}", crate::term::visible::for_stdout(&w.line()));
        }
        out!("{}", summary_text(&m, &nodes));
        for u in &unreadable {
            errln!("cannot read the log of {u}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn logs(
    name: &str,
    node: Option<usize>,
    follow: bool,
    tail: Option<usize>,
    cli: &Cli,
    paths: &Paths,
) -> anyhow::Result<ExitCode> {
    let rt = super::runtime()?;
    let record = find(paths, name)?;
    let (nodes, runner) = job_nodes(&record, cli, paths)?;
    if let Some(n) = node {
        if n >= nodes.len() {
            anyhow::bail!("--node {n}: job {} has nodes 0..{}", record.id, nodes.len() - 1);
        }
    }
    let selected: Vec<JobNode> = nodes
        .iter()
        .filter(|n| node.is_none_or(|o| o == n.rank))
        .cloned()
        .collect();
    if follow {
        // From the start, or from the last N lines of each node.
        let mut from = BTreeMap::new();
        if let Some(n) = tail {
            for (rank, count) in rt.block_on(runner.line_counts(&record.id, &selected)) {
                from.insert(rank, count.saturating_sub(n) + 1);
            }
        }
        let watched = selected
            .iter()
            .map(|n| (n.clone(), from.get(&n.rank).copied().unwrap_or(1)))
            .collect();
        return follow_and_report(&rt, runner, &record, &nodes, watched, false, paths);
    }
    let got = rt.block_on(runner.tail(&record.id, &selected, tail));
    let prefix = selected.len() > 1;
    let width = selected.iter().map(|n| n.target.name.len()).max().unwrap_or(0);
    let mut out = std::io::stdout().lock();
    let mut worst = 0;
    for (rank, res) in &got {
        match res {
            Ok(text) => {
                let text = crate::term::visible::for_stdout(text);
                for l in text.lines() {
                    let r = if prefix {
                        // stream
                        writeln!(out, "{:>width$}: {l}", nodes[*rank].target.name)
                    } else {
                        // stream
                        writeln!(out, "{l}")
                    };
                    if r.is_err() {
                        return Ok(ExitCode::SUCCESS);
                    }
                }
            }
            Err(e) => {
                errln!("{}: cannot read the log: {e}", nodes[*rank].target.name);
                worst = 1;
            }
        }
    }
    Ok(ExitCode::from(worst))
}

fn stop(name: &str, grace: Option<u32>, cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    let rt = super::runtime()?;
    let record = find(paths, name)?;
    let (nodes, runner) = job_nodes(&record, cli, paths)?;
    let grace = grace.unwrap_or(if record.stop_grace == 0 {
        10
    } else {
        record.stop_grace
    });
    errln!(
        "job {}: stopping on {} (TERM, KILL after {grace} s)",
        record.id,
        crate::words::plural(nodes.len(), "node")
    );
    let res = rt.block_on(runner.stop(&record.id, &nodes, grace));
    let mut worst = 0;
    for (rank, r) in &res {
        let name = &nodes[*rank].target.name;
        match r {
            Ok(st) => {
                outln!("{name}: {}", st.words());
                if matches!(st, Status::Starting | Status::Running { .. }) {
                    worst = 1;
                }
            }
            Err(e) => {
                outln!("{name}: {e}");
                worst = 1;
            }
        }
    }
    record_codes(paths, &record.id, &res, remote::Stop::Operator)?;
    Ok(ExitCode::from(worst))
}
