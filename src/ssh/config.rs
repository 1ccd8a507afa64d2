//! ssh_config as `ssh -G` reads it, for the keywords flightdeck honours: `Host` patterns
//! (`*`, `?`, `!negation`, several per line, case-sensitive as OpenSSH's), `Match`
//! (`all`, `host`, `originalhost`, `user`, `localuser`, `canonical`, `final` with its
//! second pass; `exec`, `localnetwork`, `tagged`, `command`, `version` and `sessiontype`
//! are not evaluated: such a block is skipped with a warning), `Include` (globs; a
//! relative path is in `~/.ssh` for the user's file, `/etc/ssh` for the system's; an
//! include inside an inactive block is read but never applies), `HostName` (with `%h`),
//! `User`, `Port`, `IdentityFile` (several), `IdentitiesOnly`, `ProxyJump` (a chain, or
//! `none`), `ServerAliveInterval`, `ServerAliveCountMax`, `ConnectTimeout`,
//! `StrictHostKeyChecking`, `UserKnownHostsFile` and `GlobalKnownHostsFile` (several files
//! each), `HostKeyAlias`. As in OpenSSH the first value obtained for a keyword wins
//! (IdentityFile accumulates), the user's file is read before `/etc/ssh/ssh_config`, and a
//! config file (or included file) that others may write is refused ("Bad owner or
//! permissions").

use std::path::{Path, PathBuf};

/// How deep `Include` may nest (OpenSSH's READCONF_MAX_DEPTH).
const MAX_DEPTH: usize = 16;
/// The system-wide config, read after the user's.
pub const SYSTEM_CONFIG: &str = "/etc/ssh/ssh_config";
/// OpenSSH's defaults when no UserKnownHostsFile / GlobalKnownHostsFile is given.
pub const DEFAULT_USER_KNOWN_HOSTS: [&str; 2] = ["~/.ssh/known_hosts", "~/.ssh/known_hosts2"];
pub const DEFAULT_GLOBAL_KNOWN_HOSTS: [&str; 2] = ["/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"];

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SshConfig {
    /// Every setting line, in the order OpenSSH reads them (includes spliced in).
    lines: Vec<Line>,
    /// The conditions (`Host` and `Match` lines) lines depend on.
    conds: Vec<Cond>,
    /// Lines that were not understood, as `FILE line N: text`.
    pub warnings: Vec<String>,
    /// Why the config may not be used at all (a file others may write, as OpenSSH's
    /// "Bad owner or permissions"); every connection is refused with it.
    pub refusal: Option<String>,
    /// A `Match final` anywhere asks for ssh's second pass.
    wants_final: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Line {
    /// Indices into `conds`, outermost first: the line applies when every one holds.
    conds: Vec<usize>,
    /// Keyword, lowercased.
    key: String,
    /// Its arguments, split and unquoted as OpenSSH's `argv_split`.
    args: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Cond {
    /// `Host` patterns, each matched on its own (no commas), `!` negating.
    Host(Vec<String>),
    Match(Vec<Criterion>),
    /// A block inside an include read from an inactive block (OpenSSH's NEVERMATCH).
    Never,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Criterion {
    negate: bool,
    what: Crit,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Crit {
    All,
    Canonical,
    Final,
    Host(String),
    OriginalHost(String),
    User(String),
    LocalUser(String),
    /// `exec CMD`: CMD (its `%` tokens expanded) run by the shell; exit 0 matches.
    Exec(String),
    /// Not evaluated (localnetwork, tagged, ...), as written: a host the block could
    /// apply to is refused ([`HostSettings::refusal`]), never silently skipped.
    Unsupported(String),
}

/// A jump host from `ProxyJump`: `[user@]host[:port]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jump {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
}

impl Jump {
    pub fn parse(s: &str) -> Option<Jump> {
        let s = s.trim().strip_prefix("ssh://").unwrap_or(s.trim());
        let (user, rest) = match s.rsplit_once('@') {
            Some((u, r)) => (Some(u.to_string()), r),
            None => (None, s),
        };
        let (host, port) = if let Some(r) = rest.strip_prefix('[') {
            let (h, after) = r.split_once(']')?;
            (
                h.to_string(),
                after.strip_prefix(':').map(|p| p.parse().ok()).unwrap_or(None),
            )
        } else {
            match rest.rsplit_once(':') {
                Some((h, p)) if !h.contains(':') => (h.to_string(), Some(p.parse().ok()?)),
                _ => (rest.to_string(), None),
            }
        };
        if host.is_empty() {
            return None;
        }
        Some(Jump { user, host, port })
    }
}

/// What the config says for one host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostSettings {
    pub hostname: Option<String>,
    pub user: Option<String>,
    pub port: Option<u16>,
    pub identity_files: Vec<PathBuf>,
    pub identities_only: bool,
    /// The jump chain as written (its `%` tokens unexpanded: they are the connection's,
    /// [`expand_proxy_tokens`]), first hop first; `Some(vec![])` for an explicit
    /// `ProxyJump none`.
    pub proxy_jump: Option<Vec<String>>,
    pub server_alive_interval: Option<u64>,
    pub server_alive_count_max: Option<u64>,
    pub connect_timeout: Option<u64>,
    /// The value as written, lowercased (`yes`, `accept-new`, `no`, `off`, `ask`, ...).
    pub strict_host_key_checking: Option<String>,
    /// UserKnownHostsFile's files, unexpanded (`~`, `%h`, ...); empty when not set.
    pub user_known_hosts_files: Vec<PathBuf>,
    /// GlobalKnownHostsFile's files, as written (OpenSSH expands only `~` in them, which
    /// the resolver does); `None` when not set.
    pub global_known_hosts_files: Option<Vec<PathBuf>>,
    /// HostKeyAlias, lowercased: the name looked up in known_hosts instead of the host.
    pub host_key_alias: Option<String>,
    /// HashKnownHosts yes (Debian's /etc/ssh/ssh_config sets it).
    pub hash_known_hosts: bool,
    /// Why ssh would not connect to this host with this config: a `Match exec` whose
    /// command could not run or died (ssh's fatal), or a `Match` criterion flightdeck
    /// does not evaluate on a block that could apply.
    pub refusal: Option<String>,
}

/// StrictHostKeyChecking, as OpenSSH reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strict {
    /// `yes`/`true`: an unknown host is refused.
    Yes,
    /// `accept-new`: an unknown host's key is recorded; a changed one refused.
    AcceptNew,
    /// `no`/`off`/`false`: an unknown host's key is recorded. OpenSSH connects to a
    /// changed host with password and keyboard-interactive authentication off; flightdeck
    /// refuses it (see [`super::known_hosts`]).
    No,
    /// `ask`: the operator is asked (OpenSSH's default).
    Ask,
}

impl Strict {
    pub fn parse(v: &str) -> Option<Strict> {
        match v.to_ascii_lowercase().as_str() {
            "yes" | "true" => Some(Strict::Yes),
            "accept-new" => Some(Strict::AcceptNew),
            "no" | "off" | "false" => Some(Strict::No),
            "ask" => Some(Strict::Ask),
            _ => None,
        }
    }

    /// The word `ssh -G` prints for it.
    pub fn ssh_g(self) -> &'static str {
        match self {
            Strict::Yes => "true",
            Strict::AcceptNew => "accept-new",
            Strict::No => "false",
            Strict::Ask => "ask",
        }
    }
}

