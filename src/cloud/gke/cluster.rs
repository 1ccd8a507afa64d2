//! Which cluster a GKE fleet is on, and a Kubernetes client for it.
//!
//! Two ways to name it, as operators do:
//! * a kubeconfig `context` (what `gcloud container clusters get-credentials` writes):
//!   the kubeconfig's own server, CA and credentials are used. Its credential plugin
//!   (`exec`, `auth-provider`'s `cmd-path`: `gke-gcloud-auth-plugin`) is a program run on
//!   this machine as the operator, so a kubeconfig is read only when no one but the
//!   operator or root could have written it ([`load_kubeconfig`]), and its plugin runs
//!   only from the operator's own kubeconfig (`$KUBECONFIG`, `~/.kube/config`: what
//!   kubectl runs plugins from) or where the operator's config lists its whole command
//!   line (`gke.allow_exec_plugins`; a fleet file cannot allow its own kubeconfig's)
//!   ([`KubeconfigFile::permit`]). Nothing reaches kube-rs before those checks;
//! * `project`, `location`, `cluster`: flightdeck asks the GKE API for the cluster's
//!   endpoint and CA, and authenticates as gcloud's GKE auth plugin does: an OAuth access
//!   token of Application Default Credentials as the bearer token (renewed before the
//!   hour it lives).

use crate::cloud::gcp::auth::Auth;
use crate::node::kube::{ClusterRef, KubeOptIn};
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// The GKE API (`projects.locations.clusters.get`); overridden (a loopback double) by
/// `FLIGHTDECK_GKE_API_URL`.
pub const GKE_API_URL: &str = "https://container.googleapis.com/v1";
pub const GKE_API_URL_VAR: &str = "FLIGHTDECK_GKE_API_URL";

/// A client made from an ADC token is made again after this (tokens live an hour).
const TOKEN_CLIENT_LIFE: Duration = Duration::from_secs(45 * 60);

impl ClusterRef {
    /// From a fleet file's `gke` block as [`crate::fleet::load`] left it (its
    /// `kubeconfig` made absolute).
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
            (Some(c), ..) => format!("context {}", printable(c)),
            (None, Some(p), Some(l), Some(c)) => format!("projects/{p}/locations/{l}/clusters/{c}"),
            _ => "an incompletely named cluster".into(),
        }
    }

    /// The kubeconfig file to read and whether it is the operator's own: the fleet's
    /// (recorded absolute), else `$KUBECONFIG`'s first, else `~/.kube/config` (a
    /// context is looked up in all of `$KUBECONFIG`'s: [`load_own_kubeconfig`]). A
    /// relative path (recorded by an older flightdeck) is refused, never resolved against
    /// the current folder.
    fn kubeconfig_path(&self) -> Result<(PathBuf, bool), String> {
        let default = default_kubeconfig();
        let Some(p) = &self.kubeconfig else {
            return Ok((default, true));
        };
        let path = match p.strip_prefix("~/") {
            Some(rest) => crate::paths::home_dir().unwrap_or_default().join(rest),
            None => PathBuf::from(p),
        };
        if path.is_relative() {
            return Err(format!(
                "the fleet's kubeconfig `{}` is recorded as a relative path, which flightdeck no longer resolves against the current folder: run `flightdeck fleet apply FILE` again to record it from the fleet file's folder",
                printable(p)
            ));
        }
        let own = is_default_kubeconfig(&path);
        Ok((path, own))
    }

    /// The kubeconfig of a cluster named by context, checked ([`load_kubeconfig`]);
    /// `None` for a cluster named by project, location and cluster (no kubeconfig).
    pub fn kubeconfig_file(&self) -> Result<Option<KubeconfigFile>, KubeconfigError> {
        let Some(ctx) = &self.context else {
            return Ok(None);
        };
        if self.kubeconfig.is_none() {
            return load_own_kubeconfig(ctx).map(Some);
        }
        let (path, own) = self.kubeconfig_path().map_err(KubeconfigError::refused)?;
        load_kubeconfig(&path, own, ctx).map(Some)
    }

    async fn config(&self) -> Result<kube::Config, String> {
        match self.kubeconfig_file().map_err(|e| e.message)? {
            Some(k) => {
                // The plugin question is settled here, before kube-rs sees the file: it
                // would run the plugin on the first request.
                k.permit(&operator_opt_in())?;
                let opts = KubeConfigOptions {
                    context: Some(k.context.clone()),
                    ..KubeConfigOptions::default()
                };
                let shown = printable(&k.path.display().to_string());
                let ctx = printable(&k.context);
                kube::Config::from_custom_kubeconfig(k.config, &opts)
                    .await
                    .map_err(|e| format!("kubeconfig {shown} context {ctx}: {e}"))
            }
            None => self.gke_config().await,
        }
    }

    /// The cluster as the GKE API names it (project, location, cluster): the fleet
    /// file's, else a context named as `gcloud container clusters get-credentials`
    /// names one (`gke_PROJECT_LOCATION_CLUSTER`).
    pub fn gke_name(&self) -> Option<(String, String, String)> {
        if let (Some(p), Some(l), Some(c)) = (&self.project, &self.location, &self.cluster) {
            return Some((p.clone(), l.clone(), c.clone()));
        }
        let ctx = self.context.as_deref()?.strip_prefix("gke_")?;
        let mut parts = ctx.splitn(3, '_');
        let (p, l, c) = (parts.next()?, parts.next()?, parts.next()?);
        (!p.is_empty() && !l.is_empty() && !c.is_empty()).then(|| (p.into(), l.into(), c.into()))
    }

    /// GET `suffix` under the cluster's GKE API resource with an ADC access token: the
    /// body, and the token's headers.
    async fn gke_api(&self, suffix: &str) -> Result<(Vec<u8>, http::HeaderMap), String> {
        let Some((p, l, c)) = self.gke_name() else {
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
            "{}/projects/{p}/locations/{l}/clusters/{c}{suffix}",
            base.trim_end_matches('/')
        );
        crate::cloud::gcp::auth::install_crypto_provider();
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
                "GKE API {}{suffix}: {status} {reason}: {message}",
                self.describe()
            ));
        }
        Ok((body.to_vec(), headers))
    }

    /// The cluster's node pools from the GKE API (pools at zero nodes included); `None`
    /// when the fleet does not name the cluster as the GKE API does.
    pub async fn node_pools(&self) -> Option<Result<Vec<super::view::ApiPool>, String>> {
        self.gke_name()?;
        #[derive(serde::Deserialize, Default)]
        #[serde(rename_all = "camelCase", default)]
        struct List {
            node_pools: Vec<super::view::ApiPool>,
        }
        Some(self.gke_api("/nodePools").await.and_then(|(body, _)| {
            serde_json::from_slice::<List>(&body)
                .map(|l| l.node_pools)
                .map_err(|e| format!("GKE API {}/nodePools: unexpected reply: {e}", self.describe()))
        }))
    }

    /// The cluster's endpoint and CA from the GKE API, with an ADC access token.
    async fn gke_config(&self) -> Result<kube::Config, String> {
        if self.project.is_none() || self.location.is_none() || self.cluster.is_none() {
            return Err(
                "the fleet names no cluster: give project, location and cluster, or a context".into(),
            );
        }
        let (body, headers) = self.gke_api("").await?;
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

/// A credential plugin: a program kube-rs runs on this machine, as the operator, for a
/// token (client-go's `exec` plugin, or the `gcp` `auth-provider`'s `cmd-path`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plugin {
    /// `exec` or `auth-provider gcp`.
    pub kind: String,
    /// As kube-rs runs it: a command with a `/` made absolute from the kubeconfig's
    /// folder, a bare name looked up in `PATH`.
    pub command: String,
    pub args: Vec<String>,
}

