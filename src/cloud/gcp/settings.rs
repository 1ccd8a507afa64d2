//! The `gcp:` block of the config file: dstack's gcp backend fields (`project_id`, `creds`,
//! `regions`, `vpc_name`, `extra_vpcs`, `roce_vpcs`, `vm_service_account`, `public_ips`,
//! `tags`, `vpc_project_id`) plus flightdeck's SSH and owner settings.
//!
//! ```yaml
//! gcp:
//!   project_id: my-project
//!   creds: {type: service_account, filename: ~/keys/sa.json}   # or {type: default}
//!   regions: [us-central1, us-east4]
//!   vpc_name: main-vpc              # nic0's VPC when the fleet file names none
//!   extra_vpcs: [data-1, data-2, data-3, data-4]   # TCPX/TCPXO data NICs, in order
//!   roce_vpcs: [roce]               # the RoCE VPC of MRDMA NICs
//!   vm_service_account: sa@my-project.iam.gserviceaccount.com
//!   ssh_user: ubuntu
//!   ssh_public_key: ~/.ssh/id_ed25519.pub
//! ```

use super::auth::CredentialSource;
use super::error::GcpError;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GcpSettings {
    pub project_id: Option<String>,
    pub creds: Option<Creds>,
    /// Regions fleets may use when their file lists none.
    pub regions: Option<Vec<String>>,
    /// nic0's VPC (dstack's `vpc_name`); `default` when unset.
    pub vpc_name: Option<String>,
    /// Accepted for dstack compatibility (shared VPC host project).
    pub vpc_project_id: Option<String>,
    /// VPCs of the gVNIC data NICs (TCPX: 4, TCPXO: 8; A3 Ultra / A4: the second host NIC).
    pub extra_vpcs: Option<Vec<String>>,
    /// The RoCE VPC of the MRDMA NICs (A3 Ultra, A4).
    pub roce_vpcs: Option<Vec<String>>,
    pub vm_service_account: Option<String>,
    /// External IP on nic0 (default true); without one, nodes are reached on their internal IP.
    pub public_ips: Option<bool>,
    /// Extra labels on every instance.
    pub tags: Option<BTreeMap<String, String>>,
    /// The user in the `ssh-keys` metadata and for SSH (default `ubuntu`).
    pub ssh_user: Option<String>,
    /// The public key put in the `ssh-keys` metadata (default `~/.ssh/id_ed25519.pub`,
    /// then `~/.ssh/id_rsa.pub`).
    pub ssh_public_key: Option<PathBuf>,
    /// The private key to log in with (default: the public key's path without `.pub`).
    pub identity_file: Option<PathBuf>,
    /// The `flightdeck-owner` label (default: `$USER`).
    pub owner: Option<String>,
    /// Boot disk size (default 200 GB).
    pub disk_size_gb: Option<u32>,
    /// Seconds to wait for new nodes to run and answer on SSH (default 600).
    pub ssh_wait_secs: Option<u64>,
    /// Seconds between polls of a Compute operation (default 2).
    pub operation_poll_secs: Option<f64>,
    /// Seconds between the cockpit's background checks of GCP fleets' nodes (preempted,
    /// stopped, gone); default 60, 0 turns them off (a reload of the Fleets view still
    /// checks).
    pub health_check_secs: Option<u64>,
    /// A bastion to reach the nodes through (as in a fleet file's `ssh_config.proxy_jump`);
    /// with `public_ips: false` nodes are then reached on their internal addresses.
    pub proxy_jump: Option<crate::fleet::spec::ProxyJump>,
    /// Run the GPUDirect bootstrap on new nodes after `fleet apply` (default true; off
    /// for images that have it baked in). `fleet bootstrap` runs it on its own.
    pub bootstrap: Option<bool>,
}

/// dstack's `creds`: `{type: default}` (Application Default Credentials) or
/// `{type: service_account, filename: PATH}` / `{type: service_account, data: JSON}`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Creds {
    Default,
    ServiceAccount {
        filename: Option<PathBuf>,
        data: Option<String>,
    },
}

