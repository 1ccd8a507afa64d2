//! Training jobs across a fleet: job files (`spec.rs`), what each node runs
//! (`launch.rs`), and metrics read from their logs (`metrics.rs`). The processes run
//! detached on the nodes ([`crate::detach`]), so a job outlives the connection and the
//! flightdeck that started it.

pub mod launch;
pub mod metrics;
pub mod spec;

pub use metrics::{JobMetrics, Sample, Summary};
pub use spec::{Job, JobSpec, NcclProfile};