/// The plugins the operator allows a kubeconfig that a fleet file names to run: their
/// config's `gke.allow_exec_plugins`, read at each use; none when it cannot be read.
pub fn operator_opt_in() -> KubeOptIn {
    crate::paths::Paths::from_env()
        .ok()
        .and_then(|p| crate::config::Config::load(&p).ok())
        .and_then(|c| c.gke)
        .map(|g| KubeOptIn {
            lines: g.allow_exec_plugins,
            files: g.allow_kubeconfig_files,
        })
        .unwrap_or_default()
}

/// Where the operator's opt-in goes, for messages.
fn config_file_shown() -> String {
    crate::paths::Paths::from_env()
        .map(|p| p.config_file().display().to_string())
        .unwrap_or_else(|_| "flightdeck's config file (`flightdeck config path`)".into())
}

impl Plugin {
    /// The whole command line an opt-in names: each word as written, quoted (single
    /// quotes) where a shell would need it. Unlike [`Plugin::shown`] nothing is escaped
    /// or cut, so one line names one command and its arguments exactly.
    pub fn command_line(&self) -> String {
        std::iter::once(self.command.as_str())
            .chain(self.args.iter().map(String::as_str))
            .map(|w| {
                let plain = !w.is_empty()
                    && w.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
                if plain {
                    w.to_string()
                } else {
                    crate::shellenv::quote(w)
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The command line for a message: words quoted where a shell would need it,
    /// control characters escaped, at most 200 characters.
    pub fn shown(&self) -> String {
        // `printable` only escapes control characters, which are never plain words, so
        // escaping the quoted line is escaping each word before quoting it.
        let line = printable(&self.command_line());
        match line.char_indices().nth(200) {
            Some((i, _)) => format!("{}...", &line[..i]),
            None => line,
        }
    }

    /// The plugins of a kubeconfig user.
    fn of(user: &AuthInfo) -> Vec<Plugin> {
        let mut out = vec![];
        if let Some(e) = &user.exec {
            out.push(Plugin {
                kind: "exec".into(),
                command: e.command.clone().unwrap_or_default(),
                args: e.args.clone().unwrap_or_default(),
            });
        }
        if let Some(p) = &user.auth_provider {
            if let Some(cmd) = p.config.get("cmd-path") {
                out.push(Plugin {
                    kind: format!("auth-provider {}", printable(&p.name)),
                    command: cmd.clone(),
                    args: p
                        .config
                        .get("cmd-args")
                        .map(|a| a.split_whitespace().map(str::to_string).collect())
                        .unwrap_or_default(),
                });
            }
        }
        out
    }
}

/// Why a kubeconfig is not used; `missing` when the file is not there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeconfigError {
    pub missing: bool,
    pub message: String,
}

impl KubeconfigError {
    fn refused(message: String) -> KubeconfigError {
        KubeconfigError {
            missing: false,
            message,
        }
    }
}

impl std::fmt::Display for KubeconfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A kubeconfig that passed [`load_kubeconfig`]'s checks: what flightdeck will hand to
/// kube-rs (the context, its cluster and its user, nothing else of the file), and what
/// it will run.
#[derive(Debug, Clone)]
pub struct KubeconfigFile {
    /// The file, links resolved.
    pub path: PathBuf,
    /// The operator's own kubeconfig (`$KUBECONFIG`'s first, else `~/.kube/config`).
    pub own: bool,
    pub context: String,
    pub user: Option<String>,
    pub plugins: Vec<Plugin>,
    /// The files its context makes kube-rs read.
    pub files: Vec<CredFile>,
    config: Kubeconfig,
}

/// A file a kubeconfig's context makes kube-rs read and use with the server: its user's
/// `tokenFile` (sent as the bearer token), client certificate and key, its cluster's CA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredFile {
    /// `tokenFile`, `client-certificate`, `client-key`, `certificate-authority`.
    pub field: &'static str,
    /// As kube-rs reads it (made absolute from the kubeconfig's folder), links resolved
    /// where it exists.
    pub path: PathBuf,
    /// Whether it is in the kubeconfig's folder (or below), links resolved.
    pub inside: bool,
}

impl CredFile {
    fn of(
        kubeconfig: &Path,
        auth: Option<&AuthInfo>,
        cluster: Option<&kube::config::Cluster>,
    ) -> Vec<CredFile> {
        let folder = kubeconfig.parent().unwrap_or(Path::new("/"));
        let folder = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_path_buf());
        let mut named: Vec<(&'static str, &String)> = vec![];
        if let Some(a) = auth {
            named.extend(a.token_file.as_ref().map(|p| ("tokenFile", p)));
            named.extend(a.client_certificate.as_ref().map(|p| ("client-certificate", p)));
            named.extend(a.client_key.as_ref().map(|p| ("client-key", p)));
        }
        named.extend(
            cluster
                .and_then(|c| c.certificate_authority.as_ref())
                .map(|p| ("certificate-authority", p)),
        );
        named
            .into_iter()
            .map(|(field, p)| {
                let written = Path::new(p);
                let written = if written.is_absolute() {
                    written.to_path_buf()
                } else {
                    folder.join(written)
                };
                let path = std::fs::canonicalize(&written).unwrap_or(written);
                CredFile {
                    field,
                    inside: path.starts_with(&folder),
                    path,
                }
            })
            .collect()
    }

    /// What reading it does, for messages.
    fn what(&self) -> &'static str {
        match self.field {
            "tokenFile" => "reads it and sends it to the server as your bearer token",
            "client-key" => "reads it and signs with it as you to the server",
            "client-certificate" => "reads it and sends it to the server",
            _ => "reads it and trusts the server it names",
        }
    }
}

impl KubeconfigFile {
    /// `kubeconfig PATH (yours|named by the fleet file), context `C`, user `U``: how
    /// every message about it begins.
    fn shown(&self) -> String {
        format!(
            "kubeconfig {} ({}), context `{}`{}",
            printable(&self.path.display().to_string()),
            if self.own {
                "yours"
            } else {
                "named by the fleet file"
            },
            printable(&self.context),
            self.user
                .as_deref()
                .map(|u| format!(", user `{}`", printable(u)))
                .unwrap_or_default()
        )
    }

