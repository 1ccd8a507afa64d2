//! Training jobs across a fleet: job files (`spec.rs`), the record and refresh of a job
//! whichever family runs it (`remote.rs`), the [`JobRunner`] seam (`runner.rs`) with one
//! runner per backend family, and metrics read from their logs (`metrics.rs`). On VMs
//! and hosts the processes run detached on the nodes (`detached.rs`, each node's script
//! from `launch.rs`), so a job outlives the connection and the flightdeck that started
//! it; on GKE a job is a JobSet, one pod per rank (`jobset.rs`).

pub mod detached;
pub mod jobset;
pub mod launch;
pub mod metrics;
pub mod remote;
pub mod runner;
pub mod spec;

pub use metrics::{JobMetrics, Sample, Summary};
pub use runner::{FollowEvent, JobNode, JobRunner};
pub use spec::{Job, JobSpec, NcclProfile};

use crate::fleet::BackendKind;
use crate::nccl::GpuDirect;
use crate::reach::Reach;
use std::sync::Arc;

/// The runner of jobs on a fleet of backend family `kind` whose nodes are reached
/// through `reach` (a GKE fleet's jobs through its Kubernetes clients, [`Reach::kube`]):
/// the one place jobs tell the families apart. Shared (`Arc`), as a follow and a stop on
/// failure run beside each other.
pub fn runner_for(kind: BackendKind, reach: Reach) -> Arc<dyn JobRunner> {
    match kind {
        BackendKind::Local | BackendKind::Ssh | BackendKind::Gcp => Arc::new(detached::Detached::new(reach)),
        BackendKind::Gke => Arc::new(jobset::JobSets::new(reach.kube().clone())),
    }
}

/// The profile a job runs with: its own `nccl_profile`, or the fleet's for `auto`.
pub fn profile(job: &Job, fleet: GpuDirect) -> GpuDirect {
    match job.profile() {
        NcclProfile::Auto => fleet,
        NcclProfile::None => GpuDirect::None,
        NcclProfile::Tcpx => GpuDirect::Tcpx,
        NcclProfile::Tcpxo => GpuDirect::Tcpxo,
        NcclProfile::Rdma => GpuDirect::Rdma,
    }
}

/// A job's state in one word, from its record: running, partial (some nodes ended),
/// succeeded, failed (a failure ended it, even one that then stopped the others),
/// stopped (by the operator).
pub fn state_word(j: &crate::store::JobRecord) -> &'static str {
    if !j.finished() {
        return if j.nodes.iter().any(|n| n.exit_code.is_some()) {
            "partial"
        } else {
            "running"
        };
    }
    if j.failed_rank.is_some() {
        "failed"
    } else if j.stopped {
        "stopped"
    } else if j.nodes.iter().all(|n| n.exit_code == Some(0)) {
        "succeeded"
    } else {
        "failed"
    }
}

/// How long job `j` ran, in seconds. Once it ended: by its nodes' clocks, the latest end
/// less the earliest start their wrappers wrote (so neither the launch nor the moment
/// flightdeck looked counts), else its record's end less its start. While it runs: `now`
/// less its start.
pub fn duration(j: &crate::store::JobRecord, now: u64) -> u64 {
    let Some(ended) = j.ended_at.filter(|_| j.finished()) else {
        return now.max(j.started_at).saturating_sub(j.started_at);
    };
    let start = j.nodes.iter().filter_map(|n| n.started_at).min();
    let end = j.nodes.iter().filter_map(|n| n.ended_at).max();
    match (start, end) {
        (Some(s), Some(e)) if e >= s => e - s,
        _ => ended.saturating_sub(j.started_at),
    }
}