impl HostSettings {
    /// StrictHostKeyChecking, when the config sets a value OpenSSH knows.
    pub fn strict(&self) -> Option<Strict> {
        self.strict_host_key_checking.as_deref().and_then(Strict::parse)
    }
}

/// Where an `Include` of a file is looked for, and whose `~`.
#[derive(Debug, Clone)]
pub struct IncludeBase {
    /// The home `~` stands for.
    pub home: PathBuf,
    /// `true` for the user's config (relative includes in `~/.ssh`), `false` for the
    /// system's (in `/etc/ssh`).
    pub user: bool,
}

/// Who asks, for `Match user`/`localuser`/`exec`.
#[derive(Debug, Clone)]
pub struct Query<'a> {
    /// The host as given (before HostName).
    pub host: &'a str,
    /// A user given outside the config (the fleet file's, as `ssh -l`).
    pub user: Option<&'a str>,
    /// The local login's name.
    pub local_user: &'a str,
    /// The local login's home (`%d`).
    pub home: &'a Path,
}

impl SshConfig {
    /// Read a config file without following `Include` (a missing file is empty).
    pub fn load(path: &Path) -> std::io::Result<SshConfig> {
        match std::fs::read_to_string(path) {
            Ok(t) => Ok(SshConfig::parse(&t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(SshConfig::default()),
            Err(e) => Err(e),
        }
    }

    /// The user's config then the system's, as ssh reads them (no `-F`): `home`'s
    /// `.ssh/config`, then `system` (normally [`SYSTEM_CONFIG`]), includes followed.
    pub fn load_files(home: &Path, user_config: Option<&Path>, system: Option<&Path>) -> SshConfig {
        let mut cfg = SshConfig::default();
        if let Some(p) = user_config {
            let base = IncludeBase {
                home: home.to_path_buf(),
                user: true,
            };
            cfg.read_file(p, &[], 0, Some(&base), true);
        }
        if let Some(p) = system {
            let base = IncludeBase {
                home: home.to_path_buf(),
                user: false,
            };
            cfg.read_file(p, &[], 0, Some(&base), false);
        }
        cfg
    }

    /// The config in `text` (no includes followed: they are reported as warnings).
    pub fn parse(text: &str) -> SshConfig {
        let mut cfg = SshConfig::default();
        cfg.read_text("config", text, &[], 0, None);
        cfg
    }

    /// `text` with includes followed from `base`.
    pub fn parse_with(text: &str, base: &IncludeBase) -> SshConfig {
        let mut cfg = SshConfig::default();
        cfg.read_text("config", text, &[], 0, Some(base));
        cfg
    }

    fn read_file(
        &mut self,
        path: &Path,
        outer: &[usize],
        depth: usize,
        base: Option<&IncludeBase>,
        check: bool,
    ) {
        use std::io::Read;
        let mut f = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                self.warnings.push(format!("{}: {e}", path.display()));
                return;
            }
        };
        if check {
            if let Some(why) = bad_owner_or_permissions(&f, path) {
                self.refusal.get_or_insert(why);
                return;
            }
        }
        let mut text = String::new();
        if let Err(e) = f.read_to_string(&mut text) {
            self.warnings.push(format!("{}: {e}", path.display()));
            return;
        }
        self.read_text(&path.display().to_string(), &text, outer, depth, base);
    }

