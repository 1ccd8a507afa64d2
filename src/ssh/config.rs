//! `~/.ssh/config`, the parts flightdeck honours: `Host` patterns (`*`, `?`, `!negation`,
//! several per line), `HostName` (with `%h`), `User`, `Port`, `IdentityFile` (several,
//! `~` and `%d %u %h %r %%`), `IdentitiesOnly`, `ProxyJump` (a chain, or `none`),
//! `ServerAliveInterval`, `ServerAliveCountMax`, `ConnectTimeout`,
//! `StrictHostKeyChecking`, `UserKnownHostsFile`. As in OpenSSH the first value obtained
//! for a keyword wins (IdentityFile accumulates). `Match` blocks and `Include` are not
//! supported: their lines are skipped and reported as warnings.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SshConfig {
    blocks: Vec<Block>,
    /// Lines that were not understood, as `line N: text`.
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Block {
    /// `None` for settings before the first `Host` line (they apply to every host).
    patterns: Option<Vec<String>>,
    /// (keyword lowercased, value), in file order.
    settings: Vec<(String, String)>,
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
    /// The jump chain, first hop first; `Some(vec![])` for an explicit `ProxyJump none`.
    pub proxy_jump: Option<Vec<Jump>>,
    pub server_alive_interval: Option<u64>,
    pub server_alive_count_max: Option<u64>,
    pub connect_timeout: Option<u64>,
    pub strict_host_key_checking: Option<String>,
    pub user_known_hosts_files: Vec<PathBuf>,
}

impl SshConfig {
    /// Read a config file; a missing file is an empty config.
    pub fn load(path: &Path) -> std::io::Result<SshConfig> {
        match std::fs::read_to_string(path) {
            Ok(t) => Ok(SshConfig::parse(&t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(SshConfig::default()),
            Err(e) => Err(e),
        }
    }

    pub fn parse(text: &str) -> SshConfig {
        let mut cfg = SshConfig::default();
        let mut current = Block::default();
        let mut skipping_match = false;
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (key, value) = split_keyword(line);
            let key = key.to_ascii_lowercase();
            match key.as_str() {
                "host" => {
                    cfg.blocks.push(std::mem::take(&mut current));
                    current.patterns = Some(split_args(&value));
                    skipping_match = false;
                }
                "match" => {
                    cfg.blocks.push(std::mem::take(&mut current));
                    cfg.warnings.push(format!(
                        "line {}: `Match` blocks are not supported; skipped",
                        n + 1
                    ));
                    skipping_match = true;
                }
                _ if skipping_match => {}
                "include" => cfg
                    .warnings
                    .push(format!("line {}: `Include` is not supported; skipped", n + 1)),
                _ => current.settings.push((key, unquote(&value))),
            }
        }
        cfg.blocks.push(current);
        cfg
    }

    /// The settings for `host` (the name as given, before HostName).
    pub fn resolve(&self, host: &str) -> HostSettings {
        let mut out = HostSettings::default();
        let mut seen: Vec<String> = vec![];
        for block in &self.blocks {
            let applies = match &block.patterns {
                None => true,
                Some(p) => host_matches(host, p),
            };
            if !applies {
                continue;
            }
            for (k, v) in &block.settings {
                if k == "identityfile" {
                    out.identity_files.push(PathBuf::from(v));
                    continue;
                }
                if k == "userknownhostsfile" {
                    if out.user_known_hosts_files.is_empty() {
                        out.user_known_hosts_files = split_args(v).into_iter().map(PathBuf::from).collect();
                    }
                    continue;
                }
                if seen.contains(k) {
                    continue;
                }
                seen.push(k.clone());
                match k.as_str() {
                    "hostname" => out.hostname = Some(v.replace("%h", host).replace("%%", "%")),
                    "user" => out.user = Some(v.clone()),
                    "port" => out.port = v.parse().ok(),
                    "identitiesonly" => out.identities_only = v.eq_ignore_ascii_case("yes"),
                    "proxyjump" => {
                        out.proxy_jump = Some(if v.eq_ignore_ascii_case("none") {
                            vec![]
                        } else {
                            v.split(',').filter_map(Jump::parse).collect()
                        })
                    }
                    "serveraliveinterval" => out.server_alive_interval = v.parse().ok(),
                    "serveralivecountmax" => out.server_alive_count_max = v.parse().ok(),
                    "connecttimeout" => out.connect_timeout = v.parse().ok(),
                    "stricthostkeychecking" => out.strict_host_key_checking = Some(v.to_ascii_lowercase()),
                    _ => {}
                }
            }
        }
        out
    }
}

/// Expand `~` and the `%` tokens OpenSSH allows in IdentityFile.
pub fn expand_path(p: &str, home: &Path, local_user: &str, host: &str, remote_user: &str) -> PathBuf {
    let mut s = String::new();
    let mut chars = p.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '%' {
            match chars.next() {
                Some('d') => s.push_str(&home.display().to_string()),
                Some('u') => s.push_str(local_user),
                Some('h') => s.push_str(host),
                Some('r') => s.push_str(remote_user),
                Some('%') => s.push('%'),
                Some(other) => {
                    s.push('%');
                    s.push(other);
                }
                None => s.push('%'),
            }
        } else {
            s.push(c);
        }
    }
    if s == "~" {
        return home.to_path_buf();
    }
    match s.strip_prefix("~/") {
        Some(rest) => home.join(rest),
        None => PathBuf::from(s),
    }
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

fn unquote(v: &str) -> String {
    v.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(v)
        .to_string()
}

fn split_args(v: &str) -> Vec<String> {
    let mut out = vec![];
    let mut cur = String::new();
    let mut quoted = false;
    for c in v.chars() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// OpenSSH pattern-list matching: any positive pattern matches and no negated one does.
pub fn host_matches(host: &str, patterns: &[String]) -> bool {
    let mut matched = false;
    for p in patterns.iter().flat_map(|p| p.split(',')) {
        if let Some(neg) = p.strip_prefix('!') {
            if glob(neg, host) {
                return false;
            }
        } else if glob(p, host) {
            matched = true;
        }
    }
    matched
}

/// `*` and `?` wildcards, case-insensitive (host names are).
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.to_ascii_lowercase().chars().collect();
    let t: Vec<char> = text.to_ascii_lowercase().chars().collect();
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
Match host foo
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
        let jumps = s.proxy_jump.unwrap();
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
        assert_eq!(s.user_known_hosts_files.len(), 2);
        assert_eq!(
            c.warnings,
            vec!["line 23: `Match` blocks are not supported; skipped".to_string()]
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
        assert!(glob("10.88.*", "10.88.0.1"));
        assert!(glob("node?", "NODE1"));
        assert!(!glob("node?", "node10"));
        assert!(glob("*", ""));
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
}
