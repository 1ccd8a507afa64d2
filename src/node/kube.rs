//! The address of a Kubernetes node, as plain data: which cluster, which node, and the
//! pod to run in. `cloud::gke` makes the clients and runs the commands; the fleet's nodes
//! and the state carry these.

/// Which cluster: a kubeconfig context, or the GKE cluster by project, location and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ClusterRef {
    /// The kubeconfig the fleet file names, as an absolute path (resolved from the fleet
    /// file's folder when the fleet file was read); `None`: the operator's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
}

/// The credential plugins the operator lets a kubeconfig that a fleet file names run:
/// whole command lines (command and arguments, as [`crate::cloud::gke::cluster::Plugin::
/// command_line`] writes them), from the operator's own config (`gke.allow_exec_plugins`),
/// never from a fleet file, which cannot vouch for the kubeconfig it names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PluginOptIn {
    pub lines: Vec<String>,
}

impl PluginOptIn {
    pub fn is_no(&self) -> bool {
        self.lines.is_empty()
    }

    /// Whether the whole command line `line` is allowed.
    pub fn allows(&self, line: &str) -> bool {
        self.lines.iter().any(|l| l == line)
    }
}

/// A node of a GKE fleet, as a [`crate::fleet::NodeTarget`]'s address carries it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct KubeNode {
    pub cluster: ClusterRef,
    pub fleet: String,
    /// The Kubernetes node name.
    pub node: String,
    pub namespace: String,
    pub debug_image: String,
    /// A pod (and its container) to run in instead of the node's debug pod: an NCCL test
    /// pod, a job's pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
}
