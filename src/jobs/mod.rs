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

use crate::fleet::FleetSpec;
use crate::nccl::GpuDirect;

/// What a fleet tells a job: the GPUDirect flavour `nccl_profile: auto` picks, and the
/// GPU model (for its peak rate). From the fleet file's `network.gpudirect` and
/// `resources.gpu`, else from the catalog's facts about its first instance type.
pub fn fleet_facts(spec: Option<&FleetSpec>) -> (GpuDirect, Option<String>) {
    use crate::fleet::spec::GpuDirect as Wanted;
    let Some(spec) = spec else {
        return (GpuDirect::None, None);
    };
    let offer = spec
        .instance_types
        .as_ref()
        .and_then(|t| t.first())
        .and_then(|mt| {
            crate::catalog::Catalog::embedded()
                .offers()
                .iter()
                .find(|o| &o.machine_type == mt)
        });
    let profile = match spec.network.as_ref().map(|n| n.gpudirect).unwrap_or_default() {
        Wanted::None => GpuDirect::None,
        Wanted::Tcpx => GpuDirect::Tcpx,
        Wanted::Tcpxo => GpuDirect::Tcpxo,
        Wanted::Rdma => GpuDirect::Rdma,
        Wanted::Auto => match offer.map(|o| o.gpudirect) {
            Some(crate::catalog::model::GpuDirect::Tcpx) => GpuDirect::Tcpx,
            Some(crate::catalog::model::GpuDirect::Tcpxo) => GpuDirect::Tcpxo,
            Some(crate::catalog::model::GpuDirect::Rdma) => GpuDirect::Rdma,
            _ => GpuDirect::None,
        },
    };
    let gpu = spec
        .resources
        .as_ref()
        .and_then(|r| r.gpu.as_ref())
        .and_then(|g| g.names.first().cloned())
        .or_else(|| offer.map(|o| o.gpu.clone()));
    (profile, gpu)
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

/// A profile's name as job records keep it.
pub fn profile_name(p: GpuDirect) -> &'static str {
    match p {
        GpuDirect::None => "none",
        GpuDirect::Tcpx => "tcpx",
        GpuDirect::Tcpxo => "tcpxo",
        GpuDirect::Rdma => "rdma",
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
