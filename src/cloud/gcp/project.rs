//! Which GCP project to call the Compute API for.
//!
//! Order (the first that gives one wins):
//! 1. an explicit project (a caller's setting);
//! 2. `GOOGLE_CLOUD_PROJECT`, then `CLOUDSDK_CORE_PROJECT`;
//! 3. gcloud's active configuration: `$CLOUDSDK_CONFIG` (default `~/.config/gcloud`),
//!    `active_config` (or `CLOUDSDK_ACTIVE_CONFIG_NAME`), `configurations/config_NAME`,
//!    `[core] project = ...`;
//! 4. the credentials file: `project_id` (service account), else `quota_project_id`;
//! 5. on GCE, the metadata server's `/computeMetadata/v1/project/project-id`.

use super::auth::Auth;
use super::error::{GcpError, Service};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where a project id came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    pub id: String,
    pub from: String,
}

/// Steps 2–4, pure: `var` looks up the environment, `read` reads a file, `creds` is the
/// credentials JSON if any.
pub fn local_project(
    var: impl Fn(&str) -> Option<String>,
    read: impl Fn(&Path) -> Option<String>,
    creds: Option<&serde_json::Value>,
) -> Option<Project> {
    for v in ["GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT"] {
        if let Some(p) = var(v).filter(|p| valid(p)) {
            return Some(Project {
                id: p,
                from: v.to_string(),
            });
        }
    }
    let dir = var("CLOUDSDK_CONFIG")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| Path::new(&h).join(".config/gcloud")));
    if let Some(dir) = dir {
        let name = var("CLOUDSDK_ACTIVE_CONFIG_NAME")
            .or_else(|| read(&dir.join("active_config")).map(|s| s.trim().to_string()))
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into());
        let file = dir.join("configurations").join(format!("config_{name}"));
        if let Some(p) = read(&file)
            .and_then(|t| ini_value(&t, "core", "project"))
            .filter(|p| valid(p))
        {
            return Some(Project {
                id: p,
                from: format!("gcloud configuration `{name}` ({})", file.display()),
            });
        }
    }
    for key in ["project_id", "quota_project_id"] {
        if let Some(p) = creds
            .and_then(|c| c.get(key))
            .and_then(|v| v.as_str())
            .filter(|p| valid(p))
        {
            return Some(Project {
                id: p.to_string(),
                from: format!("the credentials' {key}"),
            });
        }
    }
    None
}

/// A project id or a domain-scoped one (`example.com:proj`): no spaces or slashes.
fn valid(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 100
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == ':')
}

/// `key = value` in `[section]` of an INI file.
fn ini_value(text: &str, section: &str, key: &str) -> Option<String> {
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(s) = line.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            current = s.trim().to_string();
            continue;
        }
        if current == section {
            if let Some((k, v)) = line.split_once('=') {
                if k.trim() == key {
                    return Some(v.trim().to_string());
                }
            }
        }
    }
    None
}

/// The project to use: `explicit`, else the local sources, else (credentials from the
/// metadata server only) the metadata server.
pub async fn discover(explicit: Option<&str>, auth: &Auth) -> Result<Project, GcpError> {
    if let Some(p) = explicit.filter(|p| !p.is_empty()) {
        return Ok(Project {
            id: p.to_string(),
            from: "the caller".into(),
        });
    }
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let read = |p: &Path| std::fs::read_to_string(p).ok();
    if let Some(p) = local_project(var, read, auth.json()) {
        return Ok(p);
    }
    if auth.is_metadata() {
        if let Some(id) = metadata_project().await {
            return Ok(Project {
                id,
                from: "the GCE metadata server".into(),
            });
        }
    }
    Err(GcpError::Config(
        "no GCP project: set GOOGLE_CLOUD_PROJECT, or run `gcloud config set project PROJECT`, \
         or use a service-account key file (it names its project)"
            .into(),
    ))
}

/// `GET http://$GCE_METADATA_HOST/computeMetadata/v1/project/project-id` with
/// `Metadata-Flavor: Google`; `None` on any failure (off GCE the host does not resolve).
async fn metadata_project() -> Option<String> {
    let host = std::env::var("GCE_METADATA_HOST")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "metadata.google.internal".into());
    let url = format!("http://{host}/computeMetadata/v1/project/project-id");
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build()
        .ok()?;
    let resp = client
        .get(&url)
        .header("Metadata-Flavor", "Google")
        .send()
        .await
        .ok()?;
    if !resp.status().is_success() {
        tracing::debug!(
            status = resp.status().as_u16(),
            "{}: no project id",
            Service::Metadata.name()
        );
        return None;
    }
    let text = resp.text().await.ok()?;
    let id = text.trim().to_string();
    valid(&id).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn order_of_sources() {
        let files = lookup(&[
            ("/h/.config/gcloud/active_config", "work\n"),
            (
                "/h/.config/gcloud/configurations/config_work",
                "[compute]\nproject = wrong\n[core]\naccount = a@b.c\nproject = from-gcloud\n",
            ),
            ("/alt/configurations/config_default", "[core]\nproject=alt-proj\n"),
        ]);
        let read = |p: &Path| files(p.to_str().unwrap());
        let sa = serde_json::json!({"type": "service_account", "project_id": "from-key"});
        let got = |env: &[(&str, &str)], creds: Option<&serde_json::Value>| {
            local_project(lookup(env), read, creds).map(|p| p.id)
        };
        assert_eq!(
            got(&[("GOOGLE_CLOUD_PROJECT", "env-proj"), ("HOME", "/h")], Some(&sa)).as_deref(),
            Some("env-proj")
        );
        assert_eq!(
            got(&[("CLOUDSDK_CORE_PROJECT", "sdk")], None).as_deref(),
            Some("sdk")
        );
        assert_eq!(got(&[("HOME", "/h")], Some(&sa)).as_deref(), Some("from-gcloud"));
        assert_eq!(
            got(&[("HOME", "/h"), ("CLOUDSDK_CONFIG", "/alt")], None).as_deref(),
            Some("alt-proj")
        );
        assert_eq!(
            got(&[("HOME", "/nowhere")], Some(&sa)).as_deref(),
            Some("from-key")
        );
        let user = serde_json::json!({"type": "authorized_user", "quota_project_id": "quota-p"});
        assert_eq!(got(&[], Some(&user)).as_deref(), Some("quota-p"));
        assert_eq!(got(&[("GOOGLE_CLOUD_PROJECT", "has space")], None), None);
        assert_eq!(got(&[], None), None);
    }
}
