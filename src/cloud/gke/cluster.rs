//! Which cluster a GKE fleet is on, and a Kubernetes client for it.
//!
//! Two ways to name it, as operators do:
//! * a kubeconfig `context` (what `gcloud container clusters get-credentials` writes):
//!   the kubeconfig's own server, CA and credentials are used, its exec plugin included
//!   (`gke-gcloud-auth-plugin`);
//! * `project`, `location`, `cluster`: flightdeck asks the GKE API for the cluster's
//!   endpoint and CA, and authenticates as gcloud's GKE auth plugin does: an OAuth access
//!   token of Application Default Credentials as the bearer token (renewed before the
//!   hour it lives).

use crate::cloud::gcp::auth::Auth;
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// The GKE API (`projects.locations.clusters.get`); overridden (a loopback double) by
/// `FLIGHTDECK_GKE_API_URL`.
pub const GKE_API_URL: &str = "https://container.googleapis.com/v1";
pub const GKE_API_URL_VAR: &str = "FLIGHTDECK_GKE_API_URL";

/// A client made from an ADC token is made again after this (tokens live an hour).
const TOKEN_CLIENT_LIFE: Duration = Duration::from_secs(45 * 60);

#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ClusterRef {
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

impl ClusterRef {
    pub fn from_spec(g: &crate::fleet::spec::Gke) -> ClusterRef {
        ClusterRef {
            kubeconfig: g.kubeconfig.clone(),
            context: g.context.clone(),
            project: g.project.clone(),
            location: g.location.clone(),
            cluster: g.cluster.clone(),
        }
    }

    /// For messages: `context gke_p_l_c` or `projects/p/locations/l/clusters/c`.
    pub fn describe(&self) -> String {
        match (&self.context, &self.project, &self.location, &self.cluster) {
            (Some(c), ..) => format!("context {c}"),
            (None, Some(p), Some(l), Some(c)) => format!("projects/{p}/locations/{l}/clusters/{c}"),
            _ => "an incompletely named cluster".into(),
        }
    }

    /// The kubeconfig file to read: the fleet's, else `$KUBECONFIG`'s first, else
    /// `~/.kube/config`.
    fn kubeconfig_path(&self) -> std::path::PathBuf {
        let home = || crate::paths::home_dir().unwrap_or_default();
        if let Some(p) = &self.kubeconfig {
            return match p.strip_prefix("~/") {
                Some(rest) => home().join(rest),
                None => p.into(),
            };
        }
        if let Some(k) = std::env::var_os("KUBECONFIG").filter(|k| !k.is_empty()) {
            if let Some(first) = std::env::split_paths(&k).next() {
                return first;
            }
        }
        home().join(".kube/config")
    }

    async fn config(&self) -> Result<kube::Config, String> {
        match &self.context {
            Some(ctx) => {
                let path = self.kubeconfig_path();
                let kc = Kubeconfig::read_from(&path)
                    .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?;
                let opts = KubeConfigOptions {
                    context: Some(ctx.clone()),
                    ..KubeConfigOptions::default()
                };
                kube::Config::from_custom_kubeconfig(kc, &opts)
                    .await
                    .map_err(|e| format!("kubeconfig {} context {ctx}: {e}", path.display()))
            }
            None => self.gke_config().await,
        }
    }

