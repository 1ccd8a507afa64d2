//! From fleet nodes to live connections: resolve each node against ~/.ssh/config and the
//! fleet file (the fleet file wins), then connect every node at once, each jump host
//! (bastion) exactly once with every node's channel multiplexed over it.

use super::client::{Connection, SshError, SshOptions, Target};
use super::config::{expand_path, expand_tokens, HostSettings, Jump, Query, SshConfig, Tokens};
use crate::fleet::{JumpTarget, SshAddress};
use crate::node::Channel;
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::{Mutex, OnceCell};

pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
pub const DEFAULT_KEEPALIVE: Duration = Duration::from_secs(15);

/// Resolves host names to connection targets using ~/.ssh/config.
#[derive(Debug, Clone)]
pub struct Resolver {
    pub config: SshConfig,
    pub home: PathBuf,
    pub local_user: String,
}

/// A node's target and the chain of jump hosts before it (first hop first).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Route {
    pub jumps: Vec<Target>,
    pub target: Box<Target>,
}

impl Resolver {
    /// Read `~/.ssh/config` from `home`, then `/etc/ssh/ssh_config`, as ssh does (their
    /// includes followed).
    pub fn new(home: &Path) -> Resolver {
        let config = SshConfig::load_files(
            home,
            Some(&home.join(".ssh/config")),
            Some(Path::new(super::config::SYSTEM_CONFIG)),
        );
        Resolver::with_config(config, home)
    }

    /// A resolver of `config` (made by the caller) for the login whose home is `home`.
    pub fn with_config(config: SshConfig, home: &Path) -> Resolver {
        for w in &config.warnings {
            tracing::warn!("ssh config: {w}");
        }
        if let Some(r) = &config.refusal {
            tracing::warn!("ssh config: {r}");
        }
        Resolver {
            config,
            home: home.to_path_buf(),
            local_user: super::config::local_user_name(),
        }
    }

    pub fn from_env() -> Resolver {
        let home = crate::paths::home_dir().unwrap_or_else(|| PathBuf::from("/"));
        Resolver::new(&home)
    }

    /// The user known_hosts files for `host`: its UserKnownHostsFile, else OpenSSH's
    /// default `~/.ssh/known_hosts ~/.ssh/known_hosts2`. New keys go to the first.
    pub fn known_hosts(&self, host: &str) -> Vec<PathBuf> {
        let t = self.target(host, None, None, None);
        t.user_known_hosts.unwrap_or_else(|| {
            super::config::DEFAULT_USER_KNOWN_HOSTS
                .iter()
                .map(|p| expand_path(p, &self.home, &self.local_user, host, ""))
                .collect()
        })
    }

    fn settings(&self, host: &str, user: Option<&str>) -> HostSettings {
        self.config.resolve_for(&Query {
            host,
            user,
            local_user: &self.local_user,
            home: &self.home,
        })
    }