    /// Whether its plugins may run: always from the operator's own kubeconfig (as kubectl
    /// runs them), else only a whole command line the operator's config allows
    /// ([`operator_opt_in`]). The refusal names the plugin and the line to allow.
    pub fn permit(&self, opt: &KubeOptIn) -> Result<(), String> {
        if self.own {
            return Ok(());
        }
        if let Some(f) = self.files.iter().find(|f| !f.inside && !opt.allows_file(&f.path)) {
            let path = printable(&f.path.display().to_string());
            return Err(format!(
                "{}: its {} is {path}, outside the kubeconfig's folder; kube-rs {}. A kubeconfig that a fleet file names reads no file outside its own folder unless you list it in your own config ({}): `gke: {{allow_kubeconfig_files: [{}]}}`; a fleet file cannot allow it",
                self.shown(),
                f.field,
                f.what(),
                config_file_shown(),
                yaml_word(&path),
            ));
        }
        let Some(p) = self.plugins.iter().find(|p| !opt.allows(&p.command_line())) else {
            return Ok(());
        };
        Err(format!(
            "{}: its {} credential plugin would run `{}` on this machine as you. A kubeconfig that a fleet file names runs no local command unless you allow that command line in your own config ({}): `gke: {{allow_exec_plugins: [{}]}}`; a fleet file cannot allow it. kubectl runs plugins only from your own kubeconfig ($KUBECONFIG, ~/.kube/config), as flightdeck does without the opt-in",
            self.shown(),
            p.kind,
            p.shown(),
            config_file_shown(),
            yaml_word(&printable(&p.command_line())),
        ))
    }

