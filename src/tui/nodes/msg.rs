//! The Nodes view's messages from its services.

/// What the Nodes view's services report.
#[derive(Debug, Clone)]
pub enum Msg {
    /// A GKE fleet's node pools, nodes and Kueue workloads now (or why not).
    GkeSnapshot {
        fleet: String,
        result: Result<Box<crate::cloud::gke::view::Snapshot>, String>,
    },
}