    /// Resolve one host: explicit values first, then ssh_config, then defaults; its
    /// known_hosts files, StrictHostKeyChecking and HostKeyAlias as `ssh -G` gives them.
    pub fn target(
        &self,
        host: &str,
        port: Option<u16>,
        user: Option<&str>,
        identity: Option<&str>,
    ) -> Target {
        let s = self.settings(host, user);
        let address = s.hostname.clone().unwrap_or_else(|| host.to_string());
        let user = user
            .map(str::to_string)
            .or(s.user.clone())
            .unwrap_or_else(|| self.local_user.clone());
        let port = port.or(s.port).unwrap_or(22);
        let tokens = Tokens {
            home: &self.home,
            local_user: &self.local_user,
            host: &address,
            original_host: host,
            remote_user: &user,
            port,
            key_alias: s.host_key_alias.as_deref().unwrap_or(host),
        };
        let expand = |p: &str| expand_tokens(p, &tokens);
        let (identity_files, explicit) = match identity {
            Some(i) => (vec![expand(i)], true),
            None if !s.identity_files.is_empty() => (
                s.identity_files
                    .iter()
                    .map(|p| expand(&p.to_string_lossy()))
                    .collect(),
                true,
            ),
            None => (
                ["id_ed25519", "id_ecdsa", "id_rsa"]
                    .iter()
                    .map(|f| self.home.join(".ssh").join(f))
                    .collect(),
                false,
            ),
        };
        let none = |files: &[PathBuf]| files.len() == 1 && files[0] == Path::new("none");
        let user_known_hosts = match &s.user_known_hosts_files {
            f if f.is_empty() => None,
            f if none(f) => Some(vec![]),
            f => Some(f.iter().map(|p| expand(&p.to_string_lossy())).collect()),
        };
        // OpenSSH expands `~` in GlobalKnownHostsFile (ssh.c, `tilde_expand_filename` of
        // the system host files) and nothing else. A relative path would be read from
        // whatever folder flightdeck runs in, where another user may plant a file: it is
        // refused, as a file others may write is.
        let global_known_hosts: Vec<PathBuf> = match &s.global_known_hosts_files {
            None => super::client::default_global_known_hosts(),
            Some(f) if none(f) => vec![],
            Some(f) => f.iter().map(|p| tilde(p, &self.home)).collect(),
        };
        // `${VAR}` of an unset variable: OpenSSH refuses the expansion; so does flightdeck
        // (fail closed), naming the setting and the variable.
        let unset = identity
            .map(|i| ("IdentityFile", i.to_string()))
            .into_iter()
            .chain(
                s.identity_files
                    .iter()
                    .map(|p| ("IdentityFile", p.to_string_lossy().into_owned())),
            )
            .chain(
                s.user_known_hosts_files
                    .iter()
                    .map(|p| ("UserKnownHostsFile", p.to_string_lossy().into_owned())),
            )
            .find_map(|(k, v)| {
                super::config::unset_env_var(&v).map(|var| {
                    format!("{k} {v}: env var ${{{var}}} has no value (ssh refuses the expansion); set it or change the ssh config")
                })
            });
        let relative_global = global_known_hosts.iter().find(|p| p.is_relative()).map(|p| {
            format!(
                "GlobalKnownHostsFile {} is a relative path: it would be read from the current folder, which others may write; name it absolute (or under ~/)",
                p.display()
            )
        });
        let keepalive = s
            .server_alive_interval
            .map(Duration::from_secs)
            .or(Some(DEFAULT_KEEPALIVE))
            .filter(|d| !d.is_zero());
        Target {
            host: address,
            port,
            user,
            identity_files,
            explicit_identities: explicit,
            identities_only: s.identities_only,
            keepalive,
            keepalive_max: s.server_alive_count_max.unwrap_or(3) as usize,
            connect_timeout: s
                .connect_timeout
                .map(Duration::from_secs)
                .unwrap_or(DEFAULT_CONNECT_TIMEOUT),
            user_known_hosts,
            global_known_hosts,
            strict: s.strict(),
            host_key_alias: s.host_key_alias.clone(),
            hash_known_hosts: s.hash_known_hosts,
            config_refusal: self
                .config
                .refusal
                .clone()
                .or(s.refusal.clone())
                .or(unset)
                .or(relative_global),
        }
    }

