//! Connections: TCP (or a direct-tcpip channel through a bastion connection), host key
//! verification against known_hosts, and authentication with the ssh-agent's keys, then
//! key files (ed25519, RSA, ECDSA; an encrypted key asks for its passphrase).

use super::config::Strict;
use super::known_hosts::{self, HostKeyPolicy, Verdict};
use russh::client::{self, Handle};
use russh::keys::{PrivateKeyWithHashAlg, PublicKey, PublicKeyOrCertificate};
use russh::{ChannelMsg, Disconnect};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where and as whom to connect, fully resolved (fleet file + ssh_config + defaults).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Target {
    /// Address to connect to, also the name checked in known_hosts.
    pub host: String,
    pub port: u16,
    pub user: String,
    /// Key files to try, in order, after the agent's keys.
    pub identity_files: Vec<PathBuf>,
    /// Whether `identity_files` were named explicitly (a missing one is then reported).
    pub explicit_identities: bool,
    /// `IdentitiesOnly yes`: skip agent keys not in `identity_files`.
    pub identities_only: bool,
    pub keepalive: Option<Duration>,
    pub keepalive_max: usize,
    pub connect_timeout: Duration,
    /// This host's UserKnownHostsFile files, expanded, when the ssh config names them
    /// (`Some(vec![])` for `none`); `None`: the session's files ([`SshOptions::known_hosts`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_known_hosts: Option<Vec<PathBuf>>,
    /// This host's GlobalKnownHostsFile files: read, never written.
    #[serde(default = "default_global_known_hosts")]
    pub global_known_hosts: Vec<PathBuf>,
    /// This host's StrictHostKeyChecking, when the ssh config sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<Strict>,
    /// HostKeyAlias: the name looked up and recorded in known_hosts instead of the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_key_alias: Option<String>,
    /// Why the ssh config may not be used (a file others may write): not connected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_refusal: Option<String>,
    /// HashKnownHosts: a new key is recorded under a hashed name (`|1|salt|hash`), as
    /// ssh records it, so known_hosts does not list the fleet's hosts in clear.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hash_known_hosts: bool,
}

/// OpenSSH's GlobalKnownHostsFile default.
pub fn default_global_known_hosts() -> Vec<PathBuf> {
    super::config::DEFAULT_GLOBAL_KNOWN_HOSTS
        .iter()
        .map(PathBuf::from)
        .collect()
}

impl Target {
    /// A target with OpenSSH's defaults for everything the config could add.
    pub fn new(host: &str, port: u16, user: &str) -> Target {
        Target {
            host: host.into(),
            port,
            user: user.into(),
            identity_files: vec![],
            explicit_identities: false,
            identities_only: false,
            keepalive: None,
            keepalive_max: 3,
            connect_timeout: Duration::from_secs(15),
            user_known_hosts: None,
            global_known_hosts: default_global_known_hosts(),
            strict: None,
            host_key_alias: None,
            config_refusal: None,
            hash_known_hosts: false,
        }
    }

    pub fn label(&self) -> String {
        if self.port == 22 {
            format!("{}@{}", self.user, self.host)
        } else {
            format!("{}@{}:{}", self.user, self.host, self.port)
        }
    }

    /// The name known_hosts records this host under: its HostKeyAlias, else `host` or
    /// `[host]:port`.
    pub fn known_hosts_name(&self) -> String {
        match &self.host_key_alias {
            Some(a) => a.clone(),
            None => known_hosts::host_entry(&self.host, self.port),
        }
    }

    /// The user files (first one written), then the global ones, under `opts`.
    pub fn known_hosts_files(&self, opts: &SshOptions) -> (Vec<PathBuf>, Vec<PathBuf>) {
        (
            self.user_known_hosts
                .clone()
                .unwrap_or_else(|| opts.known_hosts.clone()),
            self.global_known_hosts.clone(),
        )
    }
}