    /// The cluster's endpoint and CA from the GKE API, with an ADC access token.
    async fn gke_config(&self) -> Result<kube::Config, String> {
        let (Some(p), Some(l), Some(c)) = (&self.project, &self.location, &self.cluster) else {
            return Err(
                "the fleet names no cluster: give project, location and cluster, or a context".into(),
            );
        };
        let auth = Auth::from_adc().map_err(|e| e.to_string())?;
        let (_, headers) = auth.headers().await.map_err(|e| e.to_string())?;
        let base = std::env::var(GKE_API_URL_VAR)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| GKE_API_URL.to_string());
        let url = format!(
            "{}/projects/{p}/locations/{l}/clusters/{c}",
            base.trim_end_matches('/')
        );
        crate::cloud::gcp::http::install_crypto_provider();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| e.to_string())?;
        let resp = http
            .get(&url)
            .headers(headers.clone())
            .send()
            .await
            .map_err(|e| format!("GKE API {}: {e}", self.describe()))?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| e.to_string())?;
        if !status.is_success() {
            let (reason, message) = crate::cloud::gcp::http::google_error(&body);
            return Err(format!(
                "GKE API {}: {status} {reason}: {message}",
                self.describe()
            ));
        }
        let cluster: GkeCluster = serde_json::from_slice(&body)
            .map_err(|e| format!("GKE API {}: unexpected reply: {e}", self.describe()))?;
        let server = if cluster.endpoint.starts_with("http://") || cluster.endpoint.starts_with("https://") {
            cluster.endpoint.clone()
        } else {
            format!("https://{}", cluster.endpoint)
        };
        let mut cfg = kube::Config::new(server.parse().map_err(|e| format!("endpoint {server}: {e}"))?);
        if let Some(ca) = cluster.master_auth.and_then(|m| m.cluster_ca_certificate) {
            cfg.root_cert = Some(pem_certs(&ca)?);
        }
        let token = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or("the credentials gave no bearer token")?;
        cfg.auth_info.token = Some(token.to_string().into());
        cfg.default_namespace = "default".into();
        Ok(cfg)
    }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct GkeCluster {
    endpoint: String,
    master_auth: Option<MasterAuth>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct MasterAuth {
    cluster_ca_certificate: Option<String>,
}

/// The DER certificates of `masterAuth.clusterCaCertificate` (base64 of PEM).
fn pem_certs(b64: &str) -> Result<Vec<Vec<u8>>, String> {
    let pem = data_encoding::BASE64
        .decode(b64.trim().as_bytes())
        .map_err(|e| format!("clusterCaCertificate: not base64: {e}"))?;
    let pem = String::from_utf8_lossy(&pem);
    let mut out = vec![];
    let mut inside: Option<String> = None;
    for line in pem.lines().map(str::trim) {
        if line.starts_with("-----BEGIN CERTIFICATE") {
            inside = Some(String::new());
        } else if line.starts_with("-----END CERTIFICATE") {
            let body = inside.take().ok_or("clusterCaCertificate: END without BEGIN")?;
            out.push(
                data_encoding::BASE64
                    .decode(body.as_bytes())
                    .map_err(|e| format!("clusterCaCertificate: bad PEM body: {e}"))?,
            );
        } else if let Some(b) = inside.as_mut() {
            b.push_str(line);
        }
    }
    if out.is_empty() {
        return Err("clusterCaCertificate holds no certificate".into());
    }
    Ok(out)
}

/// Kubernetes clients by cluster, made once (and again when an ADC token nears its end),
/// and the debug pods known to be running. Clone freely: clones share.
#[derive(Clone, Default)]
pub struct Clients {
    inner: Arc<Mutex<ClientMap>>,
    /// One lock per node's debug pod, so users arriving together create it once.
    pub(crate) debug: Arc<std::sync::Mutex<DebugPods>>,
    /// The debug pods these clients created: (cluster, namespace, pod).
    pub(crate) created: Arc<std::sync::Mutex<Vec<(ClusterRef, String, String)>>>,
}

/// Each cluster's client, with when it was made from an expiring token.
type ClientMap = HashMap<ClusterRef, (kube::Client, Option<Instant>)>;
/// Whether a node's debug pod is known to run, by (cluster, node).
pub(crate) type DebugPods = HashMap<(ClusterRef, String), Arc<Mutex<bool>>>;

impl Clients {
    /// The client for `cluster`. Call inside the Tokio runtime that will use it.
    pub async fn get(&self, cluster: &ClusterRef) -> Result<kube::Client, String> {
        crate::cloud::gcp::http::install_crypto_provider();
        let mut map = self.inner.lock().await;
        if let Some((c, made)) = map.get(cluster) {
            if made.is_none_or(|m| m.elapsed() < TOKEN_CLIENT_LIFE) {
                return Ok(c.clone());
            }
        }
        let cfg = cluster.config().await?;
        let expires = cfg.auth_info.token.is_some() && cluster.context.is_none();
        let client = kube::Client::try_from(cfg).map_err(|e| format!("{}: {e}", cluster.describe()))?;
        map.insert(cluster.clone(), (client.clone(), expires.then(Instant::now)));
        Ok(client)
    }
}

/// A kube error as one line: the API's own Status message when there is one.
pub fn why(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({})", s.message, s.reason),
        other => other.to_string(),
    }
}

/// Whether `e` is the API's 404.
pub fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ca_certificates_decode_from_base64_pem() {
        let der = b"\x30\x03\x02\x01\x01";
        let pem = format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            data_encoding::BASE64.encode(der)
        );
        let b64 = data_encoding::BASE64.encode(pem.as_bytes());
        assert_eq!(pem_certs(&b64).unwrap(), vec![der.to_vec()]);
        assert!(pem_certs("!!").unwrap_err().contains("not base64"));
        assert!(pem_certs(&data_encoding::BASE64.encode(b"nothing"))
            .unwrap_err()
            .contains("no certificate"));
    }

    #[test]
    fn describes_either_way() {
        let mut r = ClusterRef {
            kubeconfig: None,
            context: Some("gke_p_l_c".into()),
            project: None,
            location: None,
            cluster: None,
        };
        assert_eq!(r.describe(), "context gke_p_l_c");
        r.context = None;
        r.project = Some("p".into());
        r.location = Some("us-central1".into());
        r.cluster = Some("c".into());
        assert_eq!(r.describe(), "projects/p/locations/us-central1/clusters/c");
    }
}
