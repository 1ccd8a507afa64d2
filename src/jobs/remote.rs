//! A job's bookkeeping, whichever family runs it: the record written before anything
//! starts, the all-or-nothing start, one job of a name at a time, and [`refresh`], which
//! asks the ranks of unfinished jobs how they are and records what ended. The ranks
//! themselves are a [`JobRunner`]'s ([`super::runner_for`]). Used by `flightdeck job`
//! and by the cockpit's Jobs view alike.

use super::launch::{self, job_dir};
use super::runner::{job_nodes, JobNode, JobRunner, Launch};
use super::spec::Job;
use crate::detach::{self, Status};
use crate::exec;
use crate::fleet::{BackendKind, NodeTarget};
use crate::reach::Reach;
use std::sync::Arc;

/// What [`refresh`] found.
#[derive(Debug, Default)]
pub struct Refreshed {
    /// Per job id: why the job, or one of its nodes, could not be asked.
    pub notes: Vec<(String, String)>,
    /// Whether a node was found ended (its exit code now recorded).
    pub ended: bool,
}

/// A fleet's name, its runner and its unfinished jobs with their nodes.
type FleetJobs<'a> = (
    String,
    Arc<dyn JobRunner>,
    Vec<(&'a crate::store::JobRecord, Vec<JobNode>)>,
);