    /// The hops of a ProxyJump `hops` (as written) of the connection to `to` (given as
    /// `original`), as ssh reaches them: its `%h %n %p %r` are `to`'s; the last hop is
    /// reached through the hops before it (ssh's `-J` to its `-W` child), and the first
    /// through its own ProxyJump, recursively (the child reads its config as ssh does).
    /// `Err`: a hop that is not `[user@]host[:port]`, or a loop.
    fn jump_chain(
        &self,
        hops: &[String],
        to: &Target,
        original: &str,
        depth: usize,
    ) -> Result<Vec<Target>, String> {
        if depth > MAX_JUMP_DEPTH {
            return Err(format!(
                "ProxyJump: more than {MAX_JUMP_DEPTH} jump hosts deep: a jump host's own ProxyJump leads back to it (as `Host *` with ProxyJump does for the jump host itself), and ssh would start itself without end; give the jump host `ProxyJump none`"
            ));
        }
        let Some((last, before)) = hops.split_last() else {
            return Ok(vec![]);
        };
        let expanded = super::config::expand_proxy_tokens(last, &to.host, original, to.port, &to.user);
        let j = Jump::parse(&expanded)
            .ok_or_else(|| format!("ProxyJump {last}: `{expanded}` is not [user@]host[:port]"))?;
        let hop = self.target(&j.host, j.port, j.user.as_deref(), None);
        let mut chain = if before.is_empty() {
            self.own_chain(&j.host, j.user.as_deref(), &hop, depth + 1)?
        } else {
            self.jump_chain(before, to, original, depth + 1)?
        };
        chain.push(hop);
        Ok(chain)
    }

    /// How ssh reaches `host` itself: through its own ProxyJump, if it has one.
    fn own_chain(
        &self,
        host: &str,
        user: Option<&str>,
        t: &Target,
        depth: usize,
    ) -> Result<Vec<Target>, String> {
        match self.settings(host, user).proxy_jump {
            Some(hops) => self.jump_chain(&hops, t, host, depth),
            None => Ok(vec![]),
        }
    }

    /// The route to a fleet's SSH host: the fleet's proxy_jump if it has one, else
    /// ssh_config's.
    pub fn route(&self, node: &SshAddress) -> Route {
        let target = self.target(
            &node.host,
            node.port,
            node.user.as_deref(),
            node.identity_file.as_deref(),
        );
        let jumps = match &node.proxy_jump {
            Some(JumpTarget {
                host,
                port,
                user,
                identity_file,
            }) => {
                // The jump host's own ssh_config ProxyJump (a chain) comes before it.
                let hop = self.target(host, *port, user.as_deref(), identity_file.as_deref());
                self.own_chain(host, user.as_deref(), &hop, 1).map(|mut chain| {
                    chain.push(hop);
                    chain
                })
            }
            None => self.own_chain(&node.host, node.user.as_deref(), &target, 0),
        };
        let mut target = target;
        let jumps = match jumps {
            Ok(j) => j,
            Err(why) => {
                // Refused as ssh refuses it: nothing is connected.
                target.config_refusal = target.config_refusal.or(Some(why));
                vec![]
            }
        };
        Route {
            jumps,
            target: Box::new(target),
        }
    }
}

impl Route {
    /// The longest a connection to this route may take: each hop's ConnectTimeout, tried
    /// [`CONNECT_ATTEMPTS`] times, with the back-off between attempts (authentication and
    /// the channel's opening come on top).
    pub fn connect_budget(&self) -> Duration {
        let per_attempt: Duration = self
            .jumps
            .iter()
            .chain(std::iter::once(&*self.target))
            .map(|t| t.connect_timeout)
            .sum();
        let backoff: u64 = (1..CONNECT_ATTEMPTS as u64).map(|a| 250 * a).sum();
        per_attempt * CONNECT_ATTEMPTS + Duration::from_millis(backoff)
    }
}

/// Check the host keys of `conn` and of the jump connections under it against the
/// route's hops under `opts` (a connection made for one client, used for another).
async fn check_chain(conn: &Connection, route: &Route, opts: &SshOptions) -> Result<(), SshError> {
    let mut at = Some(conn);
    for hop in std::iter::once(&*route.target).chain(route.jumps.iter().rev()) {
        let Some(c) = at else { break };
        match &c.host_key {
            Some(key) => super::client::check_host_key(hop, opts, key).await?,
            None => {
                return Err(SshError::Connect {
                    target: hop.label(),
                    reason: "the held connection has no host key on record".into(),
                })
            }
        }
        at = c.via.as_deref();
    }
    Ok(())
}

/// How many times a connection is tried before its failure is reported.
/// The most jump hosts a route may pass (a loop of ProxyJump lines stops here).
const MAX_JUMP_DEPTH: usize = 8;

