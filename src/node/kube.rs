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
    /// Whether the kubeconfig the fleet file names may run its credential plugin.
    #[serde(default, skip_serializing_if = "PluginOptIn::is_no")]
    pub allow_exec_plugin: PluginOptIn,
}

/// Whether the kubeconfig a fleet file names may run its credential plugin (the fleet
/// file's `gke.allow_exec_plugin`): no (the default), any plugin (`true`), or only the
/// one whose command is this string, as `fleet plan` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum PluginOptIn {
    #[default]
    No,
    Any,
    Command(String),
}

impl PluginOptIn {
    pub fn is_no(&self) -> bool {
        matches!(self, PluginOptIn::No)
    }

    pub fn allows(&self, command: &str) -> bool {
        match self {
            PluginOptIn::No => false,
            PluginOptIn::Any => true,
            PluginOptIn::Command(c) => c == command,
        }
    }
}

impl serde::Serialize for PluginOptIn {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            PluginOptIn::No => s.serialize_bool(false),
            PluginOptIn::Any => s.serialize_bool(true),
            PluginOptIn::Command(c) => s.serialize_str(c),
        }
    }
}

impl<'de> serde::Deserialize<'de> for PluginOptIn {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = PluginOptIn;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("true, false, or the plugin's command as `fleet plan` shows it")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<PluginOptIn, E> {
                Ok(if v { PluginOptIn::Any } else { PluginOptIn::No })
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<PluginOptIn, E> {
                if v.trim().is_empty() {
                    return Err(E::custom(
                        "empty: give true, or the plugin's command as `fleet plan` shows it",
                    ));
                }
                Ok(PluginOptIn::Command(v.to_string()))
            }
        }
        d.deserialize_any(V)
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