    fn read_text(
        &mut self,
        name: &str,
        text: &str,
        outer: &[usize],
        depth: usize,
        base: Option<&IncludeBase>,
    ) {
        // The block this file is in now (None: before its first Host or Match line).
        let mut current: Option<usize> = None;
        let never = outer.iter().any(|&c| self.conds[c] == Cond::Never);
        for (n, raw) in text.lines().enumerate() {
            let (key, rest) = split_keyword(raw.trim());
            if key.is_empty() || key.starts_with('#') {
                continue;
            }
            let key = key.to_ascii_lowercase();
            let Some(args) = split_args(&rest) else {
                self.warnings
                    .push(format!("{name} line {}: unterminated quote; skipped", n + 1));
                continue;
            };
            let here = |cur: Option<usize>| -> Vec<usize> { outer.iter().copied().chain(cur).collect() };
            match key.as_str() {
                "host" => {
                    self.conds
                        .push(if never { Cond::Never } else { Cond::Host(args) });
                    current = Some(self.conds.len() - 1);
                }
                "match" => {
                    let crit = if never {
                        Cond::Never
                    } else {
                        match parse_match(&args) {
                            Ok((c, unsupported)) => {
                                if c.iter().any(|cr| cr.what == Crit::Final && !cr.negate) {
                                    self.wants_final = true;
                                }
                                for u in unsupported {
                                    self.warnings.push(format!(
                                        "{name} line {}: `Match {u}` is not evaluated: hosts its block could apply to are refused",
                                        n + 1
                                    ));
                                }
                                Cond::Match(c)
                            }
                            Err(why) => {
                                self.warnings.push(format!("{name} line {}: {why}", n + 1));
                                Cond::Never
                            }
                        }
                    };
                    self.conds.push(crit);
                    current = Some(self.conds.len() - 1);
                }
                "include" => {
                    let Some(base) = base else {
                        self.warnings
                            .push(format!("{name} line {}: `Include` not followed here", n + 1));
                        continue;
                    };
                    if depth + 1 > MAX_DEPTH {
                        self.warnings.push(format!(
                            "{name} line {}: `Include` nested deeper than {MAX_DEPTH}; skipped",
                            n + 1
                        ));
                        continue;
                    }
                    let within = here(current);
                    for arg in &args {
                        for file in include_files(arg, base) {
                            self.read_file(&file, &within, depth + 1, Some(base), true);
                        }
                    }
                }
                _ => {
                    if args.is_empty() {
                        continue;
                    }
                    let conds = here(current);
                    self.lines.push(Line { conds, key, args });
                }
            }
        }
    }

    /// The settings for `host` (the name as given, before HostName).
    pub fn resolve(&self, host: &str) -> HostSettings {
        let local = local_user_name();
        let home = crate::paths::home_dir().unwrap_or_default();
        self.resolve_for(&Query {
            host,
            user: None,
            local_user: &local,
            home: &home,
        })
    }

    /// The settings for `q.host`, as `ssh -G [-l user] host` finds them.
    pub fn resolve_for(&self, q: &Query) -> HostSettings {
        let mut out = HostSettings::default();
        let mut seen: Vec<&str> = vec![];
        self.pass(q, q.host, false, &mut out, &mut seen);
        if self.wants_final {
            // As ssh does: the second pass matches `Host` against the name HostName gave,
            // `Match final`/`canonical` hold, and earlier values still win.
            let mut name = out.hostname.clone().unwrap_or_else(|| q.host.to_string());
            if name.parse::<std::net::IpAddr>().is_err() {
                name = name.to_ascii_lowercase();
            }
            out.hostname = Some(name.clone());
            self.pass(q, &name, true, &mut out, &mut seen);
        }
        out
    }

    fn pass<'a>(
        &'a self,
        q: &Query,
        host: &str,
        final_pass: bool,
        out: &mut HostSettings,
        seen: &mut Vec<&'a str>,
    ) {
        let mut memo: Vec<Option<bool>> = vec![None; self.conds.len()];
        for line in &self.lines {
            let mut applies = true;
            for &c in &line.conds {
                let held = match memo[c] {
                    Some(v) => v,
                    None => {
                        let (v, refusal) = self.eval(c, q, host, final_pass, out);
                        if out.refusal.is_none() {
                            out.refusal = refusal;
                        }
                        memo[c] = Some(v);
                        v
                    }
                };
                if !held {
                    applies = false;
                    break;
                }
            }
            if applies {
                apply(out, seen, &line.key, &line.args, q.host);
            }
        }
    }

    /// Whether condition `c` holds, and why the host is refused if evaluating it says so.
    fn eval(
        &self,
        c: usize,
        q: &Query,
        host: &str,
        final_pass: bool,
        so_far: &HostSettings,
    ) -> (bool, Option<String>) {
        match &self.conds[c] {
            Cond::Never => (false, None),
            Cond::Host(patterns) => (host_line_matches(host, patterns), None),
            Cond::Match(criteria) => {
                // What `Match host` sees: HostName so far (its %h expanded), else the host.
                let mhost = match &so_far.hostname {
                    Some(h) if !final_pass => h.replace("%h", q.host),
                    Some(h) => h.clone(),
                    None => host.to_string(),
                };
                let ruser = q
                    .user
                    .map(str::to_string)
                    .or_else(|| so_far.user.clone())
                    .unwrap_or_else(|| q.local_user.to_string());
                let mut result = true;
                let mut undecided: Option<&str> = None;
                let mut refusal = None;
                for cr in criteria {
                    let r = match &cr.what {
                        Crit::All => true,
                        Crit::Canonical => final_pass,
                        Crit::Final => final_pass,
                        Crit::Host(p) => pattern_list_matches(&mhost.to_ascii_lowercase(), p, true),
                        Crit::OriginalHost(p) => pattern_list_matches(&q.host.to_ascii_lowercase(), p, true),
                        Crit::User(p) => pattern_list_matches(&ruser, p, false),
                        Crit::LocalUser(p) => pattern_list_matches(q.local_user, p, false),
                        // As ssh: not run when an earlier criterion already failed.
                        Crit::Exec(_) if !result => continue,
                        Crit::Exec(cmd) => {
                            let port = so_far.port.unwrap_or(22);
                            let tokens = Tokens {
                                home: q.home,
                                local_user: q.local_user,
                                host: &mhost,
                                original_host: q.host,
                                remote_user: &ruser,
                                port,
                                key_alias: so_far.host_key_alias.as_deref().unwrap_or(&mhost),
                            };
                            match match_exec(&percent_expand(cmd, &tokens)) {
                                Ok(status) => status == 0,
                                Err(why) => {
                                    refusal = Some(why);
                                    false
                                }
                            }
                        }
                        Crit::Unsupported(what) => {
                            undecided = undecided.or(Some(what));
                            continue;
                        }
                    };
                    if r == cr.negate {
                        result = false;
                    }
                }
                // A block flightdeck cannot decide, which could apply: refused, as
                // connecting without it could be laxer than ssh.
                if let (true, Some(what)) = (result, undecided) {
                    return (false, Some(format!("ssh config: `Match {what}` is not evaluated by flightdeck, and its block could apply to this host; refused rather than connecting without it")));
                }
                (result && refusal.is_none(), refusal)
            }
        }
    }
}

