//! The seam between a job's bookkeeping ([`super::remote`]: the record, refresh, the
//! all-or-nothing start) and where its processes run. One [`JobRunner`] per backend
//! family, chosen by [`super::runner_for`]: detached processes on VMs and hosts
//! ([`super::detached`]), JobSets on GKE ([`super::jobset`]). The vocabulary both speak
//! ([`JobNode`], [`FollowEvent`], per-rank results) lives here.

use super::spec::Job;
use crate::detach::Status;
use crate::fleet::{FleetSpec, NodeTarget};
use crate::nccl::GpuDirect;
use crate::ssh::client::BoxFuture;
use crate::store::{FleetRecord, JobRecord};
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
    /// The node's process group ended (`None`: the code could not be read), and when it
    /// started and ended by the node's clock (unix seconds), where known.
    Exit {
        rank: usize,
        code: Option<i32>,
        started: Option<u64>,
        ended: Option<u64>,
    },
    /// The connection to the node ended before the job did; following it again resumes.
    Lost { rank: usize, error: String },
}

/// One result per rank, or why that rank could not be asked.
pub type PerRank<T> = Vec<(usize, Result<T, String>)>;

/// Progress lines for the operator (CLI stderr, the cockpit's log).
pub type Progress<'a> = &'a (dyn Fn(String) + Sync);

/// What a runner starts: job `job` as id `id` on `nodes` (rank order), with NCCL
/// profile `profile` whose environment lines for the fleet's family are `env`
/// ([`crate::nccl::profile::env_lines`]), on a fleet whose file says `spec`.
pub struct Launch<'a> {
    pub job: &'a Job,
    pub id: &'a str,
    pub nodes: &'a [JobNode],
    pub profile: GpuDirect,
    pub env: &'a [String],
    pub spec: Option<&'a FleetSpec>,
}

/// How a family runs a job's ranks. Every method answers per rank where it asks the
/// ranks, so one unreachable node never hides the others.
pub trait JobRunner: Send + Sync {
    /// The nodes a job that wants `wanted` ranks (all the fleet's without) starts on,
    /// from the fleet's `nodes` and its file's `spec`: detached jobs need a node per
    /// rank; a JobSet's ranks need none recorded (a flex-start pool may be at zero).
    fn ranks(
        &self,
        fleet: &str,
        nodes: Vec<NodeTarget>,
        spec: Option<&FleetSpec>,
        wanted: Option<usize>,
    ) -> Vec<NodeTarget>;

    /// The nodes of recorded job `record` on its recorded fleet `fleet`, in rank order.
    fn job_nodes(&self, record: &JobRecord, fleet: &FleetRecord) -> Result<Vec<JobNode>, String>;

    /// Why `job` cannot run this way, if it cannot.
    fn admits(&self, job: &Job) -> Result<(), String>;

    /// Check the GPUDirect pieces the profile needs on every node before a start
    /// ([`crate::bootstrap::preflight`]), where the runner's ranks run on nodes it can
    /// inspect; Ok where there is nothing to check.
    fn preflight<'a>(
        &'a self,
        nodes: &'a [JobNode],
        profile: GpuDirect,
        env: &'a [String],
        progress: Progress<'a>,
    ) -> BoxFuture<'a, Result<(), String>>;

    /// Start every rank: each rank's pid (0 where the rank has none of its own), or why
    /// it could not start.
    fn launch<'a>(&'a self, launch: Launch<'a>, progress: Progress<'a>) -> BoxFuture<'a, PerRank<u32>>;

    /// Follow ranks `nodes` (each from its line `from`, 1 = the first) until each has
    /// ended or been lost, reporting on `tx`.
    fn follow(
        &self,
        id: String,
        nodes: Vec<(JobNode, usize)>,
        tx: mpsc::Sender<FollowEvent>,
    ) -> BoxFuture<'static, ()>;

    /// Each rank's [`Status`].
    fn status<'a>(&'a self, id: &'a str, nodes: &'a [JobNode]) -> BoxFuture<'a, PerRank<Status>>;

    /// [`JobRunner::status`] of several jobs of one fleet at once (`jobs`: each job's id
    /// and nodes), in their order: a runner that can ask each node once for all of them
    /// does (a poll costs one round per fleet, not one per job); this default asks job by
    /// job.
    fn statuses<'a>(&'a self, jobs: &'a [(String, Vec<JobNode>)]) -> BoxFuture<'a, Vec<PerRank<Status>>> {
        Box::pin(async move {
            let mut out = vec![];
            for (id, nodes) in jobs {
                out.push(self.status(id, nodes).await);
            }
            out
        })
    }

    /// Stop the job on `nodes` (TERM, then KILL after `grace_s`); the status each ends with.
    fn stop<'a>(&'a self, id: &'a str, nodes: &'a [JobNode], grace_s: u32) -> BoxFuture<'a, PerRank<Status>>;

    /// End a start cut off by the death of the flightdeck that made it, on every rank:
    /// a start still under way refuses, or is stopped as soon as it has begun. The
    /// status each rank ends with ([`crate::detach::STOPPED`] where it was stopped).
    fn fence<'a>(&'a self, id: &'a str, nodes: &'a [JobNode], grace_s: u32)
        -> BoxFuture<'a, PerRank<Status>>;

    /// The last `lines` lines of each rank's output (all with `None`).
    fn tail<'a>(
        &'a self,
        id: &'a str,
        nodes: &'a [JobNode],
        lines: Option<usize>,
    ) -> BoxFuture<'a, PerRank<String>>;

    /// How many lines each rank's output has now (0 where it cannot be read), so that
    /// a follow can begin at the last few.
    fn line_counts<'a>(&'a self, id: &'a str, nodes: &'a [JobNode]) -> BoxFuture<'a, Vec<(usize, usize)>>;
}

/// The nodes of job `record` among its fleet's `fleet_nodes`, in rank order.
pub fn job_nodes(record: &JobRecord, fleet_nodes: &[NodeTarget]) -> Result<Vec<JobNode>, String> {
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