    /// One line for `fleet plan` and `fleet validate`: the file, whose it is, the context
    /// and user, and each plugin with whether it runs.
    pub fn summary(&self, opt: &KubeOptIn) -> String {
        let mut creds = if self.plugins.is_empty() {
            "no credential plugin (nothing is run)".to_string()
        } else {
            self.plugins
                .iter()
                .map(|p| {
                    let verdict = if self.own {
                        "runs, as kubectl runs your own kubeconfig's plugins"
                    } else if opt.allows(&p.command_line()) {
                        "runs on this machine as you: allowed by your config's gke.allow_exec_plugins"
                    } else {
                        "refused: your config's gke.allow_exec_plugins does not list it"
                    };
                    format!("{} plugin `{}` ({verdict})", p.kind, p.shown())
                })
                .collect::<Vec<_>>()
                .join("; ")
        };
        for f in &self.files {
            let verdict = if self.own {
                "yours"
            } else if f.inside {
                "in the kubeconfig's folder"
            } else if opt.allows_file(&f.path) {
                "outside its folder: allowed by your config's gke.allow_kubeconfig_files"
            } else {
                "refused: outside its folder, and your config's gke.allow_kubeconfig_files does not list it"
            };
            creds.push_str(&format!(
                "; reads {} {} ({verdict})",
                f.field,
                printable(&f.path.display().to_string())
            ));
        }
        format!("{}: {creds}", self.shown())
    }
}

/// The operator's own kubeconfig files: `$KUBECONFIG`'s list (empty entries skipped),
/// else `~/.kube/config`.
pub fn default_kubeconfigs() -> Vec<PathBuf> {
    if let Some(k) = std::env::var_os("KUBECONFIG").filter(|k| !k.is_empty()) {
        let list: Vec<PathBuf> = std::env::split_paths(&k)
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
        if !list.is_empty() {
            return list;
        }
    }
    vec![crate::paths::home_dir().unwrap_or_default().join(".kube/config")]
}

/// The operator's first kubeconfig file ([`default_kubeconfigs`]).
pub fn default_kubeconfig() -> PathBuf {
    default_kubeconfigs().swap_remove(0)
}

/// Whether `path` is one of the operator's own kubeconfig files (the same file, links
/// resolved).
pub fn is_default_kubeconfig(path: &Path) -> bool {
    let Ok(a) = std::fs::canonicalize(path) else {
        return false;
    };
    default_kubeconfigs()
        .iter()
        .any(|p| std::fs::canonicalize(p).is_ok_and(|b| a == b))
}

/// A fleet file's `gke.kubeconfig` as an absolute path: `~/` from the home, a relative
/// path from the fleet file's folder (never the current folder of a later command).
pub fn resolve_kubeconfig(fleet_file: &Path, written: &str) -> PathBuf {
    if let Some(rest) = written.strip_prefix("~/") {
        return crate::paths::home_dir().unwrap_or_default().join(rest);
    }
    let p = Path::new(written);
    if p.is_absolute() {
        return p.to_path_buf();
    }
    let file = std::path::absolute(fleet_file).unwrap_or_else(|_| fleet_file.to_path_buf());
    file.parent().unwrap_or(Path::new("/")).join(p)
}

/// Why `meta` (of `path`) lets someone other than the operator (`me`) or root change
/// what is there: its owner, or write permission for group or others. A folder with the
/// sticky bit (as /tmp) may be writable by others: there only a file's owner may
/// replace it.
fn unsafe_owner_or_mode(path: &Path, meta: &std::fs::Metadata, me: u32, folder: bool) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let (uid, mode) = (meta.uid(), meta.mode() & 0o7777);
    if uid != me && uid != 0 {
        return Some(format!("owned by uid {uid}, not by you (uid {me}) or root"));
    }
    if folder && mode & 0o1000 != 0 {
        return None;
    }
    let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
        (true, true) => "group and others",
        (true, false) => "group",
        (false, true) => "others",
        (false, false) => return None,
    };
    Some(format!(
        "writable by {who} (mode {mode:04o}): `chmod go-w {}`",
        printable(&path.display().to_string())
    ))
}

/// The kubeconfig at `path`, links resolved, if no one but the operator or root could
/// have written it: the file owned by one of them and writable by no group or others,
/// and so every folder above it and above the link that names it (OpenSSH's checks of
/// its configuration and of `StrictModes`).
fn trusted(path: &Path) -> Result<PathBuf, KubeconfigError> {
    let shown = printable(&path.display().to_string());
    let real = std::fs::canonicalize(path).map_err(|e| KubeconfigError {
        missing: e.kind() == std::io::ErrorKind::NotFound,
        message: format!("kubeconfig {shown}: {e}"),
    })?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let bad = |p: &Path, why: String, folder: bool| {
        let at = printable(&p.display().to_string());
        KubeconfigError::refused(if folder {
            format!("Bad owner or permissions on {at}, a folder above the kubeconfig {shown}: {why}")
        } else {
            format!("Bad owner or permissions on {at}: {why}")
        })
    };
    let meta =
        std::fs::metadata(&real).map_err(|e| KubeconfigError::refused(format!("kubeconfig {shown}: {e}")))?;
    if !meta.is_file() {
        return Err(KubeconfigError::refused(format!(
            "kubeconfig {shown}: not a regular file"
        )));
    }
    if let Some(why) = unsafe_owner_or_mode(&real, &meta, me, false) {
        return Err(bad(&real, why, false));
    }
    let named = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    for dir in real.ancestors().skip(1).chain(named.ancestors().skip(1)) {
        let m = std::fs::metadata(dir)
            .map_err(|e| KubeconfigError::refused(format!("{}: {e}", dir.display())))?;
        if let Some(why) = unsafe_owner_or_mode(dir, &m, me, true) {
            return Err(bad(dir, why, true));
        }
    }
    Ok(real)
}

/// The most a kubeconfig may hold (as fleet and job files: 1 MiB).
const MAX_KUBECONFIG: u64 = 1 << 20;