/// How long a `Match exec` command may run (ssh waits for ever; a cockpit must not).
const MATCH_EXEC_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Recent `Match exec` results, by command: resolving a 1024-node fleet runs each
/// distinct command once, not once per node and lookup; kept a few seconds, as the
/// answer may change (a VPN up or down).
static MATCH_EXEC_SEEN: std::sync::Mutex<Vec<ExecSeen>> = std::sync::Mutex::new(Vec::new());

/// A `Match exec` command, when it ran, and its exit status or why it refused.
type ExecSeen = (String, std::time::Instant, Result<i32, String>);

/// Run a `Match exec` command as ssh does (`execute_in_shell`: `$SHELL -c CMD`, else
/// `/bin/sh`; stdin and stdout /dev/null): its exit status, or why ssh would refuse
/// (the shell not executable, the command killed by a signal; here also past
/// [`MATCH_EXEC_LIMIT`]). Its stderr goes to the log, never the screen.
fn match_exec(cmd: &str) -> Result<i32, String> {
    const FRESH: std::time::Duration = std::time::Duration::from_secs(5);
    if let Ok(seen) = MATCH_EXEC_SEEN.lock() {
        if let Some((_, _, r)) = seen.iter().find(|(c, at, _)| c == cmd && at.elapsed() < FRESH) {
            return r.clone();
        }
    }
    let r = run_match_exec(cmd);
    if let Ok(mut seen) = MATCH_EXEC_SEEN.lock() {
        seen.retain(|(c, at, _)| c != cmd && at.elapsed() < FRESH);
        seen.push((cmd.to_string(), std::time::Instant::now(), r.clone()));
    }
    r
}

fn run_match_exec(cmd: &str) -> Result<i32, String> {
    use std::os::unix::process::ExitStatusExt;
    let shell = std::env::var_os("SHELL")
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "/bin/sh".into());
    let shown = || {
        cmd.chars()
            .flat_map(char::escape_debug)
            .take(100)
            .collect::<String>()
    };
    let mut child = std::process::Command::new(&shell)
        .arg("-c")
        .arg(cmd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!(
                "ssh config: `Match exec {}`: shell {} cannot run it ({e}); ssh stops here too",
                shown(),
                std::path::Path::new(&shell).display()
            )
        })?;
    let start = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() < MATCH_EXEC_LIMIT => {
                std::thread::sleep(std::time::Duration::from_millis(5))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "ssh config: `Match exec {}` did not finish in {} s; refused",
                    shown(),
                    MATCH_EXEC_LIMIT.as_secs()
                ));
            }
        }
    };
    if let Some(mut e) = child.stderr.take() {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut e, &mut text);
        if !text.trim().is_empty() {
            tracing::info!("ssh config: `Match exec {}` said: {}", shown(), text.trim());
        }
    }
    match (status.code(), status.signal()) {
        (Some(c), _) => Ok(c),
        (None, s) => Err(format!(
            "ssh config: `Match exec {}` exited abnormally (signal {}); ssh stops here too",
            shown(),
            s.unwrap_or(0)
        )),
    }
}

/// Apply one line to `out` unless an earlier line gave the keyword its value.
fn apply<'a>(out: &mut HostSettings, seen: &mut Vec<&'a str>, key: &'a str, args: &[String], host: &str) {
    let first = args[0].as_str();
    match key {
        "identityfile" => {
            out.identity_files.push(PathBuf::from(first));
            return;
        }
        // ProxyJump and ProxyCommand share one slot in OpenSSH: ProxyCommand is not
        // supported, but a ProxyJump after it must not win.
        "proxycommand" => {
            if !seen.contains(&"proxyjump") {
                seen.push("proxyjump");
            }
            return;
        }
        _ => {}
    }
    if seen.contains(&key) {
        return;
    }
    seen.push(key);
    match key {
        "hostname" => out.hostname = Some(first.replace("%h", host).replace("%%", "%")),
        "user" => out.user = Some(first.to_string()),
        "port" => out.port = first.parse().ok(),
        "identitiesonly" => out.identities_only = first.eq_ignore_ascii_case("yes"),
        "proxyjump" => {
            out.proxy_jump = Some(if first.eq_ignore_ascii_case("none") {
                vec![]
            } else {
                first.split(',').map(str::to_string).collect()
            })
        }
        "serveraliveinterval" => out.server_alive_interval = first.parse().ok(),
        "serveralivecountmax" => out.server_alive_count_max = first.parse().ok(),
        "connecttimeout" => out.connect_timeout = first.parse().ok(),
        "stricthostkeychecking" => out.strict_host_key_checking = Some(first.to_ascii_lowercase()),
        "userknownhostsfile" => out.user_known_hosts_files = args.iter().map(PathBuf::from).collect(),
        "globalknownhostsfile" => {
            out.global_known_hosts_files = Some(args.iter().map(PathBuf::from).collect())
        }
        "hostkeyalias" => out.host_key_alias = Some(first.to_ascii_lowercase()),
        "hashknownhosts" => out.hash_known_hosts = first.eq_ignore_ascii_case("yes"),
        _ => {}
    }
}