/// Answers questions only the operator can: an unknown host key, a key passphrase.
pub trait Prompter: Send + Sync {
    /// Accept (and remember) the unknown key of `host`?
    fn confirm_host_key<'a>(&'a self, host: &'a str, fingerprint: &'a str) -> BoxFuture<'a, bool>;
    /// The passphrase of an encrypted key file, or `None` to skip the key.
    fn passphrase<'a>(&'a self, key: &'a std::path::Path) -> BoxFuture<'a, Option<String>>;
}

/// A prompter for when nobody can answer: unknown hosts and encrypted keys are refused.
pub struct NoPrompt;

impl Prompter for NoPrompt {
    fn confirm_host_key<'a>(&'a self, _: &'a str, _: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async { false })
    }
    fn passphrase<'a>(&'a self, _: &'a std::path::Path) -> BoxFuture<'a, Option<String>> {
        Box::pin(async { None })
    }
}

/// Settings shared by every connection of a session.
#[derive(Clone)]
pub struct SshOptions {
    /// known_hosts files; new keys are written to the first.
    pub known_hosts: Vec<PathBuf>,
    pub policy: HostKeyPolicy,
    pub prompter: Arc<dyn Prompter>,
    /// Use the ssh-agent at `SSH_AUTH_SOCK` when there is one.
    pub use_agent: bool,
    /// The agent's socket when not `SSH_AUTH_SOCK`'s (a holder uses its client's).
    pub agent_socket: Option<PathBuf>,
    /// Encrypted keys decrypted in this run (a passphrase is asked once, not per node).
    pub keys: KeyCache,
}

impl SshOptions {
    /// The ssh-agent socket to use, if any.
    pub fn agent_path(&self) -> Option<PathBuf> {
        if !self.use_agent {
            return None;
        }
        self.agent_socket.clone().or_else(|| {
            std::env::var_os("SSH_AUTH_SOCK")
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
        })
    }
}

/// Keys decrypted so far, by file; `None` where the operator gave no passphrase.
#[derive(Clone, Default)]
pub struct KeyCache(
    Arc<tokio::sync::Mutex<std::collections::HashMap<PathBuf, Option<russh::keys::PrivateKey>>>>,
);

/// Why a key file is not used, OpenSSH-style: a private key others may read.
pub fn unprotected(path: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = std::fs::metadata(path).ok()?;
    let mode = meta.permissions().mode() & 0o777;
    // SAFETY: getuid has no preconditions.
    let mine = meta.uid() == unsafe { libc::getuid() };
    (mine && mode & 0o077 != 0).then(|| {
        format!(
            "UNPROTECTED PRIVATE KEY FILE: permissions {mode:04o} let others read it, so it is not used; `chmod 600 {}`",
            path.display()
        )
    })
}

/// `` or ` (each of 3 attempts; 45s in all)`.
fn tries(attempts: u32, total: Duration) -> String {
    if attempts > 1 {
        format!(" (each of {attempts} attempts; {}s in all)", total.as_secs())
    } else {
        String::new()
    }
}

