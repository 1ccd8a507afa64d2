//! The I/O side of jobs: upload, launch, follow, query and stop a job's processes on its
//! nodes through [`crate::exec`] (this machine, or SSH). Used by `flightdeck job` and by
//! the cockpit's Jobs view alike.

use super::launch::{self, job_dir};
use super::spec::Job;
use crate::detach::{self, Status};
use crate::exec::{self, Event};
use crate::fleet::NodeTarget;
use crate::reach::Reach;
use tokio::sync::mpsc;

/// A node of a job: its rank (position in the job) and how to reach it.
#[derive(Debug, Clone)]
pub struct JobNode {
    pub rank: usize,
    pub target: NodeTarget,
}

/// What following a job reports.
#[derive(Debug, Clone, PartialEq)]
pub enum FollowEvent {
    /// A line of a node's output, in order.
    Line { rank: usize, text: String },
    /// The node's process group ended (`None`: the code could not be read).
    Exit { rank: usize, code: Option<i32> },
    /// The connection to the node ended before the job did; following it again resumes.
    Lost { rank: usize, error: String },
}

fn fail_text(code: i32, out: &str, err: &str) -> String {
    let text = format!("{} {}", err.trim(), out.trim());
    let text = text.trim();
    if text.is_empty() {
        format!("exit {code}")
    } else {
        text.lines().last().unwrap_or(text).to_string()
    }
}

/// The Kubernetes clients when `nodes` are a GKE fleet's (their work runs as a JobSet,
/// not as detached processes on the nodes).
fn gke(reach: &Reach, first: Option<&NodeTarget>) -> Option<crate::cloud::gke::Clients> {
    first.and_then(|n| n.kube()).map(|_| reach.kube().clone())
}

/// Upload the job's files to every node, then start the job's script on each, detached.
/// Returns each node's pid, or why it could not start. `progress` hears each step.
pub async fn launch(
    reach: Reach,
    job: &Job,
    id: &str,
    nodes: &[JobNode],
    profile: &[String],
    progress: &(dyn Fn(String) + Sync),
) -> Vec<(usize, Result<u32, String>)> {
    let mut failed: Vec<(usize, String)> = vec![];
    for u in &job.uploads {
        let files = match launch::expand(u) {
            Ok(f) => f,
            Err(e) => {
                return nodes
                    .iter()
                    .map(|n| (n.rank, Err(format!("cannot read {}: {e}", u.local.display()))))
                    .collect()
            }
        };
        for (local, rel) in files {
            let bytes = match std::fs::read(&local) {
                Ok(b) => b,
                Err(e) => {
                    return nodes
                        .iter()
                        .map(|n| (n.rank, Err(format!("cannot read {}: {e}", local.display()))))
                        .collect()
                }
            };
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&local)
                .map(|m| m.permissions().mode() & 0o755)
                .unwrap_or(0o644)
                | 0o600;
            progress(format!(
                "uploading {} ({} bytes) to {}",
                local.display(),
                bytes.len(),
                crate::words::plural(nodes.len(), "node")
            ));
            let todo: Vec<&JobNode> = nodes
                .iter()
                .filter(|n| !failed.iter().any(|(r, _)| *r == n.rank))
                .collect();
            let cmds = todo
                .iter()
                .map(|n| {
                    let part = super::spec::Upload {
                        local: local.clone(),
                        remote: rel.clone(),
                    };
                    let (dir, path) = launch::upload_target(job, id, n.rank, &part);
                    let (command, input) = detach::upload_command(&dir, &path, &bytes, mode);
                    (n.target.clone(), command, input)
                })
                .collect();
            let res = exec::collect_with_input(reach.clone(), cmds).await;
            for (n, (code, out, err)) in todo.iter().zip(res) {
                if code != 0 {
                    failed.push((
                        n.rank,
                        format!("upload of {rel}: {}", fail_text(code, &out, &err)),
                    ));
                }
            }
        }
    }
    let all: Vec<NodeTarget> = nodes.iter().map(|n| n.target.clone()).collect();
    let todo: Vec<&JobNode> = nodes
        .iter()
        .filter(|n| !failed.iter().any(|(r, _)| *r == n.rank))
        .collect();
    let cmds: Vec<(NodeTarget, String, Vec<u8>)> = todo
        .iter()
        .map(|n| {
            let script = launch::node_script(job, id, &all, n.rank, profile);
            let (command, input) = detach::launch_command(&job_dir(id, n.rank), &script);
            (n.target.clone(), command, input)
        })
        .collect();
    progress(format!(
        "starting on {}",
        crate::words::plural(cmds.len(), "node")
    ));
    let res = exec::collect_with_input(reach, cmds).await;
    let mut out: Vec<(usize, Result<u32, String>)> = failed.into_iter().map(|(r, e)| (r, Err(e))).collect();
    for (n, (code, stdout, stderr)) in todo.iter().zip(res) {
        let pid = stdout
            .lines()
            .find_map(|l| l.strip_prefix("started "))
            .and_then(|p| p.trim().parse::<u32>().ok());
        out.push((
            n.rank,
            match (code, pid) {
                (0, Some(p)) => Ok(p),
                _ => Err(fail_text(code, &stdout, &stderr)),
            },
        ));
    }
    out.sort_by_key(|(r, _)| *r);
    out
}

