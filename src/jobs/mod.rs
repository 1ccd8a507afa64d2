//! Training jobs across a fleet: job files (`spec.rs`), what each node runs
//! (`launch.rs`), and metrics read from their logs (`metrics.rs`). The processes run
//! detached on the nodes ([`crate::detach`]), so a job outlives the connection and the
//! flightdeck that started it.

pub mod launch;
pub mod metrics;
pub mod remote;
pub mod spec;

pub use metrics::{JobMetrics, Sample, Summary};
pub use spec::{Job, JobSpec, NcclProfile};

use crate::nccl::GpuDirect;

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
/// succeeded, failed, stopped.
pub fn state_word(j: &crate::store::JobRecord) -> &'static str {
    if !j.finished() {
        return if j.nodes.iter().any(|n| n.exit_code.is_some()) {
            "partial"
        } else {
            "running"
        };
    }
    if j.stopped {
        "stopped"
    } else if j.nodes.iter().all(|n| n.exit_code == Some(0)) {
        "succeeded"
    } else {
        "failed"
    }
}
