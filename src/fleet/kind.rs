//! The backend family of a fleet: the one name for "which kind of machines these are and
//! how they are brought up". Fleet files list it in `backends:`, the state store records
//! it, and each capability that differs by family has one factory with the only `match`
//! on it (see docs/DESIGN.md, "Seams").

use serde::{Deserialize, Serialize};
use std::fmt;

/// Which backend brings the fleet's nodes up. Serialised lowercase (`local`, `ssh`, `gcp`,
/// `gke`), as fleet files and `state.json` have always spelled it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// This machine, as the one node.
    Local,
    /// Existing hosts reached over SSH (`ssh_config.hosts`).
    Ssh,
    /// VMs created on Google Cloud.
    Gcp,
    /// Nodes of an existing GKE cluster, reached through the Kubernetes API.
    Gke,
}

impl BackendKind {
    pub const ALL: [BackendKind; 4] = [
        BackendKind::Local,
        BackendKind::Ssh,
        BackendKind::Gcp,
        BackendKind::Gke,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Local => "local",
            BackendKind::Ssh => "ssh",
            BackendKind::Gcp => "gcp",
            BackendKind::Gke => "gke",
        }
    }

    /// `an SSH fleet`, `a GKE fleet`, `a local fleet`: the family in a sentence.
    pub fn a_fleet(self) -> &'static str {
        match self {
            BackendKind::Local => "a local fleet",
            BackendKind::Ssh => "an SSH fleet",
            BackendKind::Gcp => "a GCP fleet",
            BackendKind::Gke => "a GKE fleet",
        }
    }
}

impl std::str::FromStr for BackendKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        BackendKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| format!("unknown backend `{s}`: one of local, ssh, gcp, gke"))
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialised_as_state_json_always_spelled_it() {
        for k in BackendKind::ALL {
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
            assert_eq!(serde_json::from_str::<BackendKind>(&json).unwrap(), k);
        }
        assert!(serde_json::from_str::<BackendKind>("\"aws\"").is_err());
    }
}