/// Follow every node's output from line `from` (1 = the start) until its process group
/// ends, reporting on `tx`. Returns when every node has ended or been lost.
pub async fn follow(reach: Reach, id: String, nodes: Vec<(JobNode, usize)>, tx: mpsc::Sender<FollowEvent>) {
    if let Some(clients) = gke(&reach, nodes.first().map(|(n, _)| &n.target)) {
        return crate::cloud::gke::jobs::follow(clients, id, nodes, tx).await;
    }
    let ranks: Vec<(usize, usize)> = nodes.iter().map(|(n, _)| (n.target.index, n.rank)).collect();
    let jobs: Vec<(NodeTarget, String)> = nodes
        .iter()
        .map(|(n, from)| {
            (
                n.target.clone(),
                detach::follow_command(&job_dir(&id, n.rank), *from),
            )
        })
        .collect();
    let (etx, mut erx) = exec::channel(1024);
    let h = tokio::spawn(exec::run_each(reach, jobs, 256, etx));
    let mut ended: Vec<usize> = vec![];
    let rank_of = |index: usize| ranks.iter().find(|(i, _)| *i == index).map_or(index, |r| r.1);
    while let Some(e) = erx.recv().await {
        match e {
            Event::Line { node, text, .. } => {
                let rank = rank_of(node);
                let ev = match detach::exit_marker(&text) {
                    Some(code) => {
                        ended.push(rank);
                        FollowEvent::Exit { rank, code }
                    }
                    None => FollowEvent::Line { rank, text },
                };
                if tx.send(ev).await.is_err() {
                    break;
                }
            }
            Event::Done { node, result } => {
                let rank = rank_of(node);
                if !ended.contains(&rank) {
                    let error = result.error.unwrap_or_else(|| {
                        format!("the follow ended with exit {} before the job did", result.code)
                    });
                    let _ = tx.send(FollowEvent::Lost { rank, error }).await;
                }
            }
        }
    }
    h.abort();
}

/// Run one command per node (made from the node's job directory) and read each node's
/// (exit code, stdout, stderr) into a result.
async fn on_nodes<T>(
    reach: Reach,
    id: &str,
    nodes: &[JobNode],
    command: impl Fn(&str) -> String,
    read: impl Fn(i32, String, String) -> Result<T, String>,
) -> Vec<(usize, Result<T, String>)> {
    let cmds: Vec<(NodeTarget, String)> = nodes
        .iter()
        .map(|n| (n.target.clone(), command(&job_dir(id, n.rank))))
        .collect();
    let res = exec::collect(reach, cmds).await;
    nodes
        .iter()
        .zip(res)
        .map(|(n, (code, out, err))| (n.rank, read(code, out, err)))
        .collect()
}

/// Each node's [`Status`], or why it could not be read.
pub async fn status(reach: Reach, id: &str, nodes: &[JobNode]) -> Vec<(usize, Result<Status, String>)> {
    if let Some(clients) = gke(&reach, nodes.first().map(|n| &n.target)) {
        return crate::cloud::gke::jobs::status(&clients, id, nodes).await;
    }
    on_nodes(reach, id, nodes, detach::status_command, |code, out, err| {
        detach::parse_status(out.trim()).ok_or_else(|| fail_text(code, &out, &err))
    })
    .await
}

/// The status a stop or fence ends with: its last line.
fn final_status(code: i32, out: String, err: String) -> Result<Status, String> {
    out.lines()
        .last()
        .and_then(detach::parse_status)
        .ok_or_else(|| fail_text(code, &out, &err))
}