/// "Bad owner or permissions" as ssh says it for a config file: owned by neither root
/// nor the user, writable by others, or by a group that is not the owner's own private
/// group (Debian's OpenSSH allows that one).
fn bad_owner_or_permissions(f: &std::fs::File, path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = f.metadata().ok()?;
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() };
    let group_ok = m.mode() & 0o020 == 0 || crate::paths::private_group(m.gid(), m.uid());
    ((m.uid() != 0 && m.uid() != me) || m.mode() & 0o002 != 0 || !group_ok).then(|| {
        format!(
            "Bad owner or permissions on {} (owner uid {}, mode {:04o}): ssh refuses it, and so does flightdeck; it must be yours or root's and writable by no one else (`chmod go-w`)",
            path.display(),
            m.uid(),
            m.mode() & 0o7777
        )
    })
}

/// The files an `Include` argument names: `~` is the home; a relative path is in
/// `~/.ssh` (the user's config) or `/etc/ssh` (the system's); globs as glob(3), sorted.
fn include_files(arg: &str, base: &IncludeBase) -> Vec<PathBuf> {
    let full = if let Some(rest) = arg.strip_prefix("~/") {
        if !base.user {
            return vec![];
        }
        base.home.join(rest)
    } else if arg.starts_with('/') {
        PathBuf::from(arg)
    } else if base.user {
        base.home.join(".ssh").join(arg)
    } else {
        Path::new("/etc/ssh").join(arg)
    };
    glob_paths(&full)
}

/// glob(3) on a path: `*`, `?` in any component; a leading `.` only matched literally.
fn glob_paths(path: &Path) -> Vec<PathBuf> {
    let mut found = vec![PathBuf::from("/")];
    for comp in path.components().skip(1) {
        let part = comp.as_os_str().to_string_lossy().into_owned();
        let wild = part.contains(['*', '?']);
        let mut next = vec![];
        for dir in &found {
            if !wild {
                let p = dir.join(&part);
                if p.symlink_metadata().is_ok() {
                    next.push(p);
                }
                continue;
            }
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut names: Vec<String> = entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| (!n.starts_with('.') || part.starts_with('.')) && glob(&part, n, false))
                .collect();
            names.sort();
            next.extend(names.into_iter().map(|n| dir.join(n)));
        }
        found = next;
    }
    found.retain(|p| p.is_file());
    found
}

/// The values OpenSSH's `%` tokens and `~` stand for in a file name.
#[derive(Debug, Clone)]
pub struct Tokens<'a> {
    /// `~` and `%d`.
    pub home: &'a Path,
    /// `%u`.
    pub local_user: &'a str,
    /// `%h`: the host after HostName.
    pub host: &'a str,
    /// `%n`: the host as given.
    pub original_host: &'a str,
    /// `%r`.
    pub remote_user: &'a str,
    /// `%p`.
    pub port: u16,
    /// `%k`: HostKeyAlias, else the host as given.
    pub key_alias: &'a str,
}

/// The tokens ssh expands in a ProxyJump (as in the ProxyCommand it becomes: ssh_config(5)
/// TOKENS): `%h` the target's host after HostName, `%n` as given, `%p` its port, `%r`
/// its user, `%%`. Others stay as written.
pub fn expand_proxy_tokens(hop: &str, host: &str, original_host: &str, port: u16, user: &str) -> String {
    percent_with(hop, |c| match c {
        'h' => Some(host.to_string()),
        'n' => Some(original_host.to_string()),
        'p' => Some(port.to_string()),
        'r' => Some(user.to_string()),
        _ => None,
    })
}

/// `p` with each `%X` replaced by `value(X)`, `%%` by `%`; a token `value` does not know
/// (or a `%` at the end) stays as written.
fn percent_with(p: &str, value: impl Fn(char) -> Option<String>) -> String {
    let mut s = String::new();
    let mut chars = p.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            s.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => s.push('%'),
            Some(t) => match value(t) {
                Some(v) => s.push_str(&v),
                None => {
                    s.push('%');
                    s.push(t);
                }
            },
            None => s.push('%'),
        }
    }
    s
}

/// `%l`: this machine's name (`%L` is its first label).
fn this_host() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its length; gethostname NUL-terminates within it
    // or truncates, and the last byte stays 0.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len() - 1) };
    if r != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// `%X` of the tokens OpenSSH expands (`%C %d %h %i %k %L %l %n %p %r %u %%`), pushed
/// onto `s`; another letter stays as written.
fn push_token(s: &mut String, token: Option<char>, t: &Tokens) {
    match token {
        Some('%') => s.push('%'),
        Some(c) => match token_value(c, t) {
            Some(v) => s.push_str(&v),
            None => {
                s.push('%');
                s.push(c);
            }
        },
        None => s.push('%'),
    }
}

/// The value of token `%c` of the tokens OpenSSH expands, `None` for another letter.
fn token_value(c: char, t: &Tokens) -> Option<String> {
    Some(match c {
        'd' => t.home.display().to_string(),
        'u' => t.local_user.to_string(),
        'h' => t.host.to_string(),
        'n' => t.original_host.to_string(),
        'r' => t.remote_user.to_string(),
        'p' => t.port.to_string(),
        'k' => t.key_alias.to_string(),
        // SAFETY: getuid has no preconditions.
        'i' => unsafe { libc::getuid() }.to_string(),
        'l' => this_host(),
        'L' => this_host().split('.').next().unwrap_or("").to_string(),
        'C' => {
            use sha1::Digest;
            let text = format!("{}{}{}{}", this_host(), t.host, t.port, t.remote_user);
            let d = sha1::Sha1::digest(text.as_bytes());
            d.iter().map(|b| format!("{b:02x}")).collect()
        }
        _ => return None,
    })
}

