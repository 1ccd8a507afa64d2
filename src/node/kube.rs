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

/// What the operator lets a kubeconfig that a fleet file names do, from the operator's
/// own config, never from a fleet file, which cannot vouch for the kubeconfig it names:
/// the credential plugins it may run, whole command lines (command and arguments, as
/// [`crate::cloud::gke::cluster::Plugin::command_line`] writes them;
/// `gke.allow_exec_plugins`), and the files outside its folder it may read and send
/// (`tokenFile`, client certificate and key, CA; `gke.allow_kubeconfig_files`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct KubeOptIn {
    pub lines: Vec<String>,
    /// Absolute paths, links resolved.
    pub files: Vec<String>,
}

impl KubeOptIn {
    pub fn is_no(&self) -> bool {
        self.lines.is_empty() && self.files.is_empty()
    }

    /// Whether the whole command line `line` is allowed.
    pub fn allows(&self, line: &str) -> bool {
        self.lines.iter().any(|l| l == line)
    }

    /// Whether the file at `path` (absolute, links resolved) may be read.
    pub fn allows_file(&self, path: &std::path::Path) -> bool {
        self.files.iter().any(|f| {
            let f = std::path::Path::new(f);
            f == path || std::fs::canonicalize(f).is_ok_and(|f| f == path)
        })
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