/// Stop the job on `nodes` (TERM, then KILL after `grace_s`); each node's exit code.
pub async fn stop(
    reach: Reach,
    id: &str,
    nodes: &[JobNode],
    grace_s: u32,
) -> Vec<(usize, Result<Status, String>)> {
    if let Some(clients) = gke(&reach, nodes.first().map(|n| &n.target)) {
        return crate::cloud::gke::jobs::stop(&clients, id, nodes).await;
    }
    on_nodes(
        reach,
        id,
        nodes,
        |dir| detach::stop_command(dir, grace_s),
        final_status,
    )
    .await
}

/// End a launch cut off by the death of its launcher on `nodes`
/// ([`detach::fence_command`]); each node's exit code.
pub async fn fence(
    reach: Reach,
    id: &str,
    nodes: &[JobNode],
    grace_s: u32,
) -> Vec<(usize, Result<Status, String>)> {
    on_nodes(
        reach,
        id,
        nodes,
        |dir| detach::fence_command(dir, grace_s),
        final_status,
    )
    .await
}

/// The last `lines` lines of each node's output (all with `None`).
pub async fn tail(
    reach: Reach,
    id: &str,
    nodes: &[JobNode],
    lines: Option<usize>,
) -> Vec<(usize, Result<String, String>)> {
    if let Some(clients) = gke(&reach, nodes.first().map(|n| &n.target)) {
        return crate::cloud::gke::jobs::tail(&clients, id, nodes, lines).await;
    }
    on_nodes(
        reach,
        id,
        nodes,
        |dir| detach::tail_command(dir, lines),
        |code, out, err| {
            if code == 0 {
                Ok(out)
            } else {
                Err(fail_text(code, &out, &err))
            }
        },
    )
    .await
}

/// The nodes of job `record` on its fleet `fleet` (a GKE fleet's ranks need no recorded
/// node: see [`crate::cloud::gke::backend::Target::pad`]).
pub fn job_nodes_of(
    record: &crate::store::JobRecord,
    fleet: &crate::store::FleetRecord,
) -> Result<Vec<JobNode>, String> {
    if fleet.backend == "gke" {
        let t = crate::cloud::gke::backend::Target::of_record(fleet)?;
        return job_nodes(record, &t.pad(&fleet.name, &fleet.nodes, record.nodes.len()));
    }
    job_nodes(record, &fleet.nodes)
}

/// The nodes of job `record` among its fleet's `fleet_nodes`, in rank order.
pub fn job_nodes(
    record: &crate::store::JobRecord,
    fleet_nodes: &[NodeTarget],
) -> Result<Vec<JobNode>, String> {
    record
        .nodes
        .iter()
        .enumerate()
        .map(|(rank, rn)| {
            fleet_nodes
                .iter()
                .find(|n| n.index == rn.node)
                .cloned()
                .map(|target| JobNode { rank, target })
                .ok_or_else(|| {
                    format!(
                        "node {} of job {} is no longer in fleet `{}`",
                        rn.node, record.id, record.fleet
                    )
                })
        })
        .collect()
}

/// What [`refresh`] found.
#[derive(Debug, Default)]
pub struct Refreshed {
    /// Per job id: why the job, or one of its nodes, could not be asked.
    pub notes: Vec<(String, String)>,
    /// Whether a node was found ended (its exit code now recorded).
    pub ended: bool,
}

