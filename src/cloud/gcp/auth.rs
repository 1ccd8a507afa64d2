//! Credentials for Google's APIs: Application Default Credentials through
//! `google-cloud-auth`, with one forced refresh when an API answers 401.
//!
//! Sources ([`CredentialSource`]):
//! * **ADC**, as Google's libraries look for it: the JSON file named by
//!   `GOOGLE_APPLICATION_CREDENTIALS` (a service-account key, gcloud user credentials,
//!   impersonation or workload-identity config); else gcloud's
//!   `~/.config/gcloud/application_default_credentials.json`; else the GCE metadata server
//!   (`GCE_METADATA_HOST` overrides its address).
//! * A credentials JSON document given directly, or the metadata server at a given address
//!   (tests, the provisioner's own settings).
//!
//! Tokens are cached and refreshed before expiry by `google-cloud-auth`. When an API still
//! answers 401 (a token revoked or expired early), [`Auth::refresh`] rebuilds the
//! credentials, which fetches a new token; callers do that once per request.
//!
//! Nothing here logs or formats a token, a key or a file's contents: [`Auth`]'s `Debug` and
//! [`Auth::describe`] name only the kind of credentials, the account's e-mail and the file.

use super::error::{redact, GcpError};
use google_cloud_auth::credentials::{
    self, external_account, impersonated, mds, service_account, user_account, CacheableResource, Credentials,
};
use reqwest::header::HeaderMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The OAuth scope flightdeck asks for: covers Compute Engine and Cloud Billing.
pub const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// Where credentials come from.
#[derive(Clone)]
pub enum CredentialSource {
    /// Application Default Credentials (see the module doc).
    Adc,
    /// A credentials JSON document (`"type"`: `service_account`, `authorized_user`,
    /// `impersonated_service_account` or `external_account`).
    Json(Arc<serde_json::Value>),
    /// The metadata server at `endpoint` (`http://host:port`), or the default one.
    Metadata { endpoint: Option<String> },
    /// Credentials built elsewhere. [`Auth::refresh`] cannot rebuild these.
    Given(Credentials),
}

impl fmt::Debug for CredentialSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialSource::Adc => f.write_str("Adc"),
            CredentialSource::Json(v) => write!(f, "Json({})", describe_json(v, None)),
            CredentialSource::Metadata { endpoint } => write!(f, "Metadata({endpoint:?})"),
            CredentialSource::Given(_) => f.write_str("Given"),
        }
    }
}

/// Where Application Default Credentials would come from, as `google-cloud-auth` decides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdcLocation {
    /// `GOOGLE_APPLICATION_CREDENTIALS` (the file may be missing: that is an error).
    EnvFile(PathBuf),
    /// gcloud's `application_default_credentials.json`, which exists.
    WellKnownFile(PathBuf),
    /// Neither: the metadata server.
    Metadata,
}

impl AdcLocation {
    /// Pure: from an environment lookup and a file-exists check.
    pub fn resolve(var: impl Fn(&str) -> Option<String>, exists: impl Fn(&Path) -> bool) -> AdcLocation {
        if let Some(p) = var("GOOGLE_APPLICATION_CREDENTIALS") {
            return AdcLocation::EnvFile(PathBuf::from(p));
        }
        if let Some(home) = var("HOME") {
            let p = Path::new(&home).join(".config/gcloud/application_default_credentials.json");
            if exists(&p) {
                return AdcLocation::WellKnownFile(p);
            }
        }
        AdcLocation::Metadata
    }

    pub fn from_env() -> AdcLocation {
        Self::resolve(|k| std::env::var(k).ok().filter(|v| !v.is_empty()), Path::exists)
    }

    pub fn file(&self) -> Option<&Path> {
        match self {
            AdcLocation::EnvFile(p) | AdcLocation::WellKnownFile(p) => Some(p),
            AdcLocation::Metadata => None,
        }
    }
}

/// Authorization headers for Google's APIs. Cheap to clone; clones share the token.
#[derive(Clone)]
pub struct Auth {
    inner: Arc<Inner>,
}