/// `p` with its `%` tokens expanded ([`token_value`]) and nothing else: a `Match exec`
/// command, as ssh's `percent_expand` gives it to the shell.
pub fn percent_expand(p: &str, t: &Tokens) -> String {
    percent_with(p, |c| token_value(c, t))
}

/// Expand `~`, `${VAR}` and the `%` tokens OpenSSH allows in IdentityFile and
/// UserKnownHostsFile (`%C %d %h %i %k %L %l %n %p %r %u %%`).
pub fn expand_tokens(p: &str, t: &Tokens) -> PathBuf {
    let mut s = String::new();
    let mut chars = p.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '%' => push_token(&mut s, chars.next(), t),
            '$' if chars.peek() == Some(&'{') => {
                let rest: String = chars.clone().skip(1).collect();
                match rest.find('}') {
                    Some(end) => {
                        let name = &rest[..end];
                        s.push_str(&std::env::var(name).unwrap_or_default());
                        for _ in 0..end + 2 {
                            chars.next();
                        }
                    }
                    None => s.push('$'),
                }
            }
            c => s.push(c),
        }
    }
    if s == "~" {
        return t.home.to_path_buf();
    }
    match s.strip_prefix("~/") {
        Some(rest) => t.home.join(rest),
        None => PathBuf::from(s),
    }
}

/// The first `${NAME}` in `p` whose variable is not set: OpenSSH says "env var ${NAME} has
/// no value" and refuses the expansion, where substituting nothing would point at another
/// file (`/tmp/kh_${X}shared` as `/tmp/kh_shared`).
pub fn unset_env_var(p: &str) -> Option<String> {
    let mut rest = p;
    while let Some(at) = rest.find("${") {
        let after = &rest[at + 2..];
        let end = after.find('}')?;
        let name = &after[..end];
        if std::env::var_os(name).is_none() {
            return Some(name.to_string());
        }
        rest = &after[end + 1..];
    }
    None
}

/// Expand `~` and the `%` tokens OpenSSH allows in IdentityFile.
pub fn expand_path(p: &str, home: &Path, local_user: &str, host: &str, remote_user: &str) -> PathBuf {
    expand_tokens(
        p,
        &Tokens {
            home,
            local_user,
            host,
            original_host: host,
            remote_user,
            port: 22,
            key_alias: host,
        },
    )
}

/// The local login's name (`%u`, `Match localuser`): the password database's, else
/// `USER`/`LOGNAME`.
pub fn local_user_name() -> String {
    // SAFETY: getpwuid returns a pointer into static storage, read at once.
    let from_db = unsafe {
        let pw = libc::getpwuid(libc::getuid());
        if pw.is_null() || (*pw).pw_name.is_null() {
            None
        } else {
            Some(
                std::ffi::CStr::from_ptr((*pw).pw_name)
                    .to_string_lossy()
                    .into_owned(),
            )
        }
    };
    from_db
        .filter(|n| !n.is_empty())
        .or_else(|| std::env::var("USER").ok())
        .or_else(|| std::env::var("LOGNAME").ok())
        .unwrap_or_else(|| "root".into())
}

fn split_keyword(line: &str) -> (String, String) {
    let idx = line
        .find(|c: char| c.is_whitespace() || c == '=')
        .unwrap_or(line.len());
    let key = line[..idx].to_string();
    let rest = line[idx..].trim_start();
    let rest = rest.strip_prefix('=').unwrap_or(rest).trim();
    (key, rest.to_string())
}

/// OpenSSH's `argv_split`: whitespace-separated words, `"` and `'` quoting, `\` escaping
/// a quote, a backslash or (unquoted) a space, and an unquoted `#` starting a comment.
/// `None` for a quote left open.
fn split_args(s: &str) -> Option<Vec<String>> {
    let mut out = vec![];
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == ' ' || chars[i] == '\t' {
            i += 1;
            continue;
        }
        if chars[i] == '#' {
            break;
        }
        let mut quote: Option<char> = None;
        let mut arg = String::new();
        while i < chars.len() {
            let c = chars[i];
            if c == '\\' {
                match chars.get(i + 1) {
                    Some(&n) if n == '\'' || n == '"' || n == '\\' || (quote.is_none() && n == ' ') => {
                        arg.push(n);
                        i += 2;
                    }
                    _ => {
                        arg.push(c);
                        i += 1;
                    }
                }
                continue;
            }
            match quote {
                None if c == ' ' || c == '\t' => break,
                None if c == '"' || c == '\'' => quote = Some(c),
                Some(q) if c == q => quote = None,
                _ => arg.push(c),
            }
            i += 1;
        }
        if quote.is_some() {
            return None;
        }
        out.push(arg);
    }
    Some(out)
}

/// A `Match` line's criteria; the names of those not evaluated.
fn parse_match(args: &[String]) -> Result<(Vec<Criterion>, Vec<String>), String> {
    let mut out = vec![];
    let mut unsupported = vec![];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (negate, name) = match a.strip_prefix('!') {
            Some(n) => (true, n),
            None => (false, a.as_str()),
        };
        let (name, inline) = match name.split_once('=') {
            Some((n, v)) => (n.to_ascii_lowercase(), Some(v.to_string())),
            None => (name.to_ascii_lowercase(), None),
        };
        let what = match name.as_str() {
            "all" => Crit::All,
            "canonical" => Crit::Canonical,
            "final" => Crit::Final,
            _ => {
                let Some(arg) = inline.or_else(|| it.next().cloned()) else {
                    return Err(format!(
                        "`Match {name}` without its argument; the block is skipped"
                    ));
                };
                match name.as_str() {
                    "host" => Crit::Host(arg),
                    "originalhost" => Crit::OriginalHost(arg),
                    "user" => Crit::User(arg),
                    "localuser" => Crit::LocalUser(arg),
                    "exec" => Crit::Exec(arg),
                    _ => {
                        unsupported.push(format!("{name} {arg}"));
                        Crit::Unsupported(format!("{name} {arg}"))
                    }
                }
            }
        };
        out.push(Criterion { negate, what });
    }
    if out.is_empty() {
        return Err("`Match` without criteria; the block is skipped".into());
    }
    Ok((out, unsupported))
}