/// What kube-rs's reader would not survive, refused first: a file past
/// [`MAX_KUBECONFIG`] (read whole into memory), and a UTF-16 byte-order mark followed by
/// an odd number of bytes (kube-client 5's `read_path` indexes past the end and panics:
/// found by fuzzing, tests/fixtures/fuzz/kubeconfig-utf16-odd-length.bin).
fn check_bytes(path: &Path) -> Result<(), String> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = vec![];
    f.take(MAX_KUBECONFIG + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_KUBECONFIG {
        return Err(format!("larger than {} KiB", MAX_KUBECONFIG >> 10));
    }
    if let [0xFF, 0xFE, rest @ ..] | [0xFE, 0xFF, rest @ ..] = bytes.as_slice() {
        if rest.len() % 2 != 0 {
            return Err("not UTF-16: an odd number of bytes after its byte-order mark".into());
        }
    }
    Ok(())
}

/// Read the kubeconfig at `path` for `context` once [`trusted`] passes: the context, its
/// cluster and its user (the first of each name, as kube-rs takes them), and the user's
/// credential plugins. `own`: the operator's own kubeconfig.
pub fn load_kubeconfig(path: &Path, own: bool, context: &str) -> Result<KubeconfigFile, KubeconfigError> {
    let (real, kc) = read_kubeconfig(path)?;
    select_context(real, kc, own, context)
}

/// The file at `path`, checked ([`trusted`], its size) and parsed; links resolved.
fn read_kubeconfig(path: &Path) -> Result<(PathBuf, Kubeconfig), KubeconfigError> {
    let real = trusted(path)?;
    let shown = printable(&real.display().to_string());
    check_bytes(&real).map_err(|why| KubeconfigError::refused(format!("kubeconfig {shown}: {why}")))?;
    let kc = Kubeconfig::read_from(&real)
        .map_err(|e| KubeconfigError::refused(format!("kubeconfig {shown}: {e}")))?;
    Ok((real, kc))
}

/// The operator's own kubeconfig for `context`: `$KUBECONFIG`'s files merged as kubectl
/// merges them (a missing file skipped; of each context, cluster and user name the first
/// file's wins: client-go's `clientcmd` loading rules), else `~/.kube/config`. Every
/// file read passes the same checks as one.
pub fn load_own_kubeconfig(context: &str) -> Result<KubeconfigFile, KubeconfigError> {
    load_kubeconfigs(&default_kubeconfigs(), context)
}

/// [`load_own_kubeconfig`] on the files `paths`.
fn load_kubeconfigs(paths: &[PathBuf], context: &str) -> Result<KubeconfigFile, KubeconfigError> {
    if paths.len() == 1 {
        return load_kubeconfig(&paths[0], true, context);
    }
    let mut merged: Option<(PathBuf, Kubeconfig)> = None;
    for p in paths {
        let (real, kc) = match read_kubeconfig(p) {
            Ok(r) => r,
            Err(e) if e.missing => continue,
            Err(e) => return Err(e),
        };
        merged = Some(match merged {
            None => (real, kc),
            Some((first, mut m)) => {
                // The file named is the one that holds the context (for messages).
                let first = if !m.contexts.iter().any(|c| c.name == context)
                    && kc.contexts.iter().any(|c| c.name == context)
                {
                    real
                } else {
                    first
                };
                first_wins(&mut m.contexts, kc.contexts, |c| &c.name);
                first_wins(&mut m.clusters, kc.clusters, |c| &c.name);
                first_wins(&mut m.auth_infos, kc.auth_infos, |a| &a.name);
                (first, m)
            }
        });
    }
    let Some((real, kc)) = merged else {
        let shown: Vec<String> = paths
            .iter()
            .map(|p| printable(&p.display().to_string()))
            .collect();
        return Err(KubeconfigError {
            missing: true,
            message: format!(
                "kubeconfig: none of $KUBECONFIG's files exists ({})",
                shown.join(", ")
            ),
        });
    };
    select_context(real, kc, true, context)
}

/// `from`'s entries added to `into` where `into` has none of that name (kubectl's merge:
/// the first file's entry of a name wins).
fn first_wins<T>(into: &mut Vec<T>, from: Vec<T>, name: impl Fn(&T) -> &String) {
    for x in from {
        if !into.iter().any(|y| name(y) == name(&x)) {
            into.push(x);
        }
    }
}

/// The context `context` of `kc` (read from `real`), with its cluster and user only.
fn select_context(
    real: PathBuf,
    kc: Kubeconfig,
    own: bool,
    context: &str,
) -> Result<KubeconfigFile, KubeconfigError> {
    let shown = printable(&real.display().to_string());
    let Some(named) = kc.contexts.iter().find(|c| c.name == context).cloned() else {
        let names: Vec<String> = kc
            .contexts
            .iter()
            .map(|c| format!("`{}`", printable(&c.name)))
            .collect();
        return Err(KubeconfigError::refused(format!(
            "kubeconfig {shown}: no context `{}` (it has {})",
            printable(context),
            if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            }
        )));
    };
    let ctx = named.context.clone().unwrap_or_default();
    let cluster = kc.clusters.iter().find(|c| c.name == ctx.cluster).cloned();
    let user = ctx.user.clone();
    let auth = user
        .as_ref()
        .and_then(|u| kc.auth_infos.iter().find(|a| &a.name == u).cloned());
    let plugins = auth
        .as_ref()
        .and_then(|a| a.auth_info.as_ref())
        .map(Plugin::of)
        .unwrap_or_default();
    let files = CredFile::of(
        &real,
        auth.as_ref().and_then(|a| a.auth_info.as_ref()),
        cluster.as_ref().and_then(|c| c.cluster.as_ref()),
    );
    let config = Kubeconfig {
        clusters: cluster.into_iter().collect(),
        auth_infos: auth.into_iter().collect(),
        contexts: vec![named],
        current_context: Some(context.to_string()),
        ..Kubeconfig::default()
    };
    Ok(KubeconfigFile {
        path: real,
        own,
        context: context.to_string(),
        user,
        plugins,
        files,
        config,
    })
}