struct Inner {
    source: CredentialSource,
    scopes: Vec<String>,
    description: String,
    /// What the source resolved to: a credentials JSON (for the project id), or none.
    json: Option<Arc<serde_json::Value>>,
    metadata: bool,
    current: tokio::sync::Mutex<Current>,
}

struct Current {
    /// Bumped on every rebuild, so that concurrent 401s refresh once.
    generation: u64,
    creds: Credentials,
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Auth")
            .field("credentials", &self.inner.description)
            .finish()
    }
}

impl Auth {
    /// Application Default Credentials with the cloud-platform scope.
    /// Call inside a Tokio runtime (the token cache runs as a task).
    pub fn from_adc() -> Result<Auth, GcpError> {
        Self::new(CredentialSource::Adc)
    }

    /// Credentials from `source` with the cloud-platform scope. Call inside a Tokio runtime.
    pub fn new(source: CredentialSource) -> Result<Auth, GcpError> {
        Self::with_scopes(source, [CLOUD_PLATFORM_SCOPE])
    }

    pub fn with_scopes<I, S>(source: CredentialSource, scopes: I) -> Result<Auth, GcpError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        install_crypto_provider();
        let scopes: Vec<String> = scopes.into_iter().map(Into::into).collect();
        let (json, metadata, description) = resolve(&source)?;
        let creds = build(&source, &scopes)?;
        Ok(Auth {
            inner: Arc::new(Inner {
                source,
                scopes,
                description,
                json,
                metadata,
                current: tokio::sync::Mutex::new(Current { generation: 0, creds }),
            }),
        })
    }

    /// What the credentials are, for messages: `service account x@p.iam.gserviceaccount.com
    /// (key file /path)`, `gcloud user credentials (/path)`, `GCE metadata server`.
    pub fn describe(&self) -> &str {
        &self.inner.description
    }

    /// The credentials JSON, when the source is one (for its `project_id`). Not for logs.
    pub(crate) fn json(&self) -> Option<&serde_json::Value> {
        self.inner.json.as_deref()
    }

    /// The source is the metadata server.
    pub fn is_metadata(&self) -> bool {
        self.inner.metadata
    }

    /// The headers to send (`authorization`, and `x-goog-user-project` when a quota project
    /// is set), with the generation of the credentials that made them.
    pub async fn headers(&self) -> Result<(u64, HeaderMap), GcpError> {
        let (generation, creds) = {
            let cur = self.inner.current.lock().await;
            (cur.generation, cur.creds.clone())
        };
        match creds.headers(http::Extensions::new()).await {
            Ok(CacheableResource::New { data, .. }) => Ok((generation, data)),
            Ok(CacheableResource::NotModified) => Err(GcpError::Auth(
                "the auth library answered `not modified` to a first request".into(),
            )),
            Err(e) => Err(GcpError::Auth(self.explain(&e))),
        }
    }

    /// Throw the cached token away and build the credentials again (a new token on next
    /// use), unless another caller already did since `generation`.
    pub async fn refresh(&self, generation: u64) -> Result<(), GcpError> {
        let mut cur = self.inner.current.lock().await;
        if cur.generation != generation {
            return Ok(());
        }
        tracing::debug!(credentials = %self.inner.description, "refreshing the access token after a 401");
        cur.creds = build(&self.inner.source, &self.inner.scopes)?;
        cur.generation += 1;
        Ok(())
    }

    fn explain(&self, e: &google_cloud_auth::errors::CredentialsError) -> String {
        // The library's message ends in "but future attempts may succeed" / "and future
        // attempts will not succeed"; the innermost cause says what actually happened.
        let text = e.to_string();
        let text = text
            .trim_end_matches(" but future attempts may succeed")
            .trim_end_matches(" and future attempts will not succeed");
        let mut root = None;
        let mut cause = std::error::Error::source(e);
        while let Some(c) = cause {
            root = Some(c.to_string());
            cause = c.source();
        }
        let root = root.map(|r| format!(" ({})", redact(&r))).unwrap_or_default();
        if self.inner.metadata {
            format!(
                "{} gave no token{root}, and no credentials file was found \
                 (GOOGLE_APPLICATION_CREDENTIALS is not set; there is no \
                 ~/.config/gcloud/application_default_credentials.json). Run `gcloud auth \
                 application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a \
                 service-account key file",
                self.inner.description
            )
        } else {
            format!("{}: {}{root}", self.inner.description, redact(text))
        }
    }
}