/// Ask the nodes of every unfinished job of `jobs` how they are, and record the exit
/// codes of the nodes whose run ended ([`Status::Exited`], or [`Status::Vanished`] as
/// unreachable); a node still being uploaded to or launched ([`Status::Starting`]) is
/// running. A node without the job's directory ([`Status::Missing`]: not launched
/// yet, or the node was replaced) is noted, not recorded: a job being launched has no
/// directory yet. `nodes_of` reaches a job's nodes: `flightdeck job` through its fleet
/// resolution and host-key prompter, the cockpit through its connection pool.
pub async fn refresh(
    store: &crate::store::Store,
    jobs: &[crate::store::JobRecord],
    mut nodes_of: impl FnMut(&crate::store::JobRecord) -> Result<(Reach, Vec<JobNode>), String>,
) -> Refreshed {
    let mut out = Refreshed::default();
    for j in jobs.iter().filter(|j| !j.finished()) {
        let (reach, nodes) = match nodes_of(j) {
            Ok(x) => x,
            Err(e) => {
                out.notes.push((j.id.clone(), e));
                continue;
            }
        };
        let mut found = status(reach.clone(), &j.id, &nodes).await;
        let name = |rank: usize| nodes.get(rank).map_or("?", |n| n.target.name.as_str());
        // The flightdeck that launched it is gone: a node still "starting" never will. A
        // start it sent may still be under way on a node, though: fence and stop every
        // node of the job, as the launcher would have on a failed launch (a start in
        // flight refuses, or is stopped as soon as it has begun), and read the nodes again
        // from that.
        let orphaned = j.launcher.as_ref().and_then(|l| l.alive()) == Some(false);
        if orphaned
            && found
                .iter()
                .any(|(_, r)| matches!(r, Ok(Status::Starting | Status::Missing)))
        {
            let before: Vec<(usize, bool)> = found
                .iter()
                .map(|(r, res)| (*r, matches!(res, Ok(Status::Starting | Status::Missing))))
                .collect();
            let stopped = fence(reach.clone(), &j.id, &nodes, 2).await;
            found = stopped
                .into_iter()
                .map(|(rank, res)| {
                    let was_starting = before.iter().any(|(r, s)| *r == rank && *s);
                    match res {
                        // Stopped before it began: it never started.
                        Ok(Status::Exited { code }) if was_starting && code == detach::STOPPED => {
                            (rank, Ok(Status::Missing))
                        }
                        other => (rank, other),
                    }
                })
                .collect();
        }
        let mut ended = vec![];
        for (rank, res) in found {
            match res {
                Ok(Status::Exited { .. } | Status::Vanished) => ended.push((rank, res)),
                Ok(Status::Starting | Status::Missing) if orphaned => {
                    let pid = j.launcher.as_ref().map_or(0, |l| l.pid);
                    out.notes.push((
                        j.id.clone(),
                        format!(
                            "{}: never started (the flightdeck launching it, pid {pid}, ended first)",
                            name(rank)
                        ),
                    ));
                    ended.push((rank, Ok(Status::Vanished)));
                }
                Ok(Status::Running { .. } | Status::Starting) => {}
                Ok(Status::Missing) => out
                    .notes
                    .push((j.id.clone(), format!("{}: no such job on the node", name(rank)))),
                Err(e) => out.notes.push((j.id.clone(), format!("{}: {e}", name(rank)))),
            }
        }
        if ended.is_empty() {
            continue;
        }
        out.ended = true;
        if let Err(e) = record_codes_async(store, &j.id, ended, false).await {
            out.notes
                .push((j.id.clone(), format!("its exit codes could not be recorded: {e}")));
        }
    }
    out
}