pub const CONNECT_ATTEMPTS: u32 = 3;

fn transient(e: &SshError) -> bool {
    matches!(
        e,
        SshError::Connect { .. }
            | SshError::Timeout { .. }
            | SshError::Jump { .. }
            | SshError::Channel { .. }
    )
}

/// One connection per jump-host chain, made once and shared.
type JumpCells = Arc<Mutex<HashMap<String, Arc<OnceCell<Arc<Connection>>>>>>;

/// The connections to one node that are in use (held by a pane, an exec, a sampler).
type NodeConns = Arc<Mutex<Vec<Weak<Connection>>>>;

/// Connections a holder keeps though nobody uses them now, by route.
type HeldConns = Arc<std::sync::Mutex<Vec<(String, Arc<Connection>)>>>;

/// Connects routes, sharing one connection per jump host among all of them, and one
/// connection per node among the channels to it.
#[derive(Clone)]
pub struct Pool {
    opts: Arc<SshOptions>,
    jumps: JumpCells,
    nodes: Arc<std::sync::Mutex<HashMap<String, NodeConns>>>,
    /// A connection holder's pool keeps every connection until it dies; others close a
    /// connection when its last channel does.
    held: Option<HeldConns>,
    /// The connection holder to ask first, when one runs ([`Pool::exec_channel`]).
    mux: Option<Arc<super::mux::Client>>,
}

/// A route's name: its hops and target, as `user@host:port>` ... `user@host:port`.
fn route_key(route: &Route) -> String {
    let mut key: String = route.jumps.iter().map(|h| h.label() + ">").collect();
    key.push_str(&route.target.label());
    key
}

impl Pool {
    pub fn new(opts: SshOptions) -> Pool {
        Pool {
            opts: Arc::new(opts),
            jumps: Arc::new(Mutex::new(HashMap::new())),
            nodes: Default::default(),
            held: None,
            mux: None,
        }
    }

    /// A connection holder's pool: every connection is kept until it dies (a dead one is
    /// replaced by the next channel that wants its route).
    pub fn holding(opts: SshOptions) -> Pool {
        Pool {
            held: Some(Default::default()),
            ..Pool::new(opts)
        }
    }

    /// Ask the connection holder behind `client` first, in [`Pool::exec_channel`].
    pub fn with_mux(mut self, client: super::mux::Client) -> Pool {
        self.mux = Some(Arc::new(client));
        self
    }

    /// The live connections a holding pool keeps (dead ones dropped): the jump hosts'
    /// (their route ends in `>`), then the nodes', each with its age.
    pub fn held(&self) -> Vec<(String, Duration)> {
        let Some(held) = &self.held else { return vec![] };
        let mut out: Vec<(String, Duration)> = match self.jumps.try_lock() {
            Ok(jumps) => jumps
                .iter()
                .filter_map(|(k, cell)| {
                    cell.get()
                        .filter(|c| !c.is_closed())
                        .map(|c| (k.clone(), c.since.elapsed()))
                })
                .collect(),
            Err(_) => vec![],
        };
        out.sort();
        let mut held = held.lock().expect("held connections lock");
        held.retain(|(_, c)| !c.is_closed());
        out.extend(held.iter().map(|(r, c)| (r.clone(), c.since.elapsed())));
        out
    }

    /// Run `command` on the route: through the connection holder when one runs (its
    /// connection, made once), else on this process's own connection. When the holder
    /// cannot but this process may (an unknown host key the operator is to be asked
    /// about, a passphrase), this process connects itself.
    pub async fn exec_channel(&self, route: &Route, command: &str) -> Result<Channel, SshError> {
        use super::mux::MuxError;
        if let Some(mux) = &self.mux {
            match mux.exec(route, command, &self.opts).await {
                Ok(ch) => return Ok(ch),
                Err(MuxError::Absent) => {}
                Err(MuxError::Fallback(why)) => {
                    tracing::info!("{}: connecting without the holder: {why}", route.target.label())
                }
                Err(MuxError::Failed(reason)) => {
                    return Err(SshError::Holder {
                        target: route.target.label(),
                        reason,
                    })
                }
                Err(MuxError::Unsure(reason)) => {
                    return Err(SshError::HolderLost {
                        target: route.target.label(),
                        reason,
                    })
                }
            }
        }
        let (conn, channel) = self.exec(route, command).await?;
        Ok(super::stream::channel(conn, channel))
    }

