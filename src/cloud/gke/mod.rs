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

pub use crate::node::kube::{ClusterRef, KubeNode, KubeOptIn};
pub use backend::GkeBackend;
pub use cluster::Clients;

/// The label every object flightdeck creates in a cluster carries (value: the fleet).
pub const FLEET_LABEL: &str = "flightdeck-fleet";
/// What the object is for: `debug` (a node's shell pod), `nccl`, `job`.
pub const ROLE_LABEL: &str = "flightdeck-role";
/// `app.kubernetes.io/managed-by: flightdeck`.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "flightdeck");

/// Who made an object: the same `flightdeck-owner` label value the GCP backend puts on
/// its instances (the config's `gcp.owner`, else `$USER`).
pub const OWNER_LABEL: &str = "flightdeck-owner";
/// Which state directory made an object (8 hex digits of a hash of this machine's name
/// and the state directory's path): one operator's two state directories, or two
/// machines, do not take each other's objects for their own.
pub const STATE_LABEL: &str = "flightdeck-state";

/// The owner of what this process creates in a cluster: `fleet gc` and `fleet delete`
/// touch only objects labelled with it ([`Owner::owns`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// The `flightdeck-owner` value.
    pub user: String,
    /// The `flightdeck-state` value.
    pub state: String,
}

impl Owner {
    /// This process's owner: the config's `gcp.owner` (else `$USER`), and the state
    /// directory as the environment places it.
    pub fn of_process() -> Owner {
        static OWNER: std::sync::OnceLock<Owner> = std::sync::OnceLock::new();
        OWNER
            .get_or_init(|| {
                let paths = crate::paths::Paths::from_env().ok();
                let configured = paths
                    .as_ref()
                    .and_then(|p| crate::config::Config::load(p).ok())
                    .and_then(|c| c.gcp)
                    .unwrap_or_default();
                let user = configured.owner(std::env::var("USER").ok().filter(|u| !u.is_empty()));
                let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
                let dir = paths
                    .map(|p| std::fs::canonicalize(&p.state_dir).unwrap_or(p.state_dir))
                    .unwrap_or_default();
                Owner::new(&user, host.trim(), &dir)
            })
            .clone()
    }

    /// The owner `user` (a label value already) of state directory `dir` on machine `host`.
    pub fn new(user: &str, host: &str, dir: &std::path::Path) -> Owner {
        let mut h: u64 = 0xcbf29ce484222325;
        for b in host
            .bytes()
            .chain([0])
            .chain(dir.as_os_str().as_encoded_bytes().iter().copied())
        {
            h = (h ^ b as u64).wrapping_mul(0x100000001b3);
        }
        Owner {
            user: user.to_string(),
            state: format!("{:08x}", h as u32),
        }
    }

    /// Whether labels `l` are this owner's (both the owner and the state directory).
    pub fn owns(&self, l: &std::collections::BTreeMap<String, String>) -> bool {
        l.get(OWNER_LABEL) == Some(&self.user) && l.get(STATE_LABEL) == Some(&self.state)
    }

    /// Whose object labels `l` name, when not this owner's: "owned by X" (or "made by
    /// this owner from another state directory", or "with no owner label").
    pub fn other(&self, l: &std::collections::BTreeMap<String, String>) -> Option<String> {
        if self.owns(l) {
            return None;
        }
        Some(match l.get(OWNER_LABEL) {
            None => "with no owner label".into(),
            Some(u) if *u == self.user => format!(
                "owned by {u} from another state directory ({STATE_LABEL}={})",
                l.get(STATE_LABEL).map(String::as_str).unwrap_or("none")
            ),
            Some(u) => format!("owned by {u}"),
        })
    }

    /// The label selector of this owner's objects.
    pub fn selector(&self) -> String {
        format!(
            "{}={},{OWNER_LABEL}={},{STATE_LABEL}={}",
            MANAGED_BY.0, MANAGED_BY.1, self.user, self.state
        )
    }
}

/// The labels of every object flightdeck creates in a cluster, in one place: managed-by,
/// the fleet, the object's role (`debug`, `nccl`, `job`) and its owner.
pub fn labels(owner: &Owner, fleet: &str, role: &str) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    m.insert(MANAGED_BY.0.into(), MANAGED_BY.1.into());
    m.insert(FLEET_LABEL.into(), fleet.into());
    m.insert(ROLE_LABEL.into(), role.into());
    m.insert(OWNER_LABEL.into(), owner.user.clone().into());
    m.insert(STATE_LABEL.into(), owner.state.clone().into());
    m
}

/// Put [`labels`]' owner labels on an object made elsewhere (its `metadata.labels`,
/// and a JobSet's pod templates).
pub fn stamp_owner(owner: &Owner, obj: &mut serde_json::Value) {
    let put = |meta: &mut serde_json::Value| {
        if !meta["labels"].is_object() {
            meta["labels"] = serde_json::json!({});
        }
        meta["labels"][OWNER_LABEL] = owner.user.clone().into();
        meta["labels"][STATE_LABEL] = owner.state.clone().into();
    };
    put(&mut obj["metadata"]);
    // Looked up, never indexed into: `obj["spec"]["replicatedJobs"]` would add
    // `spec: {replicatedJobs: null}` to a Secret or a Pod, which the API server's strict
    // field validation refuses (gke review L3).
    if let Some(jobs) = obj
        .pointer_mut("/spec/replicatedJobs")
        .and_then(|j| j.as_array_mut())
    {
        for j in jobs {
            put(&mut j["template"]["spec"]["template"]["metadata"]);
        }
    }
}

#[cfg(test)]
mod stamp_tests {
    /// Gke review L3: stamping a Secret or a Pod adds only labels, no `spec` field.
    #[test]
    fn stamping_adds_labels_and_no_other_field() {
        let owner = super::Owner {
            user: "ops".into(),
            state: "abc".into(),
        };
        let mut secret = serde_json::json!({"kind": "Secret", "metadata": {"name": "s"}, "data": {}});
        super::stamp_owner(&owner, &mut secret);
        assert!(secret.get("spec").is_none(), "{secret}");
        assert_eq!(secret["metadata"]["labels"][super::OWNER_LABEL], "ops");
        let mut pod = serde_json::json!({"kind": "Pod", "metadata": {}, "spec": {"containers": []}});
        super::stamp_owner(&owner, &mut pod);
        assert!(pod["spec"].get("replicatedJobs").is_none(), "{pod}");
    }
}

/// [`stamp_owner`] for a typed object's metadata (a pod made elsewhere).
pub fn stamp_owner_meta(
    owner: &Owner,
    meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) {
    let l = meta.labels.get_or_insert_with(Default::default);
    l.insert(OWNER_LABEL.into(), owner.user.clone());
    l.insert(STATE_LABEL.into(), owner.state.clone());
}

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

#[cfg(test)]
mod owner_label_tests {
    /// GKE's objects and GCP's instances carry one owner label (kept apart here to keep
    /// `cloud/gke` out of `cloud/gcp`'s imports).
    #[test]
    fn the_owner_label_is_gcps() {
        assert_eq!(super::OWNER_LABEL, crate::cloud::gcp::plan::OWNER_LABEL);
    }
}