/// A `Host` line: any pattern matches (each whole, case-sensitive, as OpenSSH's
/// `match_pattern`) and no negated one does.
fn host_line_matches(host: &str, patterns: &[String]) -> bool {
    let mut matched = false;
    for p in patterns {
        if let Some(neg) = p.strip_prefix('!') {
            if glob(neg, host, false) {
                return false;
            }
        } else if glob(p, host, false) {
            matched = true;
        }
    }
    matched
}

/// OpenSSH's `match_pattern_list`: comma-separated patterns, `!` negating.
fn pattern_list_matches(text: &str, list: &str, lower: bool) -> bool {
    let mut matched = false;
    for p in list.split(',') {
        let p = if lower {
            p.to_ascii_lowercase()
        } else {
            p.to_string()
        };
        if let Some(neg) = p.strip_prefix('!') {
            if glob(neg, text, false) {
                return false;
            }
        } else if glob(&p, text, false) {
            matched = true;
        }
    }
    matched
}

/// A pattern list (several patterns, each possibly a comma-separated list), host names
/// compared case-insensitively: any positive pattern matches and no negated one does.
pub fn host_matches(host: &str, patterns: &[String]) -> bool {
    let mut matched = false;
    for p in patterns.iter().flat_map(|p| p.split(',')) {
        if let Some(neg) = p.strip_prefix('!') {
            if glob(neg, host, true) {
                return false;
            }
        } else if glob(p, host, true) {
            matched = true;
        }
    }
    matched
}