    /// Run `command` in a new channel on the node's shared connection.
    pub async fn exec(
        &self,
        route: &Route,
        command: &str,
    ) -> Result<(Arc<Connection>, russh::Channel<russh::client::Msg>), SshError> {
        self.channel(route, |c| async move { c.exec(command).await })
            .await
    }

    /// A login shell with a PTY in a new channel on the node's shared connection.
    pub async fn shell(
        &self,
        route: &Route,
        term: &str,
        cols: u16,
        rows: u16,
    ) -> Result<(Arc<Connection>, russh::Channel<russh::client::Msg>), SshError> {
        self.channel(route, |c| async move { c.shell(term, cols, rows).await })
            .await
    }

    /// Open a channel with `open` on the route's shared connection: panes, exec streams
    /// and samplers of one node all ride one connection (as OpenSSH's ControlMaster
    /// does), which closes when its last user lets go. When there is no live connection,
    /// or every live one refuses the channel (OpenSSH's MaxSessions allows 10 sessions on
    /// a connection by default), a new connection is made and shared from then on.
    ///
    /// The connection is returned with the channel: hold it as long as the channel.
    pub async fn channel<T, F, Fut>(&self, route: &Route, open: F) -> Result<(Arc<Connection>, T), SshError>
    where
        F: Fn(Arc<Connection>) -> Fut,
        Fut: Future<Output = Result<T, SshError>>,
    {
        self.open_channel(route, &self.opts, false, open).await
    }

    /// Like [`Pool::channel`] for another client (a holder's): a new connection is made
    /// with `opts`, the client's known_hosts and policy, and a connection this pool already
    /// has (to the node, or to a jump host on the way) is used only once its host keys
    /// pass the same check under `opts`, as if it had been made for this client.
    pub async fn channel_with<T, F, Fut>(
        &self,
        route: &Route,
        opts: &SshOptions,
        open: F,
    ) -> Result<(Arc<Connection>, T), SshError>
    where
        F: Fn(Arc<Connection>) -> Fut,
        Fut: Future<Output = Result<T, SshError>>,
    {
        self.open_channel(route, opts, true, open).await
    }

    async fn open_channel<T, F, Fut>(
        &self,
        route: &Route,
        opts: &SshOptions,
        recheck: bool,
        open: F,
    ) -> Result<(Arc<Connection>, T), SshError>
    where
        F: Fn(Arc<Connection>) -> Fut,
        Fut: Future<Output = Result<T, SshError>>,
    {
        let slot = self
            .nodes
            .lock()
            .expect("node connections lock")
            .entry(route_key(route))
            .or_default()
            .clone();
        // One opener per node at a time, so users arriving together share one connection.
        let mut conns = slot.lock().await;
        conns.retain(|w| w.upgrade().is_some_and(|c| !c.is_closed()));
        for conn in conns.iter().filter_map(Weak::upgrade) {
            if recheck {
                check_chain(&conn, route, opts).await?;
            }
            match open(conn.clone()).await {
                Ok(t) => return Ok((conn, t)),
                Err(e) => tracing::info!("{e}; trying another connection to {}", route.target.label()),
            }
        }
        let conn = Arc::new(self.connect_with(route, opts).await?);
        if recheck {
            // The node was checked as it connected; the jump hosts it went through may be
            // connections made for someone else.
            check_chain(&conn, route, opts).await?;
        }
        let t = open(conn.clone()).await?;
        conns.push(Arc::downgrade(&conn));
        if let Some(held) = &self.held {
            let mut held = held.lock().expect("held connections lock");
            held.retain(|(_, c)| !c.is_closed());
            held.push((route_key(route), conn.clone()));
        }
        Ok((conn, t))
    }