/// `s` for a message: control characters shown as escapes.
fn printable(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let e: Vec<char> = if c.is_control() {
                c.escape_debug().collect()
            } else {
                vec![c]
            };
            e
        })
        .collect()
}

/// `s` as a YAML scalar for a message: plain when it may be, else double-quoted.
fn yaml_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        && !matches!(s, "true" | "false" | "null" | "~");
    if plain {
        s.to_string()
    } else {
        format!("{s:?}")
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
    /// Whose objects these clients create (default: [`super::Owner::of_process`]).
    owner: Option<super::Owner>,
}

/// Each cluster's client, with when it was made from an expiring token.
type ClientMap = HashMap<ClusterRef, (kube::Client, Option<Instant>)>;
/// The debug pod these clients made on a node and saw running (its name), by (cluster,
/// node).
pub(crate) type DebugPods = HashMap<(ClusterRef, String), Arc<Mutex<Option<String>>>>;

impl Clients {
    /// Clients whose objects carry `owner`'s labels.
    pub fn with_owner(mut self, owner: super::Owner) -> Clients {
        self.owner = Some(owner);
        self
    }

    /// Whose objects these clients create and may delete.
    pub fn owner(&self) -> super::Owner {
        self.owner.clone().unwrap_or_else(super::Owner::of_process)
    }