/// The JSON of a source (read for ADC files), whether it is the metadata server, and its
/// description.
type Resolved = (Option<Arc<serde_json::Value>>, bool, String);

fn resolve(source: &CredentialSource) -> Result<Resolved, GcpError> {
    match source {
        CredentialSource::Adc => match AdcLocation::from_env() {
            AdcLocation::Metadata => Ok((None, true, metadata_description(None))),
            loc => {
                let path = loc.file().expect("a file location").to_path_buf();
                let why = if matches!(loc, AdcLocation::EnvFile(_)) {
                    "GOOGLE_APPLICATION_CREDENTIALS names"
                } else {
                    "gcloud's application-default credentials file"
                };
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| GcpError::Auth(format!("cannot read {} ({why}): {e}", path.display())))?;
                let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                    // serde_json's message has a line and column, never the text itself.
                    GcpError::Auth(format!(
                        "{} ({why}) is not a credentials JSON file: {}",
                        path.display(),
                        redact(&e.to_string())
                    ))
                })?;
                let d = describe_json(&v, Some(&path));
                Ok((Some(Arc::new(v)), false, d))
            }
        },
        CredentialSource::Json(v) => Ok((Some(v.clone()), false, describe_json(v, None))),
        CredentialSource::Metadata { endpoint } => {
            Ok((None, true, metadata_description(endpoint.as_deref())))
        }
        CredentialSource::Given(_) => Ok((None, false, "credentials given by the caller".into())),
    }
}

fn metadata_description(endpoint: Option<&str>) -> String {
    match std::env::var("GCE_METADATA_HOST").ok().filter(|h| !h.is_empty()) {
        Some(h) => format!("the GCE metadata server at {h} (GCE_METADATA_HOST)"),
        None => match endpoint {
            Some(e) => format!("the GCE metadata server at {e}"),
            None => "the GCE metadata server".into(),
        },
    }
}

/// `service account NAME@P.iam.gserviceaccount.com (key file PATH)`; no secret fields.
fn describe_json(v: &serde_json::Value, path: Option<&Path>) -> String {
    let field = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("");
    let what = match field("type") {
        "service_account" => format!("service account {}", field("client_email")),
        "authorized_user" => "gcloud user credentials".to_string(),
        "impersonated_service_account" => "impersonated service account credentials".to_string(),
        "external_account" => "workload identity federation credentials".to_string(),
        "" => "credentials without a `type`".to_string(),
        other => format!("credentials of type `{other}`"),
    };
    match path {
        Some(p) if field("type") == "service_account" => format!("{what} (key file {})", p.display()),
        Some(p) => format!("{what} ({})", p.display()),
        None => what,
    }
}