fn unknown_key(target: &str, fingerprint: &str, strict: bool) -> String {
    if strict {
        format!("{target}: no host key is known for it (it offers {fingerprint}) and StrictHostKeyChecking is yes for it: Host key verification failed (record its key in known_hosts first)")
    } else {
        format!("{target}: unknown host key {fingerprint}; not accepted (accept it when asked, or pass --accept-new-host-keys)")
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum SshError {
    #[error("{target}: cannot connect: {reason}")]
    Connect { target: String, reason: String },
    #[error("{target}: connection timed out after {after:?}{}", tries(*attempts, *total))]
    Timeout {
        target: String,
        /// How long one attempt waited.
        after: Duration,
        /// How many attempts were made, and how long they took together.
        attempts: u32,
        total: Duration,
    },
    #[error("{target}: HOST KEY CHANGED: the server offers {offered}, but {file}:{line} records {known} for it. It may be a reinstalled machine, or someone in the middle. Refusing to connect; if the change is expected, remove that line.")]
    HostKeyChanged {
        target: String,
        offered: String,
        known: String,
        file: String,
        line: usize,
    },
    #[error("{target}: host key {fingerprint} is revoked in {file}:{line}")]
    HostKeyRevoked {
        target: String,
        fingerprint: String,
        file: String,
        line: usize,
    },
    #[error("{}", unknown_key(target, fingerprint, *strict))]
    HostKeyUnknown {
        target: String,
        fingerprint: String,
        /// Refused by `StrictHostKeyChecking yes` (no question, no flag accepts it).
        strict: bool,
    },
    #[error("{target}: authentication failed; tried {}", if tried.is_empty() { "no keys (none found: set identity_file, or load a key into ssh-agent)".to_string() } else { tried.join(", ") })]
    Auth { target: String, tried: Vec<String> },
    #[error("{target}: {what}: {reason}")]
    Channel {
        target: String,
        what: String,
        reason: String,
    },
    /// What the connection holder met connecting for this process (its words).
    #[error("{reason}")]
    Holder { target: String, reason: String },
    /// The connection holder went after the request, so the command may have started on
    /// the node (its words): the node was not shown unreachable.
    #[error("{reason}")]
    HolderLost { target: String, reason: String },
    #[error("{target}: through {via}: {reason}")]
    Jump {
        target: String,
        via: String,
        reason: String,
    },
}

/// Check `key`, offered by `t`, as OpenSSH would with `t`'s known_hosts files and
/// StrictHostKeyChecking: known in a user or global file, go on; changed or revoked,
/// refused; unknown, the policy decides ([`known_hosts::effective`]), and an accepted key
/// is recorded in the first user file only.
pub async fn check_host_key(t: &Target, opts: &SshOptions, key: &PublicKey) -> Result<(), SshError> {
    let label = t.label();
    if let Some(why) = &t.config_refusal {
        return Err(SshError::Connect {
            target: label,
            reason: why.clone(),
        });
    }
    let fp = known_hosts::fingerprint(key);
    let (user, global) = t.known_hosts_files(opts);
    let files: Vec<PathBuf> = user.iter().chain(global.iter()).cloned().collect();
    let name = t.known_hosts_name();
    match known_hosts::check_name(&files, &name, key) {
        Verdict::Known => Ok(()),
        Verdict::Changed {
            file,
            line,
            known_fingerprint,
        } => Err(SshError::HostKeyChanged {
            target: label,
            offered: format!("{} {fp}", key.algorithm()),
            known: known_fingerprint,
            file: file.display().to_string(),
            line,
        }),
        Verdict::Revoked { file, line } => Err(SshError::HostKeyRevoked {
            target: label,
            fingerprint: fp,
            file: file.display().to_string(),
            line,
        }),
        Verdict::Unknown => {
            let policy = known_hosts::effective(t.strict, opts.policy);
            let accept = match policy {
                HostKeyPolicy::AcceptNew => true,
                HostKeyPolicy::Refuse => false,
                HostKeyPolicy::Ask => opts.prompter.confirm_host_key(&label, &fp).await,
            };
            if !accept {
                return Err(SshError::HostKeyUnknown {
                    target: label,
                    fingerprint: fp,
                    strict: t.strict == Some(Strict::Yes),
                });
            }
            match user.first() {
                Some(file) => match known_hosts::learn_name(file, &name, key, t.hash_known_hosts) {
                    Err(e) => {
                        tracing::warn!("cannot record the host key of {label} in {}: {e}", file.display())
                    }
                    Ok(()) => tracing::info!("recorded host key {fp} of {label} in {}", file.display()),
                },
                None => tracing::info!(
                    "host key {fp} of {label} accepted, not recorded (UserKnownHostsFile none)"
                ),
            }
            Ok(())
        }
    }
}

/// The russh event handler: verifies the host key and remembers why it refused one.
struct Client {
    target: Target,
    opts: SshOptions,
    refusal: Arc<Mutex<Option<SshError>>>,
    /// The key the server offered, kept with the connection for later checks.
    offered: Arc<Mutex<Option<PublicKey>>>,
}

impl Client {
    fn refuse(&self, e: SshError) -> bool {
        *self.refusal.lock().expect("refusal lock") = Some(e);
        false
    }

    async fn verify(&self, key: &PublicKey) -> bool {
        *self.offered.lock().expect("offered lock") = Some(key.clone());
        match check_host_key(&self.target, &self.opts, key).await {
            Ok(()) => true,
            Err(e) => self.refuse(e),
        }
    }
}

impl client::Handler for Client {
    type Error = russh::Error;

    async fn check_server_key(&mut self, key: &PublicKeyOrCertificate) -> Result<bool, Self::Error> {
        match key {
            PublicKeyOrCertificate::PublicKey { key, .. } => Ok(self.verify(key).await),
            PublicKeyOrCertificate::Certificate(_) => Ok(self.refuse(SshError::Connect {
                target: self.target.label(),
                reason: "the server presents a host certificate; flightdeck verifies plain host keys only"
                    .into(),
            })),
        }
    }
}

/// One authenticated SSH connection; channels (exec, shells, tunnels) multiplex over it.
pub struct Connection {
    handle: Handle<Client>,
    pub target: Target,
    /// The bastion connection this one runs through, kept alive as long as this one.
    pub via: Option<Arc<Connection>>,
    /// When it was made.
    pub since: std::time::Instant,
    /// The host key the server proved it holds, checked again whenever another client's
    /// known_hosts and policy are to accept this connection (a holder's reuse).
    pub host_key: Option<PublicKey>,
}

/// Ciphers in order of preference: AES-GCM first (hardware AES on the x86 and Arm
/// machines flightdeck runs on), then russh's defaults.
const CIPHERS: &[russh::cipher::Name] = &[
    russh::cipher::AES_256_GCM,
    russh::cipher::CHACHA20_POLY1305,
    russh::cipher::AES_256_CTR,
    russh::cipher::AES_192_CTR,
    russh::cipher::AES_128_CTR,
];

fn config(t: &Target) -> Arc<client::Config> {
    Arc::new(client::Config {
        keepalive_interval: t.keepalive,
        keepalive_max: t.keepalive_max,
        nodelay: true,
        // Bulk output (a 200 MB cat, nccl-tests logs) wants a wide window.
        window_size: 16 * 1024 * 1024,
        maximum_packet_size: 65535,
        preferred: russh::Preferred {
            cipher: std::borrow::Cow::Borrowed(CIPHERS),
            ..Default::default()
        },
        ..Default::default()
    })
}

impl Connection {
    /// Connect directly over TCP.
    pub async fn connect(target: &Target, opts: &SshOptions) -> Result<Connection, SshError> {
        Self::open(target, opts, None).await
    }

    /// Connect through `via` (a bastion): a direct-tcpip channel to the target's address.
    pub async fn connect_via(
        target: &Target,
        opts: &SshOptions,
        via: Arc<Connection>,
    ) -> Result<Connection, SshError> {
        Self::open(target, opts, Some(via)).await
    }

    async fn open(
        target: &Target,
        opts: &SshOptions,
        via: Option<Arc<Connection>>,
    ) -> Result<Connection, SshError> {
        let label = target.label();
        if let Some(why) = &target.config_refusal {
            return Err(SshError::Connect {
                target: label,
                reason: why.clone(),
            });
        }
        let refusal = Arc::new(Mutex::new(None));
        let offered = Arc::new(Mutex::new(None));
        let handler = Client {
            target: target.clone(),
            opts: opts.clone(),
            refusal: refusal.clone(),
            offered: offered.clone(),
        };
        let attempt = async {
            match &via {
                None => client::connect(config(target), (target.host.as_str(), target.port), handler).await,
                Some(bastion) => {
                    let ch = bastion
                        .handle
                        .channel_open_direct_tcpip(
                            target.host.clone(),
                            u32::from(target.port),
                            "127.0.0.1",
                            0,
                        )
                        .await;
                    match ch {
                        Ok(ch) => client::connect_stream(config(target), ch.into_stream(), handler).await,
                        Err(e) => Err(e),
                    }
                }
            }
        };
        let handle = match tokio::time::timeout(target.connect_timeout, attempt).await {
            Err(_) => {
                return Err(SshError::Timeout {
                    target: label,
                    after: target.connect_timeout,
                    attempts: 1,
                    total: target.connect_timeout,
                })
            }
            Ok(Err(e)) => {
                if let Some(refused) = refusal.lock().expect("refusal lock").take() {
                    return Err(refused);
                }
                let reason = e.to_string();
                return Err(match &via {
                    Some(b) => SshError::Jump {
                        target: label,
                        via: b.target.label(),
                        reason,
                    },
                    None => SshError::Connect {
                        target: label,
                        reason,
                    },
                });
            }
            Ok(Ok(h)) => h,
        };
        let mut conn = Connection {
            handle,
            target: target.clone(),
            via,
            since: std::time::Instant::now(),
            host_key: offered.lock().expect("offered lock").take(),
        };
        conn.authenticate(opts).await?;
        Ok(conn)
    }

    async fn authenticate(&mut self, opts: &SshOptions) -> Result<(), SshError> {
        let label = self.target.label();
        let user = self.target.user.clone();
        let mut tried = vec![];
        let auth_err = |e: russh::Error| SshError::Connect {
            target: label.clone(),
            reason: format!("during authentication: {e}"),
        };
        // Key files first when named explicitly; agent keys first otherwise (as ssh does).
        let mut file_keys: Vec<(PathBuf, russh::keys::PrivateKey)> = vec![];
        for path in &self.target.identity_files {
            if let Some(why) = unprotected(path) {
                tried.push(format!("{} ({why})", path.display()));
                continue;
            }
            match russh::keys::load_secret_key(path, None) {
                Ok(k) => file_keys.push((path.clone(), k)),
                Err(russh::keys::Error::KeyIsEncrypted) => {
                    // One question per key file and run: the first connection asks, the
                    // others wait for its answer.
                    let mut cache = opts.keys.0.lock().await;
                    if !cache.contains_key(path) {
                        let key = match opts.prompter.passphrase(path).await {
                            Some(pass) => match russh::keys::load_secret_key(path, Some(&pass)) {
                                Ok(k) => Some(k),
                                Err(e) => {
                                    tried.push(format!("{} (cannot decrypt: {e})", path.display()));
                                    continue;
                                }
                            },
                            None => None,
                        };
                        cache.insert(path.clone(), key);
                    }
                    match cache.get(path).cloned().flatten() {
                        Some(k) => file_keys.push((path.clone(), k)),
                        None => tried.push(format!("{} (encrypted; no passphrase given)", path.display())),
                    }
                }
                Err(e) => {
                    let missing =
                        matches!(&e, russh::keys::Error::IO(io) if io.kind() == std::io::ErrorKind::NotFound);
                    if !missing || self.target.explicit_identities {
                        tried.push(format!(
                            "{} ({})",
                            path.display(),
                            if missing {
                                "missing".to_string()
                            } else {
                                e.to_string()
                            }
                        ));
                    }
                }
            }
        }
        let file_publics: Vec<PublicKey> = file_keys.iter().map(|(_, k)| k.public_key().clone()).collect();
        if let Some(sock) = opts.agent_path() {
            if let Ok(mut agent) = russh::keys::agent::client::AgentClient::connect_uds(&sock).await {
                let identities = agent.request_identities().await.unwrap_or_default();
                for id in identities {
                    let russh::keys::agent::AgentIdentity::PublicKey { key, comment } = id else {
                        continue;
                    };
                    if self.target.identities_only && !file_publics.contains(&key) {
                        continue;
                    }
                    let hash = self
                        .handle
                        .best_supported_rsa_hash()
                        .await
                        .map_err(auth_err)?
                        .flatten();
                    match self
                        .handle
                        .authenticate_publickey_with(user.clone(), key, hash, &mut agent)
                        .await
                    {
                        Ok(r) if r.success() => return Ok(()),
                        _ => tried.push(format!("agent key {comment}")),
                    }
                }
            }
        }
        for (path, key) in file_keys {
            let hash = self
                .handle
                .best_supported_rsa_hash()
                .await
                .map_err(auth_err)?
                .flatten();
            let r = self
                .handle
                .authenticate_publickey(user.clone(), PrivateKeyWithHashAlg::new(Arc::new(key), hash))
                .await
                .map_err(auth_err)?;
            if r.success() {
                return Ok(());
            }
            tried.push(path.display().to_string());
        }
        Err(SshError::Auth { target: label, tried })
    }

    pub fn is_closed(&self) -> bool {
        self.handle.is_closed() || self.via.as_ref().is_some_and(|v| v.is_closed())
    }

    /// Open a session channel and run `command` in it.
    pub async fn exec(&self, command: &str) -> Result<russh::Channel<client::Msg>, SshError> {
        let ch = self.session_channel().await?;
        ch.exec(true, command)
            .await
            .map_err(|e| self.channel_error("exec", e))?;
        Ok(ch)
    }

    /// Open a session channel with a PTY of `cols` x `rows` and a login shell in it.
    pub async fn shell(
        &self,
        term: &str,
        cols: u16,
        rows: u16,
    ) -> Result<russh::Channel<client::Msg>, SshError> {
        let ch = self.session_channel().await?;
        ch.request_pty(true, term, u32::from(cols), u32::from(rows), 0, 0, &[])
            .await
            .map_err(|e| self.channel_error("pty", e))?;
        ch.request_shell(true)
            .await
            .map_err(|e| self.channel_error("shell", e))?;
        Ok(ch)
    }

    async fn session_channel(&self) -> Result<russh::Channel<client::Msg>, SshError> {
        self.handle
            .channel_open_session()
            .await
            .map_err(|e| self.channel_error("open a session channel", e))
    }

    fn channel_error(&self, what: &str, e: russh::Error) -> SshError {
        SshError::Channel {
            target: self.target.label(),
            what: what.into(),
            reason: e.to_string(),
        }
    }

    pub async fn disconnect(&self) {
        let _ = self.handle.disconnect(Disconnect::ByApplication, "", "en").await;
    }
}

/// The result of running one command to completion.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Finished {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The exit status; 128+N for a signal N, as a shell reports it.
    pub status: Option<u32>,
}

/// Read a channel to its end, handing each stdout/stderr chunk to `on_data(is_stderr, bytes)`.
/// Returns the exit status (`None` if the server sent none).
pub async fn drain(
    ch: &mut russh::Channel<client::Msg>,
    mut on_data: impl FnMut(bool, &[u8]),
) -> Option<u32> {
    let mut status = None;
    while let Some(msg) = ch.wait().await {
        match msg {
            ChannelMsg::Data { data } => on_data(false, &data),
            ChannelMsg::ExtendedData { data, ext: 1 } => on_data(true, &data),
            ChannelMsg::ExitStatus { exit_status } => status = Some(exit_status),
            ChannelMsg::ExitSignal { signal_name, .. } => status = Some(128 + signal_number(&signal_name)),
            _ => {}
        }
    }
    status
}

/// The number of a signal as a shell reports it (128+N on exit).
pub fn signal_number(sig: &russh::Sig) -> u32 {
    use russh::Sig::*;
    match sig {
        HUP => 1,
        INT => 2,
        QUIT => 3,
        ILL => 4,
        ABRT => 6,
        FPE => 8,
        KILL => 9,
        SEGV => 11,
        PIPE => 13,
        ALRM => 14,
        TERM => 15,
        USR1 => 10,
        Custom(_) => 0,
    }
}