/// Ask the nodes of every unfinished job of `jobs` how they are, and record the exit
/// codes of the nodes whose run ended ([`Status::Exited`], or [`Status::Vanished`] as
/// unreachable); a node still being uploaded to or launched ([`Status::Starting`]) is
/// running. A node without the job's directory ([`Status::Missing`]: not launched
/// yet, or the node was replaced) is noted, not recorded: a job being launched has no
/// directory yet. `nodes_of` gives a job's runner ([`super::runner_for`] of its fleet's
/// family) and nodes: `flightdeck job` through its fleet resolution and host-key
/// prompter, the cockpit through its connection pool. The jobs of one fleet are asked
/// together ([`JobRunner::statuses`]: one round per fleet, not one per job).
pub async fn refresh(
    store: &crate::store::Store,
    jobs: &[crate::store::JobRecord],
    mut nodes_of: impl FnMut(&crate::store::JobRecord) -> Result<(Arc<dyn JobRunner>, Vec<JobNode>), String>,
) -> Refreshed {
    let mut out = Refreshed::default();
    // The unfinished jobs per fleet: each fleet's runner asks for all of them at once.
    let mut fleets: Vec<FleetJobs> = vec![];
    for j in jobs.iter().filter(|j| !j.finished()) {
        match nodes_of(j) {
            Ok((runner, nodes)) => match fleets.iter_mut().find(|(f, _, _)| *f == j.fleet) {
                Some((_, _, js)) => js.push((j, nodes)),
                None => fleets.push((j.fleet.clone(), runner, vec![(j, nodes)])),
            },
            Err(e) => out.notes.push((j.id.clone(), e)),
        }
    }
    let mut asked = vec![];
    for (_, runner, js) in fleets {
        let ids: Vec<(String, Vec<JobNode>)> = js.iter().map(|(j, n)| (j.id.clone(), n.clone())).collect();
        let found = runner.statuses(&ids).await;
        for ((j, nodes), found) in js.into_iter().zip(found) {
            asked.push((j, runner.clone(), nodes, found));
        }
    }
    for (j, runner, nodes, mut found) in asked {
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
            let stopped = runner.fence(&j.id, &nodes, 2).await;
            found = stopped
                .into_iter()
                .map(|(rank, res)| {
                    let was_starting = before.iter().any(|(r, s)| *r == rank && *s);
                    match res {
                        // Stopped before it began: it never started.
                        Ok(Status::Exited { code, .. }) if was_starting && code == detach::STOPPED => {
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
        if let Err(e) = record_codes_async(store, &j.id, ended, Stop::No).await {
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
    stop: Stop,
) -> Result<(), String> {
    let (s, id) = (store.clone(), id.to_string());
    tokio::task::spawn_blocking(move || record_codes(&s, &id, &found, stop))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

/// One job of a name on a fleet at a time (dstack refuses a second active run of a name
/// too): a launch killed after its nodes started, then run again, would otherwise train
/// twice on the same GPUs. Earlier jobs of the name are asked how they are first, so those
/// that ended (or never started) are recorded and do not stand in the way.
async fn refuse_a_second(
    store: &crate::store::Store,
    job: &Job,
    target: &Target,
    runner: &Arc<dyn JobRunner>,
) -> Result<(), String> {
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
        job_nodes(j, &target.nodes).map(|nodes| (runner.clone(), nodes))
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

/// Where a job starts: the fleet's name, family, nodes and reach, and its fleet file's
/// spec.
pub struct Target {
    pub fleet: String,
    /// The fleet's backend family: which [`JobRunner`] runs the job, and which NCCL
    /// environment its profile gets ([`crate::nccl::profile::env_lines`]).
    pub backend: BackendKind,
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
    let runner = super::runner_for(target.backend, target.reach.clone());
    let mut target = target;
    target.nodes = runner.ranks(
        &target.fleet,
        std::mem::take(&mut target.nodes),
        target.spec.as_ref(),
        job.spec.nodes.map(|n| n as usize),
    );
    let want = job.spec.nodes.map_or(target.nodes.len(), |n| n as usize);
    if want > target.nodes.len() {
        return Err(format!(
            "{}: the job wants {want} nodes; fleet `{}` has {}",
            job.file.display(),
            target.fleet,
            target.nodes.len()
        ));
    }
    refuse_a_second(store, job, &target, &runner).await?;
    let nodes: Vec<JobNode> = target
        .nodes
        .into_iter()
        .take(want)
        .enumerate()
        .map(|(rank, target)| JobNode { rank, target })
        .collect();
    let (mut fleet_profile, fleet_gpu) = crate::nccl::profile::fleet_facts(target.spec.as_ref());
    // GKE fleets have no instance types: the flavour is their nodes' or pools' machine type's.
    if let (BackendKind::Gke, Some(spec)) = (target.backend, target.spec.as_ref()) {
        let (p, _, _, warning) = crate::nccl::profile::gke_auto_profile(target.reach.kube(), spec).await;
        fleet_profile = p;
        if let Some(w) = warning.filter(|_| job.spec.nccl_profile.is_none()) {
            progress(w);
        }
    }
    let profile = super::profile(job, fleet_profile);
    let gpu = job.spec.gpu.clone().or(fleet_gpu);
    // A VM's profile on VMs and hosts, a pod's on GKE.
    let profile_lines = crate::nccl::profile::env_lines(target.backend, profile);
    runner.admits(job)?;
    if target.preflight {
        runner
            .preflight(&nodes, profile, &profile_lines, progress)
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
        failed_rank: None,
        nodes: nodes
            .iter()
            .map(|n| RunNode {
                node: n.target.index,
                pid: None,
                log: format!("~/{}/out.log", job_dir(&id, n.rank)),
                exit_code: None,
                pod: None,
                started_at: None,
                ended_at: None,
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
    let started = runner
        .launch(
            Launch {
                job,
                id: &id,
                nodes: &nodes,
                profile,
                env: &profile_lines,
                spec: target.spec.as_ref(),
            },
            progress,
        )
        .await;
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
        let mut found = runner.stop(&id, &up, 2).await;
        for (r, res) in &started {
            if res.is_err() {
                found.push((*r, Ok(Status::exited(exec::UNREACHABLE))));
            }
        }
        let first = started
            .iter()
            .find(|(_, res)| res.is_err())
            .map_or(0, |(r, _)| *r);
        let _ = record_codes(store, &id, &found, Stop::Failure(first));
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
/// Why a job's nodes that still ran were stopped, if they were.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Not stopped: the codes are what the nodes ended with by themselves.
    No,
    /// The operator stopped it (`job stop`, `x x`).
    Operator,
    /// Rank r failed and the job stops on failure (or r could not start).
    Failure(usize),
}

pub fn record_codes(
    store: &crate::store::Store,
    id: &str,
    found: &[(usize, Result<Status, String>)],
    stop: Stop,
) -> Result<(), crate::store::StoreError> {
    store.update(|s| {
        if let Some(j) = s.jobs.iter_mut().find(|j| j.id == id) {
            for (rank, res) in found {
                if let (Some(n), Ok(st)) = (j.nodes.get_mut(*rank), res) {
                    match st {
                        Status::Exited { code, started, ended } => {
                            n.exit_code = Some(*code);
                            n.started_at = n.started_at.or(*started);
                            n.ended_at = n.ended_at.or(*ended);
                        }
                        Status::Vanished | Status::Missing => {
                            n.exit_code = n.exit_code.or(Some(exec::UNREACHABLE))
                        }
                        Status::Running { .. } | Status::Starting => {}
                    }
                }
            }
            match stop {
                Stop::No => {}
                Stop::Operator => j.stopped = true,
                Stop::Failure(rank) => {
                    j.stopped = true;
                    j.failed_rank = j.failed_rank.or(Some(rank));
                }
            }
            if j.finished() && j.ended_at.is_none() {
                // When the last node ended, by the nodes' clocks where they said (not
                // after the job started, not in the future), else now.
                let now = crate::store::now_unix();
                let last = j.nodes.iter().map(|n| n.ended_at).collect::<Option<Vec<u64>>>();
                j.ended_at = Some(
                    last.and_then(|l| l.into_iter().max())
                        .map_or(now, |e| e.clamp(j.started_at, now.max(j.started_at))),
                );
            }
        }
    })?;
    Ok(())
}