impl GcpSettings {
    /// Where the credentials come from. A key file's contents are read here and never
    /// logged or stored.
    pub fn credential_source(&self, home: Option<&Path>) -> Result<CredentialSource, GcpError> {
        match &self.creds {
            None | Some(Creds::Default) => Ok(CredentialSource::Adc),
            Some(Creds::ServiceAccount { filename, data }) => {
                let text = match (filename, data) {
                    (Some(f), None) => {
                        let path = expand_home(f, home);
                        std::fs::read_to_string(&path).map_err(|e| {
                            GcpError::Config(format!("gcp.creds.filename {}: {e}", path.display()))
                        })?
                    }
                    (None, Some(d)) => d.clone(),
                    _ => {
                        return Err(GcpError::Config(
                            "gcp.creds: a service_account needs `filename` or `data` (one of them)".into(),
                        ))
                    }
                };
                let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                    GcpError::Config(format!("gcp.creds: not a JSON key: {}", e.classify_name()))
                })?;
                Ok(CredentialSource::Json(Arc::new(v)))
            }
        }
    }

    pub fn ssh_user(&self) -> String {
        self.ssh_user.clone().unwrap_or_else(|| "ubuntu".into())
    }

    /// The owner label value: lowercase letters, digits, `-` and `_`, at most 63.
    pub fn owner(&self, user_env: Option<String>) -> String {
        let raw = self
            .owner
            .clone()
            .or(user_env)
            .unwrap_or_else(|| "unknown".into());
        label_value(&raw)
    }
}

trait ClassifyName {
    fn classify_name(&self) -> &'static str;
}

impl ClassifyName for serde_json::Error {
    fn classify_name(&self) -> &'static str {
        // The message of a JSON error can quote the key; say only what kind of error it is.
        match self.classify() {
            serde_json::error::Category::Io => "read error",
            serde_json::error::Category::Syntax => "syntax error",
            serde_json::error::Category::Data => "unexpected data",
            serde_json::error::Category::Eof => "cut short",
        }
    }
}

/// `~/x` → `$HOME/x`.
pub fn expand_home(p: &Path, home: Option<&Path>) -> PathBuf {
    match (p.strip_prefix("~"), home) {
        (Ok(rest), Some(h)) => h.join(rest),
        _ => p.to_path_buf(),
    }
}

/// A label value GCE accepts: `[_a-z0-9-]{0,63}`; other characters become `-`.
pub fn label_value(s: &str) -> String {
    s.chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect()
}

/// A label key GCE accepts: starts with a lowercase letter, then `[_a-z0-9-]`, at most
/// 63; other characters become `-`, and a key not starting with a letter gets `k-`.
pub fn label_key(s: &str) -> String {
    let v = label_value(s);
    if v.starts_with(|c: char| c.is_ascii_lowercase()) {
        v
    } else {
        format!("k-{v}").chars().take(63).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_keys_and_values_are_what_gce_accepts() {
        assert_eq!(label_key("Team.Name"), "team-name");
        assert_eq!(label_key("9lives"), "k-9lives");
        assert_eq!(label_key("_x"), "k-_x");
        assert_eq!(label_key(&"A".repeat(80)).len(), 63);
        assert_eq!(label_value("ML Infra/1"), "ml-infra-1");
    }

    #[test]
    fn dstack_backend_fields_parse() {
        let text = "project_id: p1\ncreds:\n  type: service_account\n  filename: ~/sa.json\nregions: [us-east4]\nvpc_name: main\nextra_vpcs: [d1, d2]\nroce_vpcs: [roce]\nvm_service_account: sa@p1.iam.gserviceaccount.com\npublic_ips: true\ntags: {team: ml}\n";
        let s: GcpSettings = crate::yaml::from_str(Path::new("c.yaml"), text).unwrap();
        assert_eq!(s.project_id.as_deref(), Some("p1"));
        assert_eq!(
            s.creds,
            Some(Creds::ServiceAccount {
                filename: Some("~/sa.json".into()),
                data: None
            })
        );
        assert_eq!(s.extra_vpcs.unwrap().len(), 2);
        let e = crate::yaml::from_str::<GcpSettings>(Path::new("c.yaml"), "project_id: p\nvpc_nme: x\n")
            .unwrap_err();
        assert!(e.to_string().starts_with("c.yaml:2:1"), "{e}");
        assert!(e.message.contains("did you mean `vpc_name`?"), "{e}");
    }

    #[test]
    fn service_account_file_is_read_and_errors_hide_contents() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("sa.json"),
            "{\"type\": \"service_account\", \"private_key\": \"SECRET",
        )
        .unwrap();
        let s = GcpSettings {
            creds: Some(Creds::ServiceAccount {
                filename: Some("~/sa.json".into()),
                data: None,
            }),
            ..Default::default()
        };
        let e = s.credential_source(Some(dir.path())).unwrap_err().to_string();
        assert!(
            e.contains("not a JSON key: cut short") && !e.contains("SECRET"),
            "{e}"
        );
        assert!(matches!(
            GcpSettings::default().credential_source(None).unwrap(),
            CredentialSource::Adc
        ));
    }

    #[test]
    fn owner_labels_are_sanitized() {
        let s = GcpSettings::default();
        assert_eq!(s.owner(Some("Alice.Smith".into())), "alice-smith");
        assert_eq!(s.owner(None), "unknown");
    }
}
