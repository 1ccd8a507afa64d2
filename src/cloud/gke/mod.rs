//! GKE: fleets that are nodes of an existing GKE cluster, reached through the Kubernetes
//! API with kube-rs. GKE is the engine: node pools, Spot, DWS flex-start and Kueue are
//! the cluster's; flightdeck reads them, runs its work in pods, and reimplements none.
//!
//! * [`cluster`]: which cluster (a kubeconfig context, or project/location/cluster with
//!   credentials as gcloud's GKE auth plugin gets them) and a client for it.
//! * [`exec`]: a host-network debug pod per node (as `kubectl debug node/...` makes one)
//!   and commands and shells in it over the exec websocket: what panes, `exec`, NIC and
//!   GPU telemetry and the doctor ride on, as they ride on SSH for VM fleets.
//! * [`view`]: node pools, nodes and Kueue's workloads as the cockpit shows them;
//!   [`inventory`]: GKE's [`crate::cloud::Inventory`] over them (Nodes view, status, gc).
//! * [`nccl`]: nccl-tests as the GKE GPUDirect guides run them (test pods per node).
//! * [`jobs`]: job files as JobSets, with Kueue's queue and DWS flex-start.
//! * [`backend`]: the fleet lifecycle (apply finds the nodes; delete removes flightdeck's
//!   pods) and `fleet gc`.

pub mod backend;
pub mod cluster;
pub mod exec;
pub mod inventory;
pub mod jobs;
pub mod nccl;
pub mod selector;
pub mod view;

pub use crate::node::kube::{ClusterRef, KubeNode, PluginOptIn};
pub use backend::GkeBackend;
pub use cluster::Clients;

/// The label every object flightdeck creates in a cluster carries (value: the fleet).
pub const FLEET_LABEL: &str = "flightdeck-fleet";
/// What the object is for: `debug` (a node's shell pod), `nccl`, `job`.
pub const ROLE_LABEL: &str = "flightdeck-role";
/// `app.kubernetes.io/managed-by: flightdeck`.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "flightdeck");

/// The GPU resource name GKE's device plugin advertises.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

#[cfg(test)]
impl KubeNode {
    /// A node of a cluster named by context `c`, fleet `a3u`, namespace `default`.
    pub fn for_tests(node: &str) -> KubeNode {
        KubeNode {
            cluster: ClusterRef {
                kubeconfig: None,
                context: Some("c".into()),
                project: None,
                location: None,
                cluster: None,
                allow_exec_plugin: PluginOptIn::No,
            },
            fleet: "a3u".into(),
            node: node.into(),
            namespace: "default".into(),
            debug_image: DEFAULT_DEBUG_IMAGE.into(),
            pod: None,
            container: None,
        }
    }
}

/// The default image of debug pods: it has sh, awk and coreutils, as the samplers need.
pub const DEFAULT_DEBUG_IMAGE: &str = "ubuntu:24.04";

/// A Kubernetes object name for `base`: lowercase RFC 1123, at most `max` characters; a
/// name cut short ends in 8 hex digits of a hash of the whole, so two long names that
/// share a beginning stay apart.
pub fn object_name(base: &str, max: usize) -> String {
    let clean: String = base
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let clean = clean.trim_matches('-').to_string();
    if clean.len() <= max {
        return clean;
    }
    let mut h: u64 = 0xcbf29ce484222325;
    for b in base.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100000001b3);
    }
    let head = clean[..max - 9].trim_end_matches('-');
    format!("{head}-{:08x}", h as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_fit_and_stay_apart() {
        assert_eq!(
            object_name("fd-debug-gke-a3u-pool-1", 63),
            "fd-debug-gke-a3u-pool-1"
        );
        let a = object_name(&format!("fd-debug-{}-a", "x".repeat(70)), 63);
        let b = object_name(&format!("fd-debug-{}-b", "x".repeat(70)), 63);
        assert!(a.len() <= 63 && b.len() <= 63);
        assert_ne!(a, b);
        assert_eq!(object_name("A_b.c", 63), "a-b-c");
    }
}