    /// The client for `cluster`. Call inside the Tokio runtime that will use it.
    pub async fn get(&self, cluster: &ClusterRef) -> Result<kube::Client, String> {
        crate::cloud::gcp::auth::install_crypto_provider();
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

    /// M4: a gcloud context name gives the cluster's GKE API name; other names give none.
    #[test]
    fn gcloud_context_names_name_the_cluster() {
        let mut c = ClusterRef {
            kubeconfig: None,
            context: Some("gke_my-proj_us-central1_a3u-cluster".into()),
            project: None,
            location: None,
            cluster: None,
        };
        assert_eq!(
            c.gke_name(),
            Some(("my-proj".into(), "us-central1".into(), "a3u-cluster".into()))
        );
        c.context = Some("double".into());
        assert_eq!(c.gke_name(), None);
        c.context = Some("gke_p__c".into());
        assert_eq!(c.gke_name(), None);
    }

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

    const KC: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:9\ncontexts:\n- name: team\n  context:\n    cluster: c\n    user: u\n- name: other\n  context:\n    cluster: c\n    user: v\ncurrent-context: team\nusers:\n";

    fn write_kc(dir: &Path, users: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join("kubeconfig");
        std::fs::write(&p, format!("{KC}{users}")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        p
    }

    const EXEC_USER: &str = "- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: sh\n      args: [\"-c\", \"id > /tmp/x; echo ok\"]\n";

    #[test]
    fn a_plugin_of_a_kubeconfig_the_fleet_file_names_runs_only_when_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let p = write_kc(dir.path(), EXEC_USER);
        let k = load_kubeconfig(&p, false, "team").unwrap();
        assert_eq!(
            k.plugins,
            vec![Plugin {
                kind: "exec".into(),
                command: "sh".into(),
                args: vec!["-c".into(), "id > /tmp/x; echo ok".into()],
            }]
        );
        let e = k.permit(&KubeOptIn::default()).unwrap_err();
        assert!(
            e.contains("context `team`, user `u`: its exec credential plugin would run `sh -c 'id > /tmp/x; echo ok'` on this machine as you"),
            "{e}"
        );
        assert!(
            e.contains("unless you allow that command line in your own config (")
                && e.contains("`gke: {allow_exec_plugins: [\"sh -c 'id > /tmp/x; echo ok'\"]}`; a fleet file cannot allow it"),
            "{e}"
        );
        // The whole command line, not the command alone (hostile review 3, H1).
        let line = |l: &str| KubeOptIn {
            lines: vec![l.to_string()],
            files: vec![],
        };
        k.permit(&line("sh -c 'id > /tmp/x; echo ok'")).unwrap();
        assert!(k.permit(&line("sh")).is_err());
        assert!(k.permit(&line("sh -c 'echo ok'")).is_err());
        assert!(k.permit(&line("gke-gcloud-auth-plugin")).is_err());
        assert!(k
            .summary(&line("sh -c 'id > /tmp/x; echo ok'"))
            .ends_with("(runs on this machine as you: allowed by your config's gke.allow_exec_plugins)"));
        let summary = k.summary(&KubeOptIn::default());
        assert!(
            summary.ends_with(
                "exec plugin `sh -c 'id > /tmp/x; echo ok'` (refused: your config's gke.allow_exec_plugins does not list it)"
            ),
            "{summary}"
        );
        // The operator's own kubeconfig runs its plugin, as kubectl does.
        let own = load_kubeconfig(&p, true, "team").unwrap();
        own.permit(&KubeOptIn::default()).unwrap();
        assert!(own.summary(&KubeOptIn::default()).contains("(yours)"));
        // An auth-provider's command is a plugin too; another user's plugin is not handed on.
        let p = write_kc(
            dir.path(),
            "- name: u\n  user:\n    auth-provider:\n      name: gcp\n      config:\n        cmd-path: /usr/bin/gcloud\n        cmd-args: config config-helper --format=json\n- name: v\n  user:\n    token: t\n    exec:\n      command: evil\n",
        );
        let k = load_kubeconfig(&p, false, "team").unwrap();
        assert_eq!(k.plugins[0].kind, "auth-provider gcp");
        assert_eq!(
            k.plugins[0].shown(),
            "/usr/bin/gcloud config config-helper --format=json"
        );
        let k = load_kubeconfig(&p, false, "other").unwrap();
        assert_eq!(k.plugins[0].command, "evil");
        assert_eq!(k.config.auth_infos.len(), 1);
        assert_eq!(k.config.auth_infos[0].name, "v");
        let e = load_kubeconfig(&p, false, "nope").unwrap_err();
        assert!(
            e.message.ends_with("no context `nope` (it has `team`, `other`)"),
            "{e}"
        );
    }

    /// Hostile review 3, H2: a kubeconfig a fleet file names reads no file outside its
    /// folder (a token file it would send as the bearer token, a client key, a CA)
    /// unless the operator's own config lists it; a link out of the folder is outside.
    #[test]
    fn a_kubeconfig_the_fleet_file_names_reads_no_file_outside_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let secrets = tempfile::tempdir().unwrap();
        let token = secrets.path().join("token");
        std::fs::write(&token, "hf_OPERATOR_SECRET").unwrap();
        let token = std::fs::canonicalize(&token).unwrap();
        let user = |file: &str| format!("- name: u\n  user:\n    tokenFile: {file}\n");
        let p = write_kc(dir.path(), &user(&token.display().to_string()));
        let k = load_kubeconfig(&p, false, "team").unwrap();
        assert_eq!(k.files.len(), 1);
        let e = k.permit(&KubeOptIn::default()).unwrap_err();
        assert!(
            e.contains(&format!("its tokenFile is {}, outside the kubeconfig's folder; kube-rs reads it and sends it to the server as your bearer token", token.display())),
            "{e}"
        );
        assert!(e.contains("`gke: {allow_kubeconfig_files: ["), "{e}");
        let summary = k.summary(&KubeOptIn::default());
        assert!(
            summary.contains("no credential plugin (nothing is run); reads tokenFile"),
            "{summary}"
        );
        assert!(summary.ends_with("(refused: outside its folder, and your config's gke.allow_kubeconfig_files does not list it)"), "{summary}");
        let allowed = KubeOptIn {
            lines: vec![],
            files: vec![token.display().to_string()],
        };
        k.permit(&allowed).unwrap();
        assert!(k
            .summary(&allowed)
            .ends_with("(outside its folder: allowed by your config's gke.allow_kubeconfig_files)"));
        // The operator's own kubeconfig reads what it names, as kubectl does.
        load_kubeconfig(&p, true, "team")
            .unwrap()
            .permit(&KubeOptIn::default())
            .unwrap();
        // A link in the folder to a file outside is outside.
        std::os::unix::fs::symlink(&token, dir.path().join("token-link")).unwrap();
        let p = write_kc(dir.path(), &user("token-link"));
        let k = load_kubeconfig(&p, false, "team").unwrap();
        assert!(k.permit(&KubeOptIn::default()).is_err());
        // A file of its own folder is its own: a client certificate and key beside it.
        std::fs::write(dir.path().join("cert.pem"), "x").unwrap();
        let p = write_kc(
            dir.path(),
            "- name: u\n  user:\n    client-certificate: cert.pem\n    client-key: ./cert.pem\n",
        );
        let k = load_kubeconfig(&p, false, "team").unwrap();
        assert_eq!(
            k.files.iter().map(|f| (f.field, f.inside)).collect::<Vec<_>>(),
            [("client-certificate", true), ("client-key", true)]
        );
        k.permit(&KubeOptIn::default()).unwrap();
        // A CA outside its folder is refused too.
        let p = dir.path().join("kubeconfig");
        std::fs::write(
            &p,
            KC.replace(
                "    server: http://127.0.0.1:9\n",
                &format!(
                    "    server: http://127.0.0.1:9\n    certificate-authority: {}\n",
                    token.display()
                ),
            ),
        )
        .unwrap();
        let k = load_kubeconfig(&p, false, "team").unwrap();
        assert!(k
            .permit(&KubeOptIn::default())
            .unwrap_err()
            .contains("its certificate-authority is"));
    }