    pub fn options(&self) -> &SshOptions {
        &self.opts
    }

    /// Connect to the route's target through its jump hosts.
    ///
    /// Like OpenSSH's `ConnectionAttempts`, a connection that fails on the way (refused,
    /// reset, timed out, a tunnel through the bastion that would not open) is tried
    /// [`CONNECT_ATTEMPTS`] times; a host key or authentication failure is final at once.
    pub async fn connect(&self, route: &Route) -> Result<Connection, SshError> {
        self.connect_with(route, &self.opts).await
    }

    async fn connect_with(&self, route: &Route, opts: &SshOptions) -> Result<Connection, SshError> {
        let mut attempt = 1;
        let start = tokio::time::Instant::now();
        loop {
            match self.connect_once(route, opts).await {
                Err(e) if attempt < CONNECT_ATTEMPTS && transient(&e) => {
                    tracing::info!("{e}; trying again ({attempt}/{CONNECT_ATTEMPTS})");
                    tokio::time::sleep(Duration::from_millis(250 * attempt as u64)).await;
                    attempt += 1;
                }
                // The last failure says how often and how long it was tried.
                Err(SshError::Timeout { target, after, .. }) => {
                    return Err(SshError::Timeout {
                        target,
                        after,
                        attempts: attempt,
                        total: start.elapsed(),
                    })
                }
                Err(SshError::Connect { target, reason }) if attempt > 1 => {
                    return Err(SshError::Connect {
                        target,
                        reason: format!("{reason} ({attempt} attempts in {}s)", start.elapsed().as_secs()),
                    })
                }
                result => return result,
            }
        }
    }

    async fn connect_once(&self, route: &Route, opts: &SshOptions) -> Result<Connection, SshError> {
        let mut via: Option<Arc<Connection>> = None;
        let mut key = String::new();
        for hop in &route.jumps {
            key.push_str(&hop.label());
            key.push('>');
            let cell = self.jumps.lock().await.entry(key.clone()).or_default().clone();
            // A jump connection that died is replaced (the cell is swapped for a new one).
            if cell.get().is_some_and(|c| c.is_closed()) {
                let fresh = Arc::new(OnceCell::new());
                self.jumps.lock().await.insert(key.clone(), fresh.clone());
                via = Some(self.connect_hop(&fresh, hop, via, opts).await?);
                continue;
            }
            via = Some(self.connect_hop(&cell, hop, via, opts).await?);
        }
        match via {
            None => Connection::connect(&route.target, opts).await,
            Some(v) => Connection::connect_via(&route.target, opts, v).await,
        }
    }

    async fn connect_hop(
        &self,
        cell: &OnceCell<Arc<Connection>>,
        hop: &Target,
        via: Option<Arc<Connection>>,
        opts: &SshOptions,
    ) -> Result<Arc<Connection>, SshError> {
        cell.get_or_try_init(|| async {
            let c = match via {
                None => Connection::connect(hop, opts).await?,
                Some(v) => Connection::connect_via(hop, opts, v).await?,
            };
            Ok::<_, SshError>(Arc::new(c))
        })
        .await
        .cloned()
    }
}