/// `*` and `?` wildcards; `fold`: compare ASCII case-insensitively (host names in
/// known_hosts are).
pub fn glob(pattern: &str, text: &str, fold: bool) -> bool {
    let lower = |s: &str| {
        if fold {
            s.to_ascii_lowercase()
        } else {
            s.to_string()
        }
    };
    let p: Vec<char> = lower(pattern).chars().collect();
    let t: Vec<char> = lower(text).chars().collect();
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = "\
# global
ServerAliveInterval 30
Host bastion
  HostName 34.1.2.3
  User ops
  IdentityFile ~/.ssh/bastion_key

Host gpu-* !gpu-test
  User ubuntu
  Port 2222
  ProxyJump ops@bastion:22,jump2
  IdentityFile %d/.ssh/%r_key

Host gpu-test
  ProxyJump none

Host *
  User fallback
  IdentityFile ~/.ssh/id_ed25519
  ServerAliveInterval 99
  StrictHostKeyChecking accept-new
  UserKnownHostsFile ~/.ssh/known_hosts ~/.ssh/known_hosts2
Match exec true
  User ignored
";

    #[test]
    fn first_value_wins_and_identity_files_accumulate() {
        let c = SshConfig::parse(CONFIG);
        let s = c.resolve("gpu-3");
        assert_eq!(s.user.as_deref(), Some("ubuntu"));
        assert_eq!(s.port, Some(2222));
        assert_eq!(s.server_alive_interval, Some(30), "the global line comes first");
        assert_eq!(
            s.identity_files,
            vec![
                PathBuf::from("%d/.ssh/%r_key"),
                PathBuf::from("~/.ssh/id_ed25519")
            ]
        );
        let jumps: Vec<Jump> = s
            .proxy_jump
            .clone()
            .unwrap()
            .iter()
            .map(|j| Jump::parse(j).unwrap())
            .collect();
        assert_eq!(
            jumps[0],
            Jump {
                user: Some("ops".into()),
                host: "bastion".into(),
                port: Some(22)
            }
        );
        assert_eq!(
            jumps[1],
            Jump {
                user: None,
                host: "jump2".into(),
                port: None
            }
        );
        assert_eq!(s.strict_host_key_checking.as_deref(), Some("accept-new"));
        assert_eq!(s.strict(), Some(Strict::AcceptNew));
        assert_eq!(s.user_known_hosts_files.len(), 2);
        assert_eq!(
            c.warnings,
            Vec::<String>::new(),
            "`Match exec` is evaluated, as ssh does"
        );
    }

    #[test]
    fn negation_and_none() {
        let c = SshConfig::parse(CONFIG);
        let t = c.resolve("gpu-test");
        assert_eq!(
            t.user.as_deref(),
            Some("fallback"),
            "gpu-test is excluded from gpu-*"
        );
        assert_eq!(t.proxy_jump, Some(vec![]));
        let b = c.resolve("bastion");
        assert_eq!(b.hostname.as_deref(), Some("34.1.2.3"));
        assert_eq!(b.user.as_deref(), Some("ops"));
        assert_eq!(c.resolve("other").user.as_deref(), Some("fallback"));
    }

    #[test]
    fn globs_and_jumps() {
        assert!(glob("10.88.*", "10.88.0.1", true));
        assert!(glob("node?", "NODE1", true));
        assert!(!glob("node?", "NODE1", false), "Host lines are case-sensitive");
        assert!(!glob("node?", "node10", true));
        assert!(glob("*", "", true));
        assert_eq!(Jump::parse("[fe80::1]:2200").unwrap().port, Some(2200));
        assert_eq!(
            Jump::parse("u@h").unwrap(),
            Jump {
                user: Some("u".into()),
                host: "h".into(),
                port: None
            }
        );
        assert!(Jump::parse("h:notaport").is_none());
    }

    #[test]
    fn paths_expand() {
        let p = expand_path("%d/.ssh/%r@%h_%%", Path::new("/home/me"), "me", "gpu-1", "ubuntu");
        assert_eq!(p, PathBuf::from("/home/me/.ssh/ubuntu@gpu-1_%"));
        assert_eq!(
            expand_path("~/.ssh/k", Path::new("/h"), "", "", ""),
            PathBuf::from("/h/.ssh/k")
        );
    }

    #[test]
    fn quoting_comments_and_equals_as_openssh_splits_them() {
        assert_eq!(
            split_args(r#""/x y/%h" ~/k 'a b'\ c d\ e # comment"#).unwrap(),
            vec!["/x y/%h", "~/k", "a b c", "d e"]
        );
        assert!(split_args("\"open").is_none());
        let c = SshConfig::parse("Host=a\nUserKnownHostsFile=\"/k h\" /k2\nStrictHostKeyChecking=Yes\n");
        let s = c.resolve("a");
        assert_eq!(
            s.user_known_hosts_files,
            vec![PathBuf::from("/k h"), PathBuf::from("/k2")]
        );
        assert_eq!(s.strict(), Some(Strict::Yes));
        // Commas are part of a Host pattern, not separators (OpenSSH's match_pattern).
        let c = SshConfig::parse("Host a,b\nUser x\n");
        assert_eq!(c.resolve("a").user, None);
    }

    #[test]
    fn include_is_followed_relative_to_dot_ssh_and_inactive_blocks_stay_inactive() {
        let home = tempfile::tempdir().unwrap();
        let ssh = home.path().join(".ssh");
        std::fs::create_dir_all(ssh.join("conf.d")).unwrap();
        std::fs::write(
            ssh.join("conf.d/10-a.conf"),
            "UserKnownHostsFile /k/inc\nHost y.*\n  StrictHostKeyChecking accept-new\n",
        )
        .unwrap();
        std::fs::write(ssh.join("conf.d/20-b.conf"), "HostKeyAlias From-B\n").unwrap();
        std::fs::write(ssh.join("conf.d/.hidden.conf"), "Port 1\n").unwrap();
        let text =
            "Host *.a\n  Include conf.d/*.conf\nHost x.a\n  StrictHostKeyChecking yes\nHost *\n  Port 2\n";
        let c = SshConfig::parse_with(
            text,
            &IncludeBase {
                home: home.path().to_path_buf(),
                user: true,
            },
        );
        assert_eq!(c.refusal, None);
        let x = c.resolve("x.a");
        assert_eq!(x.user_known_hosts_files, vec![PathBuf::from("/k/inc")]);
        assert_eq!(
            x.strict(),
            Some(Strict::Yes),
            "the include's Host y.* does not hold"
        );
        assert_eq!(x.host_key_alias.as_deref(), Some("from-b"));
        assert_eq!(x.port, Some(2), "a dot file is not globbed");
        let y = c.resolve("y.a");
        assert_eq!(y.strict(), Some(Strict::AcceptNew));
        let yb = c.resolve("y.b");
        assert_eq!(
            yb.strict(),
            None,
            "the include sits in a block that does not hold"
        );
        assert!(yb.user_known_hosts_files.is_empty());
        // A file others may write is refused, as ssh refuses it.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            ssh.join("conf.d/20-b.conf"),
            std::fs::Permissions::from_mode(0o666),
        )
        .unwrap();
        let c = SshConfig::parse_with(
            text,
            &IncludeBase {
                home: home.path().to_path_buf(),
                user: true,
            },
        );
        assert!(
            c.refusal
                .as_deref()
                .is_some_and(|r| r.contains("Bad owner or permissions")),
            "{:?}",
            c.refusal
        );
    }

    #[test]
    fn match_blocks_and_the_final_pass() {
        let c = SshConfig::parse(
            "Host alias\n  HostName real.example\nMatch host real.example user root\n  StrictHostKeyChecking yes\nMatch originalhost alias !user root\n  Port 7\nMatch final host real.example\n  HostKeyAlias fin\nMatch all\n  UserKnownHostsFile /all\n",
        );
        let q = |user: Option<&'static str>| Query {
            host: "alias",
            user,
            local_user: "root",
            home: Path::new("/root"),
        };
        let s = c.resolve_for(&q(None));
        assert_eq!(s.strict(), Some(Strict::Yes));
        assert_eq!(s.port, None);
        assert_eq!(s.host_key_alias.as_deref(), Some("fin"));
        assert_eq!(s.user_known_hosts_files, vec![PathBuf::from("/all")]);
        let s = c.resolve_for(&q(Some("ops")));
        assert_eq!((s.strict(), s.port), (None, Some(7)));
    }

    #[test]
    fn tokens_expand_as_openssh() {
        let t = Tokens {
            home: Path::new("/home/op"),
            local_user: "op",
            host: "real",
            original_host: "alias",
            remote_user: "ubuntu",
            port: 2200,
            key_alias: "alias",
        };
        assert_eq!(
            expand_tokens("~/kh_%h_%n_%u_%r_%p_%k_%%", &t),
            PathBuf::from("/home/op/kh_real_alias_op_ubuntu_2200_alias_%")
        );
        std::env::set_var("FD_TEST_KH_DIR", "/srv/kh");
        assert_eq!(
            expand_tokens("${FD_TEST_KH_DIR}/x", &t),
            PathBuf::from("/srv/kh/x")
        );
    }
}