    #[test]
    fn a_kubeconfig_kube_rs_would_panic_on_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let p = dir.path().join("kubeconfig");
        let found = include_bytes!("../../../tests/fixtures/fuzz/kubeconfig-utf16-odd-length.bin");
        std::fs::write(&p, found).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = load_kubeconfig(&p, false, "fuzz").expect_err("refused");
        assert!(e.to_string().contains("odd number of bytes"), "{e}");
        std::fs::write(&p, vec![b'#'; (MAX_KUBECONFIG + 1) as usize]).unwrap();
        let e = load_kubeconfig(&p, false, "fuzz").expect_err("refused");
        assert!(e.to_string().contains("larger than 1024 KiB"), "{e}");
    }

    /// Gke review L4: `$KUBECONFIG`'s files are merged as kubectl merges them: a context
    /// in the second file, its cluster in the first, a missing file skipped, the first
    /// file's entry winning where both name one.
    #[test]
    fn a_kubeconfig_list_is_merged_as_kubectl_merges_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let first = write_kc(dir.path(), "- name: u\n  user:\n    token: first\n");
        let second = dir.path().join("second");
        std::fs::write(
            &second,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:10\n- name: d\n  cluster:\n    server: http://127.0.0.1:11\ncontexts:\n- name: team\n  context:\n    cluster: d\n    user: u\n- name: gke_p_l_c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user:\n    username: second\n",
        )
        .unwrap();
        std::fs::set_permissions(&second, std::fs::Permissions::from_mode(0o600)).unwrap();
        let paths = [first.clone(), dir.path().join("missing"), second.clone()];
        // Only in the second file: found there, with the first file's cluster `c` and user.
        let k = load_kubeconfigs(&paths, "gke_p_l_c").unwrap();
        assert_eq!(k.path, std::fs::canonicalize(&second).unwrap());
        assert_eq!(
            k.config.clusters[0].cluster.as_ref().unwrap().server.as_deref(),
            Some("http://127.0.0.1:9")
        );
        // The first file's user `u` (a token), not the second's (a username).
        let first_user = |k: &KubeconfigFile| {
            let a = k.config.auth_infos[0].auth_info.as_ref().unwrap();
            a.token.is_some() && a.username.is_none()
        };
        assert!(first_user(&k));
        // In both: the first file's context (cluster `c`, not the second's `d`).
        let k = load_kubeconfigs(&paths, "team").unwrap();
        assert_eq!(k.config.clusters[0].name, "c");
        let e = load_kubeconfigs(&paths, "nowhere").unwrap_err();
        assert!(e.message.contains("no context `nowhere`"), "{e}");
        let e = load_kubeconfigs(&[dir.path().join("a"), dir.path().join("b")], "team").unwrap_err();
        assert!(
            e.missing && e.message.contains("none of $KUBECONFIG's files exists"),
            "{e}"
        );
    }

    #[test]
    fn a_kubeconfig_others_could_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = write_kc(dir.path(), "- name: u\n  user:\n    token: t\n");
        load_kubeconfig(&p, false, "team").unwrap();
        let mode =
            |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
        let shown = p.display().to_string();
        for (m, who) in [(0o620, "group"), (0o602, "others"), (0o666, "group and others")] {
            mode(&p, m);
            let e = load_kubeconfig(&p, false, "team").unwrap_err();
            assert_eq!(
                e.message,
                format!("Bad owner or permissions on {shown}: writable by {who} (mode {m:04o}): `chmod go-w {shown}`")
            );
            assert!(!e.missing);
        }
        mode(&p, 0o644);
        load_kubeconfig(&p, false, "team").unwrap();
        // A folder above it that others may write (without the sticky bit /tmp has).
        mode(dir.path(), 0o777);
        let e = load_kubeconfig(&p, false, "team").unwrap_err();
        assert!(
            e.message.starts_with(&format!(
                "Bad owner or permissions on {}, a folder above the kubeconfig {shown}: writable by group and others (mode 0777)",
                dir.path().display()
            )),
            "{e}"
        );
        mode(dir.path(), 0o1777);
        load_kubeconfig(&p, false, "team").unwrap();
        mode(dir.path(), 0o700);
        // Another user's file (root may make one).
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&p, Some(65534), None).unwrap();
            let e = load_kubeconfig(&p, false, "team").unwrap_err();
            assert_eq!(
                e.message,
                format!(
                    "Bad owner or permissions on {shown}: owned by uid 65534, not by you (uid 0) or root"
                )
            );
        }
        let e = load_kubeconfig(&dir.path().join("gone"), false, "team").unwrap_err();
        assert!(e.missing);
    }

    #[test]
    fn the_kubeconfig_path_is_the_fleet_files_never_the_current_folders() {
        let f = Path::new("/srv/repo/fleets/gke.yaml");
        assert_eq!(
            resolve_kubeconfig(f, "kubeconfig"),
            Path::new("/srv/repo/fleets/kubeconfig")
        );
        assert_eq!(resolve_kubeconfig(f, "/etc/kc"), Path::new("/etc/kc"));
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(resolve_kubeconfig(Path::new("gke.yaml"), "kc"), cwd.join("kc"));
        // A relative path recorded by an older flightdeck is refused, not resolved here.
        let r = ClusterRef {
            kubeconfig: Some("kubeconfig".into()),
            context: Some("team".into()),
            project: None,
            location: None,
            cluster: None,
        };
        let e = r.kubeconfig_file().unwrap_err();
        assert!(e.message.contains("recorded as a relative path"), "{e}");
        // The state records no opt-in: an old record's is not read.
        let json = serde_json::to_string(&r).unwrap();
        assert!(!json.contains("allow_exec_plugin"), "{json}");
        let old = r#"{"kubeconfig":"/k","context":"team","allow_exec_plugin":true}"#;
        assert_eq!(
            serde_json::from_str::<ClusterRef>(old)
                .unwrap()
                .kubeconfig
                .as_deref(),
            Some("/k")
        );
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