fn build(source: &CredentialSource, scopes: &[String]) -> Result<Credentials, GcpError> {
    let built = match source {
        CredentialSource::Given(c) => return Ok(c.clone()),
        CredentialSource::Metadata { endpoint } => {
            let mut b = mds::Builder::default().with_scopes(scopes.to_vec());
            if let Some(e) = endpoint {
                b = b.with_endpoint(e.clone());
            }
            b.build()
        }
        // The library's own ADC, so that its rules hold exactly (GOOGLE_CLOUD_QUOTA_PROJECT,
        // token_uri, universe domain); the JSON read here only describes the credentials.
        CredentialSource::Adc => credentials::Builder::default()
            .with_scopes(scopes.to_vec())
            .build(),
        CredentialSource::Json(v) => {
            let v = serde_json::Value::clone(v);
            match v.get("type").and_then(|t| t.as_str()).unwrap_or("") {
                "service_account" => service_account::Builder::new(v)
                    .with_access_specifier(service_account::AccessSpecifier::from_scopes(scopes.to_vec()))
                    .build(),
                "authorized_user" => user_account::Builder::new(v).with_scopes(scopes.to_vec()).build(),
                "impersonated_service_account" => {
                    impersonated::Builder::new(v).with_scopes(scopes.to_vec()).build()
                }
                "external_account" => external_account::Builder::new(v)
                    .with_scopes(scopes.to_vec())
                    .build(),
                other => {
                    return Err(GcpError::Auth(format!(
                        "unsupported credentials type `{other}` (expected service_account, \
                         authorized_user, impersonated_service_account or external_account)"
                    )))
                }
            }
        }
    };
    built.map_err(|e| {
        let kind = if e.is_loading() {
            "cannot load the credentials"
        } else if e.is_parsing() || e.is_missing_field() {
            "the credentials are incomplete or unreadable"
        } else if e.is_unknown_type() || e.is_not_supported() {
            "this kind of credentials is not supported"
        } else {
            "cannot use the credentials"
        };
        GcpError::Auth(format!("{kind}: {}", redact(&e.to_string())))
    })
}

/// Install ring as rustls' process-wide crypto provider (reqwest and google-cloud-auth are
/// built without one, so that neither OpenSSL nor aws-lc is compiled). Idempotent.
pub fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Err means another thread installed one first: fine either way.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn adc_location_follows_google_order() {
        let env = |pairs: &[(&str, &str)]| {
            let m: HashMap<String, String> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            move |k: &str| m.get(k).cloned()
        };
        let yes = |_: &Path| true;
        let no = |_: &Path| false;
        assert_eq!(
            AdcLocation::resolve(
                env(&[("GOOGLE_APPLICATION_CREDENTIALS", "/k.json"), ("HOME", "/h")]),
                yes
            ),
            AdcLocation::EnvFile("/k.json".into())
        );
        assert_eq!(
            AdcLocation::resolve(env(&[("HOME", "/h")]), yes),
            AdcLocation::WellKnownFile("/h/.config/gcloud/application_default_credentials.json".into())
        );
        assert_eq!(
            AdcLocation::resolve(env(&[("HOME", "/h")]), no),
            AdcLocation::Metadata
        );
        assert_eq!(AdcLocation::resolve(env(&[]), yes), AdcLocation::Metadata);
    }

    #[test]
    fn descriptions_name_the_account_never_a_secret() {
        let sa = serde_json::json!({"type": "service_account", "client_email": "x@p.iam.gserviceaccount.com",
            "private_key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "private_key_id": "kid"});
        let d = describe_json(&sa, Some(Path::new("/k.json")));
        assert_eq!(
            d,
            "service account x@p.iam.gserviceaccount.com (key file /k.json)"
        );
        let user =
            serde_json::json!({"type": "authorized_user", "client_secret": "csec", "refresh_token": "rt"});
        let d = describe_json(&user, None);
        assert_eq!(d, "gcloud user credentials");
        let dbg = format!("{:?}", CredentialSource::Json(Arc::new(user)));
        assert!(!dbg.contains("csec") && !dbg.contains("rt\""), "{dbg}");
    }

    #[tokio::test]
    async fn unsupported_and_broken_credentials_are_auth_errors() {
        let e = Auth::new(CredentialSource::Json(Arc::new(
            serde_json::json!({"type": "gdch_thing"}),
        )))
        .unwrap_err()
        .to_string();
        assert!(e.contains("unsupported credentials type `gdch_thing`"), "{e}");
        let e = Auth::new(CredentialSource::Json(Arc::new(
            serde_json::json!({"type": "authorized_user", "client_secret": "s3cr3t-value"}),
        )))
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("credentials: the credentials are incomplete"),
            "{e}"
        );
        assert!(!e.contains("s3cr3t-value"), "{e}");
    }
}