/// `~` and `~/...` as OpenSSH's `tilde_expand_filename` reads them, with `home` for the
/// login's own; `~user/...` through the password database. Other paths as written.
fn tilde(p: &Path, home: &Path) -> PathBuf {
    let s = p.to_string_lossy();
    let Some(rest) = s.strip_prefix('~') else {
        return p.to_path_buf();
    };
    let (user, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let base = if user.is_empty() {
        Some(home.to_path_buf())
    } else {
        std::ffi::CString::new(user).ok().and_then(|c| {
            // SAFETY: getpwnam returns a pointer into static storage, read at once.
            unsafe {
                let pw = libc::getpwnam(c.as_ptr());
                (!pw.is_null() && !(*pw).pw_dir.is_null()).then(|| {
                    PathBuf::from(
                        std::ffi::CStr::from_ptr((*pw).pw_dir)
                            .to_string_lossy()
                            .into_owned(),
                    )
                })
            }
        })
    };
    match base {
        Some(b) if tail.is_empty() => b,
        Some(b) => b.join(tail),
        // An unknown user: ssh fails to expand and stops; a path that stays relative is
        // refused by the caller.
        None => p.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolver(config: &str) -> Resolver {
        Resolver {
            config: SshConfig::parse(config),
            home: PathBuf::from("/home/op"),
            local_user: "op".into(),
        }
    }

    fn node(host: &str) -> SshAddress {
        SshAddress::new(host)
    }

    /// Hostile review 3, L1: an unset `${VAR}` is refused, not expanded to nothing.
    #[test]
    fn an_unset_variable_in_a_path_refuses_the_host() {
        let r = resolver(
            "Host kh\n  UserKnownHostsFile /tmp/kh_${FD_SURELY_UNSET_VAR_1}shared\nHost id\n  IdentityFile ${FD_SURELY_UNSET_VAR_2}/id\nHost ok\n  IdentityFile ${HOME}/id\n",
        );
        let why = r.target("kh", None, None, None).config_refusal.unwrap();
        assert_eq!(why, "UserKnownHostsFile /tmp/kh_${FD_SURELY_UNSET_VAR_1}shared: env var ${FD_SURELY_UNSET_VAR_1} has no value (ssh refuses the expansion); set it or change the ssh config");
        assert!(r
            .target("id", None, None, None)
            .config_refusal
            .unwrap()
            .starts_with("IdentityFile ${FD_SURELY_UNSET_VAR_2}/id"));
        assert_eq!(r.target("ok", None, None, None).config_refusal, None);
    }

    /// Hostile review 3, M1: `~` as OpenSSH expands it; a relative file refused by name.
    #[test]
    fn global_known_hosts_expand_tilde_and_refuse_relative_paths() {
        let r = resolver(
            "Host rel\n  GlobalKnownHostsFile ~/.ssh/global_kh rel/kh\nHost *\n  GlobalKnownHostsFile ~/.ssh/global_kh ~root/kh /etc/ssh/ssh_known_hosts\n",
        );
        let t = r.target("a", None, None, None);
        assert_eq!(t.global_known_hosts[0], PathBuf::from("/home/op/.ssh/global_kh"));
        assert!(t.global_known_hosts[1].is_absolute() && t.global_known_hosts[1].ends_with("kh"));
        assert_eq!(t.global_known_hosts[2], PathBuf::from("/etc/ssh/ssh_known_hosts"));
        assert_eq!(t.config_refusal, None);
        let t = r.target("rel", None, None, None);
        let why = t.config_refusal.expect("a relative file is refused");
        assert!(
            why.starts_with("GlobalKnownHostsFile rel/kh is a relative path"),
            "{why}"
        );
    }

    #[test]
    fn fleet_values_win_over_ssh_config() {
        let r = resolver("Host gpu-*\n  User cfguser\n  Port 2200\n  IdentityFile ~/.ssh/cfg_key\n  ProxyJump jump@bastion\nHost bastion\n  HostName 34.0.0.1\n");
        let mut n = node("gpu-1");
        let route = r.route(&n);
        assert_eq!(route.target.user, "cfguser");
        assert_eq!(route.target.port, 2200);
        assert_eq!(
            route.target.identity_files,
            vec![PathBuf::from("/home/op/.ssh/cfg_key")]
        );
        assert_eq!(route.jumps.len(), 1);
        assert_eq!(
            (route.jumps[0].host.as_str(), route.jumps[0].user.as_str()),
            ("34.0.0.1", "jump")
        );
        n.user = Some("ubuntu".into());
        n.identity_file = Some("~/k".into());
        n.proxy_jump = Some(JumpTarget {
            host: "10.0.0.1".into(),
            port: Some(2222),
            user: Some("root".into()),
            identity_file: None,
        });
        let route = r.route(&n);
        assert_eq!(route.target.user, "ubuntu");
        assert_eq!(route.target.identity_files, vec![PathBuf::from("/home/op/k")]);
        assert!(route.target.explicit_identities);
        assert_eq!(route.jumps.len(), 1);
        assert_eq!(
            (route.jumps[0].host.as_str(), route.jumps[0].port),
            ("10.0.0.1", 2222)
        );
    }

    #[test]
    fn defaults_without_config() {
        let r = resolver("");
        let t = r.route(&node("h")).target;
        assert_eq!((t.user.as_str(), t.port), ("op", 22));
        assert!(!t.explicit_identities);
        assert_eq!(t.identity_files[0], PathBuf::from("/home/op/.ssh/id_ed25519"));
        assert_eq!(t.keepalive, Some(DEFAULT_KEEPALIVE));
        assert_eq!(
            r.known_hosts("h"),
            vec![
                PathBuf::from("/home/op/.ssh/known_hosts"),
                PathBuf::from("/home/op/.ssh/known_hosts2")
            ]
        );
        assert_eq!(t.user_known_hosts, None, "the session's files");
        assert_eq!(
            t.global_known_hosts,
            vec![
                PathBuf::from("/etc/ssh/ssh_known_hosts"),
                PathBuf::from("/etc/ssh/ssh_known_hosts2")
            ]
        );
        assert_eq!(t.strict, None);
    }

    /// D2 (hostile review 2026-11-25, K1-K3): per-host UserKnownHostsFile,
    /// GlobalKnownHostsFile and StrictHostKeyChecking reach the target and each jump
    /// host, resolved for that host (not `Host *` only).
    #[test]
    fn host_key_settings_are_resolved_per_target_and_per_jump_host() {
        use crate::ssh::config::Strict;
        let r = resolver(
            "Host 127.0.0.1 localhost\n  UserKnownHostsFile ~/.ssh/kh_cluster %d/kh_%h_%p\n  StrictHostKeyChecking yes\n\
             Host bastion\n  HostName 10.0.0.1\n  GlobalKnownHostsFile /etc/team_kh\n  HostKeyAlias Gate\n  ProxyJump none\n\
             Host *\n  StrictHostKeyChecking accept-new\n  ProxyJump bastion\n",
        );
        let route = r.route(&node("localhost"));
        assert_eq!(
            route.target.user_known_hosts,
            Some(vec![
                PathBuf::from("/home/op/.ssh/kh_cluster"),
                PathBuf::from("/home/op/kh_localhost_22")
            ])
        );
        assert_eq!(route.target.strict, Some(Strict::Yes));
        let jump = &route.jumps[0];
        assert_eq!(jump.host, "10.0.0.1");
        assert_eq!(jump.strict, Some(Strict::AcceptNew));
        assert_eq!(jump.user_known_hosts, None);
        assert_eq!(jump.global_known_hosts, vec![PathBuf::from("/etc/team_kh")]);
        assert_eq!(jump.known_hosts_name(), "gate");
        assert_eq!(route.target.known_hosts_name(), "localhost");
        let other = r.route(&node("gpu-1")).target;
        assert_eq!(other.strict, Some(Strict::AcceptNew));
        assert_eq!(other.user_known_hosts, None);
    }

    #[test]
    fn the_connect_budget_follows_connect_timeout_and_hops() {
        let r = resolver("Host slowhost\n  HostName 127.0.0.1\n  ConnectTimeout 30\n");
        let route = r.route(&node("slowhost"));
        assert_eq!(route.connect_budget(), Duration::from_millis(90_750));
        let r = resolver("Host n\n  ProxyJump b\n  ConnectTimeout 5\nHost b\n  ConnectTimeout 10\n");
        assert_eq!(
            r.route(&node("n")).connect_budget(),
            Duration::from_millis(45_750)
        );
    }
}