/// [`record_codes`] off the async threads.
pub async fn record_codes_async(
    store: &crate::store::Store,
    id: &str,
    found: Vec<(usize, Result<Status, String>)>,
    stopped: bool,
) -> Result<(), String> {
    let (s, id) = (store.clone(), id.to_string());
    tokio::task::spawn_blocking(move || record_codes(&s, &id, &found, stopped))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

/// One job of a name on a fleet at a time (dstack refuses a second active run of a name
/// too): a launch killed after its nodes started, then run again, would otherwise train
/// twice on the same GPUs. Earlier jobs of the name are asked how they are first, so those
/// that ended (or never started) are recorded and do not stand in the way.
async fn refuse_a_second(store: &crate::store::Store, job: &Job, target: &Target) -> Result<(), String> {
    let unfinished = |state: crate::store::State| -> Vec<crate::store::JobRecord> {
        state
            .jobs
            .into_iter()
            .filter(|j| j.name == job.name && j.fleet == target.fleet && !j.finished())
            .collect()
    };
    let load = |s: crate::store::Store| async move {
        tokio::task::spawn_blocking(move || s.load())
            .await
            .map_err(|e| e.to_string())?
            .map(|(state, _)| state)
            .map_err(|e| e.to_string())
    };
    let earlier = unfinished(load(store.clone()).await?);
    if earlier.is_empty() {
        return Ok(());
    }
    let found = refresh(store, &earlier, |j| {
        job_nodes(j, &target.nodes).map(|nodes| (target.reach.clone(), nodes))
    })
    .await;
    let still = unfinished(load(store.clone()).await?);
    let Some(j) = still.first() else { return Ok(()) };
    let notes: Vec<String> = found
        .notes
        .iter()
        .filter(|(id, _)| *id == j.id)
        .map(|(_, n)| format!("\n  {n}"))
        .collect();
    Err(format!(
        "job {id} (`{name}`) is still running on fleet `{fleet}`{notes}\n\
         follow it with `flightdeck job logs {id} --follow`, or end it with `flightdeck job stop {id}` and run again",
        id = j.id,
        name = j.name,
        fleet = j.fleet,
        notes = notes.concat(),
    ))
}

/// Where a job starts: the fleet's name, nodes and reach, and its fleet file's spec.
pub struct Target {
    pub fleet: String,
    pub nodes: Vec<NodeTarget>,
    pub reach: Reach,
    pub spec: Option<crate::fleet::FleetSpec>,
    /// Check the GPUDirect pieces of every node first ([`crate::bootstrap::preflight`]).
    pub preflight: bool,
    /// Upload `files:` from outside the job file's folder too (the operator said so).
    pub files_outside: bool,
}

/// Start `job` on `target`: record it in the store first (so a crash from then on
/// leaves a job that can be found and stopped), upload and launch on every node, then
/// record the pids. All or nothing: when a node fails to start, those that did are
/// stopped again and the error names each failed node. Returns the record and its nodes.
pub async fn start(
    store: &crate::store::Store,
    job: &Job,
    target: Target,
    stop_on_failure: bool,
    progress: &(dyn Fn(String) + Sync),
) -> Result<(crate::store::JobRecord, Vec<JobNode>), String> {
    use crate::store::{self, JobRecord, RunNode};
    if !job.outside.is_empty() && !target.files_outside {
        return Err(job
            .outside
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("\n"));
    }
    let mut target = target;
    if let Some(g) = target.spec.as_ref().and_then(|s| s.gke.as_ref()) {
        // A GKE fleet: ranks need no recorded node (a flex-start pool may be at zero).
        let n = job.spec.nodes.map_or(target.nodes.len().max(1), |n| n as usize);
        target.nodes = crate::cloud::gke::backend::Target::from_gke(g).pad(&target.fleet, &target.nodes, n);
    }
    let want = job.spec.nodes.map_or(target.nodes.len(), |n| n as usize);
    if want > target.nodes.len() {
        return Err(format!(
            "{}: the job wants {want} nodes; fleet `{}` has {}",
            job.file.display(),
            target.fleet,
            target.nodes.len()
        ));
    }
    refuse_a_second(store, job, &target).await?;
    let nodes: Vec<JobNode> = target
        .nodes
        .into_iter()
        .take(want)
        .enumerate()
        .map(|(rank, target)| JobNode { rank, target })
        .collect();
    let (fleet_profile, fleet_gpu) = crate::nccl::profile::fleet_facts(target.spec.as_ref());
    let profile = super::profile(job, fleet_profile);
    let gpu = job.spec.gpu.clone().or(fleet_gpu);
    let profile_lines = crate::nccl::runner::profile_env(profile);
    let on_gke = gke(&target.reach, nodes.first().map(|n| &n.target));
    if on_gke.is_some() && !job.uploads.is_empty() {
        return Err(format!(
            "{}: `files:` are not uploaded to GKE pods: put them in the job's image (`image:`) or a volume",
            job.file.display()
        ));
    }
    if target.preflight && on_gke.is_none() {
        let targets: Vec<NodeTarget> = nodes.iter().map(|n| n.target.clone()).collect();
        crate::bootstrap::preflight::check_nodes(
            target.reach.clone(),
            &targets,
            profile,
            &profile_lines,
            progress,
        )
        .await?;
    }
    let id = launch::new_id(&job.name, store::now_unix());
    let record = JobRecord {
        id: id.clone(),
        name: job.name.clone(),
        fleet: target.fleet.clone(),
        file: std::fs::canonicalize(&job.file).ok(),
        started_at: store::now_unix(),
        ended_at: None,
        stopped: false,
        nodes: nodes
            .iter()
            .map(|n| RunNode {
                node: n.target.index,
                pid: None,
                log: format!("~/{}/out.log", job_dir(&id, n.rank)),
                exit_code: None,
                pod: None,
            })
            .collect(),
        metrics: job.spec.metrics.clone().unwrap_or_default(),
        flops_per_token: job.spec.model.as_ref().and_then(|m| m.flops_per_token()),
        peak_tflops: gpu.as_deref().and_then(super::metrics::peak_tflops),
        profile: profile.name().to_string(),
        stop_on_failure: stop_on_failure || job.stop_on_failure(),
        stop_grace: job.stop_grace(),
        launcher: Some(crate::store::Launcher::this()),
    };
    let s = store.clone();
    let r = record.clone();
    tokio::task::spawn_blocking(move || s.update(|st| st.jobs.push(r)))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    progress(format!(
        "{} of `{}`, NCCL profile {}",
        crate::words::plural(nodes.len(), "node"),
        target.fleet,
        profile.name()
    ));
    let started = match &on_gke {
        Some(clients) => {
            let spec = target
                .spec
                .as_ref()
                .and_then(|s| s.gke.clone())
                .unwrap_or_default();
            let flex = target.spec.as_ref().and_then(|s| s.flex_start).map(|d| d.0);
            match crate::cloud::gke::jobs::start(
                clients,
                job,
                &id,
                &nodes,
                profile,
                &profile_lines,
                &spec,
                flex,
                progress,
            )
            .await
            {
                Ok(()) => nodes.iter().map(|n| (n.rank, Ok(0))).collect(),
                Err(e) => nodes.iter().map(|n| (n.rank, Err(e.clone()))).collect(),
            }
        }
        None => launch(target.reach.clone(), job, &id, &nodes, &profile_lines, progress).await,
    };
    let pids: Vec<(usize, Option<u32>)> = started
        .iter()
        .map(|(r, res)| (*r, res.as_ref().ok().copied()))
        .collect();
    let failed: Vec<String> = started
        .iter()
        .filter_map(|(r, res)| {
            res.as_ref()
                .err()
                .map(|e| format!("{}: {e}", nodes[*r].target.name))
        })
        .collect();
    let s = store.clone();
    let jid = id.clone();
    let _ = tokio::task::spawn_blocking(move || {
        s.update(|st| {
            if let Some(j) = st.jobs.iter_mut().find(|j| j.id == jid) {
                for (r, pid) in &pids {
                    if let Some(n) = j.nodes.get_mut(*r) {
                        n.pid = *pid;
                    }
                }
                j.launcher = None;
            }
        })
    })
    .await;
    if !failed.is_empty() {
        let up: Vec<JobNode> = nodes
            .iter()
            .filter(|n| started.iter().any(|(r, res)| *r == n.rank && res.is_ok()))
            .cloned()
            .collect();
        let mut found = stop(target.reach.clone(), &id, &up, 2).await;
        for (r, res) in &started {
            if res.is_err() {
                found.push((
                    *r,
                    Ok(Status::Exited {
                        code: exec::UNREACHABLE,
                    }),
                ));
            }
        }
        let _ = record_codes(store, &id, &found, true);
        return Err(format!(
            "job {id} could not start on every node (the others were stopped):\n  {}",
            failed.join("\n  ")
        ));
    }
    let record = {
        let s = store.clone();
        let jid = id.clone();
        tokio::task::spawn_blocking(move || s.load())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?
            .0
            .jobs
            .into_iter()
            .find(|j| j.id == jid)
            .unwrap_or(record)
    };
    Ok((record, nodes))
}

/// Write the statuses found on the nodes into the job's record: exit codes (a node
/// whose run vanished or is missing gets [`exec::UNREACHABLE`]), `stopped`, and the end
/// time once every node has a code.
pub fn record_codes(
    store: &crate::store::Store,
    id: &str,
    found: &[(usize, Result<Status, String>)],
    stopped: bool,
) -> Result<(), crate::store::StoreError> {
    store.update(|s| {
        if let Some(j) = s.jobs.iter_mut().find(|j| j.id == id) {
            for (rank, res) in found {
                if let (Some(n), Ok(st)) = (j.nodes.get_mut(*rank), res) {
                    match st {
                        Status::Exited { code } => n.exit_code = Some(*code),
                        Status::Vanished | Status::Missing => {
                            n.exit_code = n.exit_code.or(Some(exec::UNREACHABLE))
                        }
                        Status::Running { .. } | Status::Starting => {}
                    }
                }
            }
            j.stopped |= stopped;
            if j.finished() && j.ended_at.is_none() {
                j.ended_at = Some(crate::store::now_unix());
            }
        }
    })?;
    Ok(())
}
