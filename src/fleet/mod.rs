//! Fleets: the fleet file (`spec.rs`), its validation with FILE:LINE:COL diagnostics, and
//! the nodes a fleet resolves to.

pub mod applied;
pub mod form;
pub mod kind;
mod resolve;
pub mod spec;

use crate::node::kube::KubeNode;
use crate::yaml::{self, YamlError};
use form::printable;
pub use kind::BackendKind;
pub use resolve::resolve;
pub use spec::{valid_subdomain, FleetSpec, Host, Placement, ProxyJump};
use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// One finding about a fleet file, at a place in it when the place is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub severity: Severity,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let (Some(l), Some(c)) = (self.line, self.column) {
            write!(f, ":{l}:{c}")?;
        }
        match self.severity {
            Severity::Error => write!(f, ": {}", self.message),
            Severity::Warning => write!(f, ": warning: {}", self.message),
        }
    }
}

impl Diagnostic {
    /// A finding about the field at `path` of `text` (the contents of `file`), placed at
    /// the field's key; a numeric last part names an item of a list. A field that is not
    /// written (a missing one) is placed at the top of the file.
    pub fn at(file: &Path, text: &str, severity: Severity, path: &[&str], message: String) -> Diagnostic {
        let found = match path.split_last() {
            Some((last, parent)) if !parent.is_empty() && last.parse::<usize>().is_ok() => {
                yaml::locate_item(text, parent, last.parse().unwrap_or(0))
                    .or_else(|| yaml::locate(text, parent))
            }
            _ => yaml::locate(text, path),
        };
        let pos = found.or((!path.is_empty()).then_some((1, 1)));
        let field = path.join(".");
        let message = if field.is_empty() {
            message
        } else {
            format!("{field}: {message}")
        };
        Diagnostic {
            file: file.to_path_buf(),
            line: pos.map(|p| p.0),
            column: pos.map(|p| p.1),
            severity,
            message,
        }
    }
}

impl From<YamlError> for Diagnostic {
    fn from(e: YamlError) -> Self {
        Diagnostic {
            file: e.file,
            line: e.line,
            column: e.column,
            severity: Severity::Error,
            message: e.message,
        }
    }
}

/// One node of a fleet: its place, its name, and how to reach it.
///
/// state.json keeps a node in one flat shape whatever its address (`host`, `port`, `user`,
/// `identity_file`, `proxy_jump`, `internal_ip`, and `kube` for a Kubernetes node), as it
/// always has: a local node is written as `host: localhost`, and read back as local by
/// its fleet's record (`store`), since the flat shape alone cannot tell it from an SSH
/// host named localhost.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(from = "FlatNode", into = "FlatNode")]
pub struct NodeTarget {
    pub index: usize,
    /// The name shown for the node (`<fleet>-<index>`).
    pub name: String,
    pub internal_ip: Option<String>,
    pub address: Address,
}

/// How a node is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// This machine: commands run with `sh -c`, shells on a local PTY.
    Local,
    /// A host reached over SSH.
    Ssh(SshAddress),
    /// A Kubernetes node (or a pod on it), reached through the Kubernetes exec API.
    /// `host` is what is shown and selected by: its IP, else its name.
    Kube { host: String, node: KubeNode },
}

/// An SSH host as the fleet gives it; what it leaves out comes from ssh_config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshAddress {
    /// Host name, address or ssh_config alias.
    pub host: String,
    pub port: Option<u16>,
    pub user: Option<String>,
    pub identity_file: Option<String>,
    pub proxy_jump: Option<JumpTarget>,
}

impl SshAddress {
    /// `host`, everything else from ssh_config.
    pub fn new(host: &str) -> SshAddress {
        SshAddress {
            host: host.to_string(),
            port: None,
            user: None,
            identity_file: None,
            proxy_jump: None,
        }
    }
}

/// The host a local node shows.
const LOCALHOST: &str = "localhost";

impl NodeTarget {
    /// This machine as node `index` named `name`.
    pub fn local(index: usize, name: impl Into<String>) -> NodeTarget {
        NodeTarget {
            index,
            name: name.into(),
            internal_ip: None,
            address: Address::Local,
        }
    }

    /// What the node is shown and selected by: its host name or address (`localhost`
    /// for this machine, a Kubernetes node's IP).
    pub fn host(&self) -> &str {
        match &self.address {
            Address::Local => LOCALHOST,
            Address::Ssh(s) => &s.host,
            Address::Kube { host, .. } => host,
        }
    }

    /// The SSH port the fleet gives (`None`: ssh_config's, or not an SSH node).
    pub fn port(&self) -> Option<u16> {
        self.ssh().and_then(|s| s.port)
    }

    /// The SSH user the fleet gives (`None`: ssh_config's, or not an SSH node).
    pub fn user(&self) -> Option<&str> {
        self.ssh().and_then(|s| s.user.as_deref())
    }

    /// The SSH host, for a node reached over SSH.
    pub fn ssh(&self) -> Option<&SshAddress> {
        match &self.address {
            Address::Ssh(s) => Some(s),
            _ => None,
        }
    }

    /// The Kubernetes node, for a node reached through the Kubernetes API.
    pub fn kube(&self) -> Option<&KubeNode> {
        match &self.address {
            Address::Kube { node, .. } => Some(node),
            _ => None,
        }
    }

    pub fn kube_mut(&mut self) -> Option<&mut KubeNode> {
        match &mut self.address {
            Address::Kube { node, .. } => Some(node),
            _ => None,
        }
    }
}

/// A node in state.json's shape (see [`NodeTarget`]).
#[derive(serde::Serialize, serde::Deserialize)]
struct FlatNode {
    index: usize,
    name: String,
    host: String,
    port: Option<u16>,
    user: Option<String>,
    identity_file: Option<String>,
    proxy_jump: Option<JumpTarget>,
    internal_ip: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kube: Option<KubeNode>,
}

impl From<FlatNode> for NodeTarget {
    fn from(f: FlatNode) -> NodeTarget {
        let address = match f.kube {
            Some(node) => Address::Kube { host: f.host, node },
            None => Address::Ssh(SshAddress {
                host: f.host,
                port: f.port,
                user: f.user,
                identity_file: f.identity_file,
                proxy_jump: f.proxy_jump,
            }),
        };
        NodeTarget {
            index: f.index,
            name: f.name,
            internal_ip: f.internal_ip,
            address,
        }
    }
}

impl From<NodeTarget> for FlatNode {
    fn from(n: NodeTarget) -> FlatNode {
        let mut f = FlatNode {
            index: n.index,
            name: n.name,
            host: String::new(),
            port: None,
            user: None,
            identity_file: None,
            proxy_jump: None,
            internal_ip: n.internal_ip,
            kube: None,
        };
        match n.address {
            Address::Local => f.host = LOCALHOST.into(),
            Address::Ssh(s) => {
                f.host = s.host;
                f.port = s.port;
                f.user = s.user;
                f.identity_file = s.identity_file;
                f.proxy_jump = s.proxy_jump;
            }
            Address::Kube { host, node } => {
                f.host = host;
                f.kube = Some(node);
            }
        }
        f
    }
}

/// The nodes `items` pick out of `all`, in fleet order: an index (`3`), a range of
/// indices (`0-3`), a node's name or host (`lab-2`, `10.0.0.5`), or a pattern with `*`
/// (`lab-1*`). Nothing picked twice; an item that picks nothing is an error naming it.
pub fn select_nodes(all: &[NodeTarget], items: &[String]) -> Result<Vec<NodeTarget>, String> {
    let mut picked = vec![false; all.len()];
    for item in items.iter().map(|i| i.trim()).filter(|i| !i.is_empty()) {
        let hits: Vec<usize> = if let Ok(i) = item.parse::<usize>() {
            all.iter().position(|n| n.index == i).into_iter().collect()
        } else if let Some((a, b)) = item
            .split_once('-')
            .and_then(|(a, b)| Some((a.parse::<usize>().ok()?, b.parse::<usize>().ok()?)))
        {
            if a > b {
                return Err(format!("`{item}`: a range goes from low to high"));
            }
            (0..all.len())
                .filter(|&k| (a..=b).contains(&all[k].index))
                .collect()
        } else if item.contains('*') {
            (0..all.len())
                .filter(|&k| glob(item, &all[k].name) || glob(item, all[k].host()))
                .collect()
        } else {
            (0..all.len())
                .filter(|&k| all[k].name == item || all[k].host() == item)
                .collect()
        };
        if hits.is_empty() {
            let last = all.len().saturating_sub(1);
            let hint = crate::yaml::did_you_mean(item, all.iter().map(|n| n.name.as_str()));
            return Err(format!(
                "`{item}` is no node of the fleet (nodes 0..{last}, named {}){hint}",
                crate::words::compress_names(&all.iter().map(|n| n.name.clone()).collect::<Vec<_>>())
            ));
        }
        for k in hits {
            picked[k] = true;
        }
    }
    Ok(all
        .iter()
        .zip(picked)
        .filter(|(_, p)| *p)
        .map(|(n, _)| n.clone())
        .collect())
}

/// `*` matches any run of characters; everything else matches itself.
fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JumpTarget {
    pub host: String,
    pub port: Option<u16>,
    pub user: Option<String>,
    pub identity_file: Option<String>,
}

impl From<&ProxyJump> for JumpTarget {
    fn from(p: &ProxyJump) -> Self {
        JumpTarget {
            host: p.hostname.clone(),
            port: p.port,
            user: p.user.clone(),
            identity_file: p.identity_file.clone(),
        }
    }
}

/// A recorded fleet's nodes as its family addresses them: a local fleet's nodes are this
/// machine (state.json writes them as `host: localhost`, see [`NodeTarget`]); the other
/// families' nodes keep the address they were read with.
pub fn settle_addresses(kind: BackendKind, nodes: &mut [NodeTarget]) {
    match kind {
        BackendKind::Local => nodes.iter_mut().for_each(|n| n.address = Address::Local),
        BackendKind::Ssh | BackendKind::Gcp | BackendKind::Gke => {}
    }
}

/// A fleet file that parsed and passed validation.
#[derive(Debug, Clone)]
pub struct Fleet {
    pub file: PathBuf,
    pub name: String,
    pub backend: BackendKind,
    pub spec: FleetSpec,
    /// Warnings found while validating (ignored dstack fields and the like).
    pub warnings: Vec<Diagnostic>,
    /// What `fleet apply` records of the file, and later commands run from
    /// ([`form::applied_form`]).
    pub applied: String,
}

impl Fleet {
    /// The nodes of a local or SSH fleet, with fleet-wide SSH settings applied to each
    /// host. Empty for GCP fleets (their nodes exist only once created).
    pub fn node_targets(&self) -> Vec<NodeTarget> {
        match self.backend {
            BackendKind::Local => vec![NodeTarget::local(0, format!("{}-0", self.name))],
            BackendKind::Ssh => {
                let ssh = self.spec.ssh_config.clone().unwrap_or_default();
                ssh.hosts
                    .iter()
                    .enumerate()
                    .map(|(i, h)| NodeTarget {
                        index: i,
                        name: format!("{}-{i}", self.name),
                        internal_ip: h.internal_ip.clone(),
                        address: Address::Ssh(SshAddress {
                            host: h.hostname.clone(),
                            port: h.port.or(ssh.port),
                            user: h.user.clone().or_else(|| ssh.user.clone()),
                            identity_file: h.identity_file.clone().or_else(|| ssh.identity_file.clone()),
                            proxy_jump: h
                                .proxy_jump
                                .as_ref()
                                .or(ssh.proxy_jump.as_ref())
                                .map(JumpTarget::from),
                        }),
                    })
                    .collect()
            }
            BackendKind::Gcp | BackendKind::Gke => vec![],
        }
    }
}

/// Read, parse and validate a fleet file. `Err` holds at least one error (and any
/// warnings found before it).
pub fn load(file: &Path) -> Result<Fleet, Vec<Diagnostic>> {
    let text = yaml::read_text(file).map_err(|e| vec![Diagnostic::from(e)])?;
    parse(file, &text)
}

/// Parse and validate fleet file text.
pub fn parse(file: &Path, text: &str) -> Result<Fleet, Vec<Diagnostic>> {
    // Every misfit of the file's shape at once (each at its place), not serde's first.
    let mut spec: FleetSpec = yaml::from_str_all(file, text)
        .map_err(|errs| errs.into_iter().map(Diagnostic::from).collect::<Vec<_>>())?;
    let mut v = Validator {
        file,
        text,
        out: vec![],
        kubeconfig: None,
    };
    let checked = v.check(&spec);
    let errors = v.out.iter().any(|d| d.severity == Severity::Error);
    // The kubeconfig a GKE fleet names, as the absolute path it was checked at: what
    // apply records, so no later command reads it from its own current folder.
    if let (Some(g), Some(k)) = (spec.gke.as_mut(), v.kubeconfig.take()) {
        g.kubeconfig = Some(k.to_string_lossy().into_owned());
    }
    match checked {
        Some((name, backend)) if !errors => Ok(Fleet {
            file: file.to_path_buf(),
            name,
            backend,
            applied: form::applied_form(text, &spec),
            spec,
            warnings: v.out,
        }),
        _ => Err(v.out),
    }
}

struct Validator<'a> {
    file: &'a Path,
    text: &'a str,
    out: Vec<Diagnostic>,
    /// A GKE fleet's `kubeconfig`, resolved from the fleet file's folder.
    kubeconfig: Option<PathBuf>,
}

/// The most nodes a fleet may have.
pub const MAX_NODES: u64 = 1024;

/// GCP resource names: a lowercase letter, then lowercase letters, digits and hyphens,
/// not ending in a hyphen. Kept to 40 characters so node and resource suffixes fit in 63.
pub fn valid_fleet_name(name: &str) -> bool {
    valid_name(name, 40)
}

/// A host name (RFC 1123 labels; `_` allowed, as ssh config aliases use it) or an IP
/// address literal: nothing a shell, an ssh config or known_hosts would read as more.
pub fn valid_host(h: &str) -> bool {
    if h.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    !h.is_empty()
        && h.len() <= 253
        && h.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && l.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
}

/// A GCP project id: 6 to 30 of lowercase letters, digits and hyphens (a domain-scoped
/// `example.com:proj` is allowed).
fn valid_project(p: &str) -> bool {
    let id = p.rsplit(':').next().unwrap_or(p);
    (6..=30).contains(&id.len()) && valid_name(id, 30)
}

/// A POSIX-portable login name.
pub fn valid_user(u: &str) -> bool {
    let mut c = u.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic() || f == '_')
        && u.len() <= 32
        && c.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// A Compute resource name (RFC 1035) of at most `max` characters.
fn valid_name(name: &str, max: usize) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= max
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && !name.ends_with('-')
}

impl Validator<'_> {
    fn push(&mut self, severity: Severity, path: &[&str], message: String) {
        self.out
            .push(Diagnostic::at(self.file, self.text, severity, path, message));
    }

    fn error(&mut self, path: &[&str], message: impl Into<String>) {
        self.push(Severity::Error, path, message.into());
    }

    fn warn(&mut self, path: &[&str], message: impl Into<String>) {
        self.push(Severity::Warning, path, message.into());
    }

    /// Check the spec; returns the fleet's name and backend when they could be decided.
    fn check(&mut self, s: &FleetSpec) -> Option<(String, BackendKind)> {
        if s.kind.is_none() {
            self.error(&["type"], "missing: a fleet file starts with `type: fleet`");
        }
        let name = match &s.name {
            None => {
                self.error(
                    &["name"],
                    "missing: name the fleet (lowercase letters, digits and hyphens)",
                );
                None
            }
            Some(n) if !valid_fleet_name(n) => {
                self.error(
                    &["name"],
                    format!(
                        "`{n}` is not a valid fleet name: expected a lowercase letter, then lowercase letters, digits or hyphens, at most 40, not ending in a hyphen"
                    ),
                );
                None
            }
            Some(n) => Some(n.clone()),
        };
        if let Some(p) = s.max_price {
            if !(p > 0.0 && p.is_finite()) {
                self.error(
                    &["max_price"],
                    format!("{p} is not a price: expected USD per hour above 0"),
                );
            }
        }
        for (field, present) in [
            ("env", s.env.is_some()),
            ("blocks", s.blocks.is_some()),
            ("retry", s.retry.is_some()),
            ("idle_duration", s.idle_duration.is_some()),
            ("termination_policy", s.termination_policy.is_some()),
            ("termination_idle_time", s.termination_idle_time.is_some()),
        ] {
            if present {
                self.warn(
                    &[field],
                    "accepted for dstack compatibility; flightdeck does not use it",
                );
            }
        }
        let backend = self.backend(s)?;
        match backend {
            BackendKind::Local => {
                if let Some(n) = s.nodes {
                    if n != spec::Range::exact(1) {
                        self.error(
                            &["nodes"],
                            format!("the local backend is this one machine: expected 1, got {n}"),
                        );
                    }
                }
            }
            BackendKind::Ssh => self.check_ssh(s),
            BackendKind::Gcp => self.check_gcp(s),
            BackendKind::Gke => self.check_gke(s),
        }
        Some((name?, backend))
    }

    fn backend(&mut self, s: &FleetSpec) -> Option<BackendKind> {
        let listed = s.backends.as_deref().unwrap_or(&[]);
        if listed.len() > 1 {
            self.error(
                &["backends"],
                "flightdeck brings a fleet up on one backend: list one of local, ssh, gcp",
            );
            return None;
        }
        if let Some(other) = listed.first().filter(|b| **b != BackendKind::Gke) {
            if s.gke.is_some() {
                self.error(
                    &["gke"],
                    format!("`gke` makes a GKE fleet, but `backends` says {}", other.as_str()),
                );
                return None;
            }
        }
        if s.gke.is_some() || listed.first() == Some(&BackendKind::Gke) {
            if s.gke.is_none() {
                self.error(
                    &["backends"],
                    "the gke backend needs a `gke` block: `project`, `location` and `cluster`, or a kubeconfig `context`",
                );
                return None;
            }
            if s.ssh_config.is_some() {
                self.error(
                    &["ssh_config"],
                    "a GKE fleet is reached through the Kubernetes API, not SSH: remove `ssh_config`",
                );
                return None;
            }
            return Some(BackendKind::Gke);
        }
        let kind = match (listed.first(), s.ssh_config.is_some()) {
            (None, true) | (Some(BackendKind::Ssh), true) => BackendKind::Ssh,
            (Some(BackendKind::Ssh), false) => {
                self.error(&["backends"], "the ssh backend needs `ssh_config` with `hosts`");
                return None;
            }
            (Some(other), true) => {
                self.error(
                    &["ssh_config"],
                    format!(
                        "`ssh_config` makes an SSH fleet, but `backends` says {}",
                        other.as_str()
                    ),
                );
                return None;
            }
            (Some(BackendKind::Local), false) => BackendKind::Local,
            (Some(BackendKind::Gcp), false) | (None, false) => BackendKind::Gcp,
            (Some(BackendKind::Gke), _) => BackendKind::Gke,
        };
        Some(kind)
    }

    fn check_ssh(&mut self, s: &FleetSpec) {
        let ssh = s.ssh_config.as_ref().expect("ssh backend has ssh_config");
        if ssh.hosts.is_empty() {
            self.error(&["ssh_config", "hosts"], "expected at least one host");
        }
        if let Some(n) = s.nodes {
            let count = ssh.hosts.len() as u64;
            let fits = n.min.is_none_or(|m| m <= count) && n.max.is_none_or(|m| m >= count);
            if !fits {
                self.error(
                    &["nodes"],
                    format!("{n} does not match the {count} hosts of ssh_config.hosts"),
                );
            }
        }
        // Every value that reaches a node's shell, ssh config or known_hosts is what it
        // says it is: a host name or address, a login name.
        if let Some(u) = &ssh.user {
            self.check_user(&["ssh_config", "user"], u);
        }
        if let Some(p) = &ssh.proxy_jump {
            self.check_host(&["ssh_config", "proxy_jump", "hostname"], &p.hostname);
            if let Some(u) = &p.user {
                self.check_user(&["ssh_config", "proxy_jump", "user"], u);
            }
        }
        for (i, h) in ssh.hosts.iter().enumerate() {
            let at = i.to_string();
            self.check_host(&["ssh_config", "hosts", &at], &h.hostname);
            if let Some(u) = &h.user {
                self.check_user(&["ssh_config", "hosts", &at], u);
            }
            if let Some(ip) = &h.internal_ip {
                if ip.parse::<std::net::IpAddr>().is_err() {
                    self.error(
                        &["ssh_config", "hosts", &at],
                        format!("internal_ip `{}` is not an IP address", printable(ip)),
                    );
                }
            }
            if let Some(p) = &h.proxy_jump {
                self.check_host(&["ssh_config", "hosts", &at], &p.hostname);
                if let Some(u) = &p.user {
                    self.check_user(&["ssh_config", "hosts", &at], u);
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        for h in &ssh.hosts {
            let key = (h.hostname.clone(), h.port.or(ssh.port).unwrap_or(22));
            if !seen.insert(key) {
                self.error(
                    &["ssh_config", "hosts"],
                    format!("`{}` is listed twice", h.hostname),
                );
            }
            if h.port == Some(0) || ssh.port == Some(0) {
                self.error(
                    &["ssh_config", "hosts"],
                    format!("`{}`: port 0 is not a port", h.hostname),
                );
            }
        }
        for (field, present) in [
            ("instance_types", s.instance_types.is_some()),
            ("regions", s.regions.is_some()),
            ("availability_zones", s.availability_zones.is_some()),
            ("spot_policy", s.spot_policy.is_some()),
        ] {
            if present {
                self.warn(&[field], "has no meaning for an SSH fleet of existing hosts");
            }
        }
    }

    fn check_host(&mut self, path: &[&str], host: &str) {
        if !valid_host(host) {
            self.error(
                path,
                format!(
                    "`{}` is not a host name or IP address (letters, digits, `-`, `.`; or an IPv4/IPv6 address)",
                    printable(host)
                ),
            );
        }
    }

    fn check_user(&mut self, path: &[&str], user: &str) {
        if !valid_user(user) {
            self.error(
                path,
                format!(
                    "user `{}` is not a login name (a letter or `_`, then letters, digits, `.`, `_`, `-`; at most 32)",
                    printable(user)
                ),
            );
        }
    }

    fn check_gke(&mut self, s: &FleetSpec) {
        let g = s.gke.as_ref().expect("gke backend has a gke block");
        let named = [&g.project, &g.location, &g.cluster];
        let by_name = named.iter().filter(|f| f.is_some()).count();
        match (by_name, &g.context) {
            (0, None) => self.error(
                &["gke"],
                "name the cluster: `project`, `location` and `cluster`, or a kubeconfig `context`",
            ),
            (1 | 2, _) => {
                for (field, v) in ["project", "location", "cluster"].iter().zip(named) {
                    if v.is_none() {
                        self.error(
                            &["gke"],
                            format!("missing `{field}`: a cluster is named by project, location and cluster together"),
                        );
                    }
                }
            }
            (3, Some(_)) => self.error(
                &["gke", "context"],
                "give either project/location/cluster or a kubeconfig context, not both",
            ),
            _ => {}
        }
        for (field, v) in [
            ("project", &g.project),
            ("location", &g.location),
            ("cluster", &g.cluster),
        ] {
            if let Some(v) = v {
                if !(valid_name(v, 63) || field == "project" && valid_project(v)) {
                    self.error(
                        &["gke", field],
                        format!("`{}` is not a valid {field} name: expected lowercase letters, digits and hyphens", printable(v)),
                    );
                }
            }
        }
        if let Some(ns) = &g.namespace {
            if !valid_name(ns, 63) && !ns.chars().all(|c| c.is_ascii_digit()) {
                self.error(
                    &["gke", "namespace"],
                    format!(
                        "`{}` is not a Kubernetes namespace name (RFC 1123 label)",
                        printable(ns)
                    ),
                );
            }
        }
        for (i, p) in g.node_pools.iter().flatten().enumerate() {
            if !valid_name(p, 40) {
                self.error(
                    &["gke", "node_pools", &i.to_string()],
                    format!(
                        "`{}` is not a node pool name: lowercase letters, digits and hyphens, at most 40",
                        printable(p)
                    ),
                );
            }
        }
        // The debug pods run this image privileged, with the node's `/`, PID and network
        // on every node: a fleet file that picks another image than the default says
        // so wherever it is read (`fleet validate`, `plan`, `apply`).
        if let Some(image) = g
            .debug_image
            .as_deref()
            .filter(|i| *i != crate::cloud::gke::DEFAULT_DEBUG_IMAGE)
        {
            let pin = if image.contains("@sha256:") {
                String::new()
            } else {
                "; pin it by digest (`IMAGE@sha256:…`) so a pushed tag cannot change it".into()
            };
            self.warn(
                &["gke", "debug_image"],
                format!(
                    "the debug pods on every node run `{}` privileged, with the node's / mounted and its PID and network namespaces (default `{}`){pin}",
                    printable(image),
                    crate::cloud::gke::DEFAULT_DEBUG_IMAGE
                ),
            );
        }
        if let Some(t) = &g.topology {
            if let Err(e) = t.annotation() {
                self.error(&["gke", "topology"], e);
            }
        }
        if let Some(nets) = &g.networks {
            for (i, n) in nets.iter().enumerate() {
                if !valid_subdomain(n) {
                    self.error(
                        &["gke", "networks", &i.to_string()],
                        format!(
                            "`{}` is not a Network name: lowercase letters, digits, `-` and `.`",
                            printable(n)
                        ),
                    );
                }
            }
            use crate::gpudirect::GpuDirect;
            let flavour = s.network.as_ref().and_then(|n| n.gpudirect);
            let want = match flavour {
                Some(GpuDirect::Tcpx) => Some(4),
                Some(GpuDirect::Tcpxo | GpuDirect::Rdma) => Some(8),
                _ => None,
            };
            if let Some(w) = want.filter(|w| *w != nets.len()) {
                self.error(
                    &["gke", "networks"],
                    format!(
                        "{} network(s) named; the {} pods attach {w} GPU NICs (one Network each, in NIC order)",
                        nets.len(),
                        flavour.map(|f| format!("{f:?}")).unwrap_or_default()
                    ),
                );
            }
        }
        if let Some(sel) = &g.selector {
            if let Err(e) = crate::cloud::gke::selector::parse(sel) {
                self.error(&["gke", "selector"], e);
            }
        }
        if let Some(n) = s.nodes {
            if n.min.into_iter().chain(n.max).any(|m| m > MAX_NODES) {
                self.error(&["nodes"], format!("{n}: at most {MAX_NODES} nodes per fleet"));
            }
        }
        if let Some(d) = s.flex_start {
            if !(600..=604_800).contains(&d.0) {
                self.error(
                    &["flex_start"],
                    format!(
                        "{}s: DWS flex-start runs between 10 minutes and 7 days (600..604800 s)",
                        d.0
                    ),
                );
            }
        }
        for (field, present) in [
            ("instance_types", s.instance_types.is_some()),
            ("regions", s.regions.is_some()),
            ("availability_zones", s.availability_zones.is_some()),
            ("spot_policy", s.spot_policy.is_some()),
            ("reservation", s.reservation.is_some()),
            ("placement", s.placement.is_some()),
        ] {
            if present {
                self.warn(
                    &[field],
                    "a GKE fleet uses the cluster's node pools as they are; their provisioning is GKE's: ignored",
                );
            }
        }
        self.check_kubeconfig(g);
    }

    /// A GKE fleet's kubeconfig: resolved from the fleet file's folder, read only when no
    /// one but the operator or root could have written it, and shown with its credential
    /// plugin (a warning); a plugin of a kubeconfig the file names is an error unless
    /// `allow_exec_plugin` allows it.
    fn check_kubeconfig(&mut self, g: &spec::Gke) {
        use crate::cloud::gke::cluster;
        if g.allow_exec_plugin.is_some() {
            self.error(
                &["gke", "allow_exec_plugin"],
                "a fleet file cannot allow the kubeconfig it names to run a program on your machine (it would vouch for itself): allow the plugin's whole command line, as `fleet plan` shows it, in your own config (`flightdeck config path`): `gke: {allow_exec_plugins: [...]}`",
            );
        }
        // The operator's, from their config; never the fleet file's.
        let opt = cluster::operator_opt_in();
        let Some(written) = &g.kubeconfig else {
            return;
        };
        if written.trim().is_empty() || written.chars().any(char::is_control) {
            self.error(
                &["gke", "kubeconfig"],
                format!("`{}` is not a file path", printable(written)),
            );
            return;
        }
        let path = cluster::resolve_kubeconfig(self.file, written);
        self.kubeconfig = Some(path.clone());
        let Some(ctx) = &g.context else {
            self.warn(
                &["gke", "kubeconfig"],
                "not read: the cluster is named by project, location and cluster (Application Default Credentials)",
            );
            return;
        };
        let own = cluster::is_default_kubeconfig(&path);
        match cluster::load_kubeconfig(&path, own, ctx) {
            Err(e) if e.missing => self.warn(
                &["gke", "kubeconfig"],
                format!(
                    "{}: not found here; apply reads it (a relative path is taken from the fleet file's folder)",
                    printable(&path.display().to_string())
                ),
            ),
            Err(e) => self.error(&["gke", "kubeconfig"], e.message),
            Ok(k) => match k.permit(&opt) {
                Ok(()) => self.warn(&["gke", "kubeconfig"], k.summary(&opt)),
                Err(why) => self.error(&["gke", "kubeconfig"], why),
            },
        }
    }

    fn check_gcp(&mut self, s: &FleetSpec) {
        if s.nodes.is_none() {
            self.error(&["nodes"], "missing: how many VMs (e.g. `nodes: 2`)");
        }
        let has_gpu = s.resources.as_ref().is_some_and(|r| r.gpu.is_some());
        if s.instance_types.is_none() && !has_gpu {
            self.error(
                &["resources"],
                "a GCP fleet needs `instance_types` (e.g. [a3-megagpu-8g]) or `resources.gpu` (e.g. \"H100:8\")",
            );
        }
        if let Some(n) = s.nodes {
            if n.min == Some(0) && n.max == Some(0) {
                self.error(&["nodes"], "0 nodes: expected at least 1");
            }
            if n.min.is_none() {
                self.error(&["nodes"], format!("{n}: a GCP fleet needs a minimum node count"));
            }
            if n.min.into_iter().chain(n.max).any(|m| m > MAX_NODES) {
                self.error(
                    &["nodes"],
                    format!(
                        "{n}: at most {MAX_NODES} nodes per fleet (Google's GPU quotas and compact placement groups are far smaller; split a larger cluster into fleets)"
                    ),
                );
            }
        }
        if let Some(d) = s.flex_start {
            if !(600..=604_800).contains(&d.0) {
                self.error(
                    &["flex_start"],
                    format!(
                        "{}s: flex-start VMs run between 10 minutes and 7 days (600..604800 s)",
                        d.0
                    ),
                );
            }
            if matches!(
                s.spot_policy,
                Some(spec::SpotPolicy::Spot | spec::SpotPolicy::Auto)
            ) {
                self.error(
                    &["spot_policy"],
                    "flex-start VMs are not Spot VMs: drop `spot_policy` or set it to on-demand",
                );
            }
        }
        if let Some(w) = s.flex_wait {
            if s.flex_start.is_none() {
                self.error(
                    &["flex_wait"],
                    "only flex-start fleets wait in a queue: set `flex_start` too",
                );
            } else if !(60..=7_200).contains(&w.0) {
                self.error(
                    &["flex_wait"],
                    format!(
                        "{}s: a flex-start request waits between 1 minute and 2 hours (60..7200 s)",
                        w.0
                    ),
                );
            }
        }
        if let Some(d) = s.placement_max_distance {
            if !(1..=3).contains(&d) {
                self.error(
                    &["placement_max_distance"],
                    format!("{d}: expected 1, 2 or 3 (Google's maxDistance)"),
                );
            } else if s.placement != Some(Placement::Cluster) {
                self.error(
                    &["placement_max_distance"],
                    "applies to a compact placement: set `placement: cluster` too",
                );
            }
        }
        if let Some(r) = &s.reservation {
            if !valid_name(r, 63) {
                self.error(
                    &["reservation"],
                    format!("`{r}` is not a reservation name: expected a lowercase letter, then lowercase letters, digits or hyphens (at most 63)"),
                );
            }
            if s.flex_start.is_some() {
                self.error(
                    &["reservation"],
                    "flex-start VMs consume no reservation (Google requires NO_RESERVATION): drop one of the two",
                );
            }
            if matches!(s.spot_policy, Some(spec::SpotPolicy::Spot)) {
                self.error(
                    &["reservation"],
                    "Spot VMs consume no reservation: set spot_policy to on-demand (or drop it)",
                );
            }
        }
        let net = s.network.clone().unwrap_or_default();
        let mut flavours = Vec::new();
        for (i, mt) in s.instance_types.iter().flatten().enumerate() {
            match crate::cloud::gcp::layout::resolve(net.gpudirect, mt) {
                Ok(f) => flavours.push(f),
                Err(e) => {
                    let at: &[&str] = if yaml::locate(self.text, &["network", "gpudirect"]).is_some() {
                        &["network", "gpudirect"]
                    } else {
                        &["instance_types"]
                    };
                    self.error(at, format!("instance_types[{i}]: {e}"));
                }
            }
        }
        if let Some(vpcs) = &net.data_vpcs {
            for f in &flavours {
                let want = crate::cloud::gcp::layout::profile("", *f).data_nics as usize;
                if vpcs.len() != want {
                    self.error(
                        &["network", "data_vpcs"],
                        format!(
                            "{} VPCs listed, but {} needs {want} (one per data NIC)",
                            vpcs.len(),
                            if *f == crate::catalog::GpuDirect::None {
                                "GPUDirect off".to_string()
                            } else {
                                format!("GPUDirect-{}", f.label())
                            }
                        ),
                    );
                    break;
                }
            }
        }
        if net.roce_vpc.is_some() && flavours.iter().any(|f| *f != crate::catalog::GpuDirect::Rdma) {
            self.error(
                &["network", "roce_vpc"],
                "a RoCE VPC is for RDMA machine types (a3-ultragpu-8g, a4-highgpu-8g) only",
            );
        }
    }
}

#[cfg(test)]
/// `n` nodes `lab-0`.. at `10.0.0.1`.., for tests.
pub(crate) fn lab_nodes(n: usize) -> Vec<NodeTarget> {
    (0..n)
        .map(|i| NodeTarget {
            index: i,
            name: format!("lab-{i}"),
            internal_ip: None,
            address: Address::Ssh(SshAddress {
                host: format!("10.0.0.{}", i + 1),
                port: None,
                user: None,
                identity_file: None,
                proxy_jump: None,
            }),
        })
        .collect()
}

/// The example fleet files of the repository's `fleets/`, built into the binary: a
/// bastion with only the binary has them too (`flightdeck fleet example NAME`).
pub const EXAMPLES: &[(&str, &str)] = &[
    ("local", include_str!("../../fleets/local.yaml")),
    ("ssh-hosts", include_str!("../../fleets/ssh-hosts.yaml")),
    ("a3-high-tcpx", include_str!("../../fleets/a3-high-tcpx.yaml")),
    ("a3-mega-tcpxo", include_str!("../../fleets/a3-mega-tcpxo.yaml")),
    ("a3-ultra-rdma", include_str!("../../fleets/a3-ultra-rdma.yaml")),
    ("a4-rdma", include_str!("../../fleets/a4-rdma.yaml")),
];

#[cfg(test)]
mod tests {

    /// D16: a fleet file that picks the debug pods' image (privileged, the node's / on
    /// every node) is warned about at its line, with the advice to pin it by digest.
    #[test]
    fn a_debug_image_of_the_fleet_files_choosing_is_warned_about() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("g.yaml");
        let base = "type: fleet\nname: g\ngke:\n  project: p\n  location: us-east4\n  cluster: c\n";
        let warnings = |extra: &str| -> Vec<String> {
            parse(&file, &format!("{base}{extra}"))
                .unwrap()
                .warnings
                .iter()
                .map(|d| d.to_string())
                .collect()
        };
        assert!(warnings("").is_empty());
        assert!(warnings("  debug_image: ubuntu:24.04\n").is_empty());
        let w = warnings("  debug_image: evil/root:latest\n");
        let at = file.display();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].starts_with(&format!("{at}:7:3: warning: gke.debug_image: the debug pods on every node run `evil/root:latest` privileged")), "{w:?}");
        assert!(w[0].contains("pin it by digest"), "{w:?}");
        let w = warnings("  debug_image: ubuntu@sha256:0123456789abcdef\n");
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(!w[0].contains("pin it by digest"), "{w:?}");
    }
    #[test]
    fn nodes_are_picked_by_index_range_name_and_pattern() {
        let all = super::lab_nodes(12);
        let pick = |items: &[&str]| {
            super::select_nodes(&all, &items.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .map(|v| v.iter().map(|n| n.index).collect::<Vec<_>>())
        };
        assert_eq!(pick(&["0", "2"]), Ok(vec![0, 2]));
        assert_eq!(
            pick(&["9-11", "3", "10"]),
            Ok(vec![3, 9, 10, 11]),
            "fleet order, once each"
        );
        assert_eq!(pick(&["lab-4", "10.0.0.6"]), Ok(vec![4, 5]));
        assert_eq!(pick(&["lab-1*"]), Ok(vec![1, 10, 11]));
        assert_eq!(pick(&["*-1"]), Ok(vec![1]));
        assert_eq!(pick(&["10.0.0.1*"]), Ok(vec![0, 9, 10, 11]));
        assert!(pick(&["12"])
            .unwrap_err()
            .contains("`12` is no node of the fleet (nodes 0..11, named lab-[0-11])"));
        assert!(pick(&["lab-44"]).unwrap_err().contains("did you mean `lab-4`?"));
        assert!(pick(&["5-2"]).unwrap_err().contains("low to high"));
        assert_eq!(pick(&[]), Ok(vec![]));
    }

    /// Hostile review D15: a GKE node name whose numeric suffix overflows u64 must not
    /// panic the "no node of the fleet" message (it lists the fleet's names compressed).
    #[test]
    fn a_numeric_suffix_past_u64_is_named_as_it_is() {
        let huge = "gke-c-pool-1-999999999999999999999999";
        let mut all = super::lab_nodes(3);
        all[1].name = huge.into();
        let items = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let picked = super::select_nodes(&all, &items(&[huge])).unwrap();
        assert_eq!(picked.iter().map(|n| n.index).collect::<Vec<_>>(), vec![1]);
        let e = super::select_nodes(&all, &items(&["gke-c-pool-1-7"])).unwrap_err();
        assert!(
            e.contains(&format!("(nodes 0..2, named lab-[0,2],{huge})")),
            "{e}"
        );
    }

    use super::*;

    fn ok(text: &str) -> Fleet {
        parse(Path::new("f.yaml"), text).unwrap_or_else(|d| panic!("{d:?}"))
    }

    fn errors(text: &str) -> Vec<String> {
        parse(Path::new("f.yaml"), text)
            .err()
            .unwrap_or_default()
            .into_iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| d.to_string())
            .collect()
    }

    #[test]
    fn a_million_nodes_is_refused_before_any_plan() {
        let e = errors("type: fleet\nname: a\nnodes: 1000000\ninstance_types: [a3-megagpu-8g]\n");
        assert!(
            e.iter()
                .any(|m| m.starts_with("f.yaml:3:1: nodes: 1000000: at most 1024 nodes per fleet")),
            "{e:?}"
        );
        assert!(errors("type: fleet\nname: a\nnodes: 1024\ninstance_types: [a3-megagpu-8g]\n").is_empty());
    }

    #[test]
    fn flex_wait_max_distance_and_reservation_are_checked_where_they_are() {
        let base = "type: fleet\nname: a\nnodes: 2\ninstance_types: [a4-highgpu-8g]\n";
        let f = ok(&format!("{base}flex_start: 24h\nflex_wait: 90m\n"));
        assert_eq!(f.spec.flex_wait, Some(spec::RunDuration(5400)));
        let e = errors(&format!("{base}flex_start: 24h\nflex_wait: 3h\n"));
        assert!(
            e.iter().any(|m| m.starts_with(
                "f.yaml:6:1: flex_wait: 10800s: a flex-start request waits between 1 minute and 2 hours"
            )),
            "{e:?}"
        );
        let e = errors(&format!("{base}flex_wait: 10m\n"));
        assert!(
            e.iter()
                .any(|m| m.contains("flex_wait: only flex-start fleets wait")),
            "{e:?}"
        );
        let f = ok(&format!("{base}placement: cluster\nplacement_max_distance: 2\n"));
        assert_eq!(f.spec.placement_max_distance, Some(2));
        let e = errors(&format!("{base}placement: cluster\nplacement_max_distance: 4\n"));
        assert!(
            e.iter()
                .any(|m| m.starts_with("f.yaml:6:1: placement_max_distance: 4: expected 1, 2 or 3")),
            "{e:?}"
        );
        let e = errors(&format!("{base}placement_max_distance: 1\n"));
        assert!(
            e.iter().any(|m| m.contains("set `placement: cluster` too")),
            "{e:?}"
        );
        let f = ok(&format!("{base}reservation: a4-res-1\n"));
        assert_eq!(f.spec.reservation.as_deref(), Some("a4-res-1"));
        assert!(
            f.warnings.iter().all(|w| !w.message.contains("reservation")),
            "acted on, not ignored"
        );
        let e = errors(&format!("{base}reservation: Bad_Name\n"));
        assert!(
            e.iter()
                .any(|m| m.starts_with("f.yaml:5:1: reservation: `Bad_Name` is not a reservation name")),
            "{e:?}"
        );
        let e = errors(&format!("{base}reservation: r1\nflex_start: 24h\n"));
        assert!(
            e.iter()
                .any(|m| m.contains("flex-start VMs consume no reservation")),
            "{e:?}"
        );
    }

    /// A node keeps state.json's flat shape whatever its address; a Kubernetes node's
    /// `kube` part comes back as its address.
    #[test]
    fn nodes_serialize_flat_and_read_back() {
        let k = crate::cloud::gke::KubeNode::for_tests("gke-a3u-pool-1-abcd");
        let node = NodeTarget {
            index: 1,
            name: "a3u-1".into(),
            internal_ip: Some("10.0.0.7".into()),
            address: Address::Kube {
                host: "10.0.0.7".into(),
                node: k.clone(),
            },
        };
        let v = serde_json::to_value(&node).unwrap();
        assert_eq!(v["host"], "10.0.0.7");
        assert_eq!(v["port"], serde_json::Value::Null);
        assert_eq!(v["kube"]["node"], "gke-a3u-pool-1-abcd");
        assert_eq!(serde_json::from_value::<NodeTarget>(v).unwrap(), node);
        let local = serde_json::to_value(NodeTarget::local(0, "l-0")).unwrap();
        assert_eq!(
            local,
            serde_json::json!({"index": 0, "name": "l-0", "host": "localhost", "port": null, "user": null, "identity_file": null, "proxy_jump": null, "internal_ip": null})
        );
    }

    #[test]
    fn dstack_ssh_fleet_as_is() {
        let f = ok("type: fleet\nname: my-fleet\nplacement: cluster\nssh_config:\n  user: ubuntu\n  identity_file: ~/.ssh/worker_node_key\n  hosts:\n    - 3.255.177.51\n    - hostname: 3.255.177.52\n      port: 2222\n      user: root\n  proxy_jump:\n    hostname: 3.255.177.50\n    user: ubuntu\n    identity_file: ~/.ssh/head_node_key\n");
        assert_eq!(f.backend, BackendKind::Ssh);
        let n = f.node_targets();
        assert_eq!(n.len(), 2);
        assert_eq!(
            (n[0].host(), n[0].user(), n[0].port()),
            ("3.255.177.51", Some("ubuntu"), None)
        );
        assert_eq!((n[1].user(), n[1].port()), (Some("root"), Some(2222)));
        let ssh = |i: usize| n[i].ssh().unwrap();
        assert_eq!(ssh(1).identity_file.as_deref(), Some("~/.ssh/worker_node_key"));
        assert_eq!(ssh(0).proxy_jump.as_ref().unwrap().host, "3.255.177.50");
        assert_eq!(n[1].name, "my-fleet-1");
    }

    #[test]
    fn dstack_cloud_fleet_with_resources() {
        let f = ok("type: fleet\nname: b200\nnodes: 2\nplacement: cluster\nbackends: [gcp]\nregions: [us-central1]\nspot_policy: on-demand\nresources:\n  gpu: B200:8\n  disk: 500GB..\nidle_duration: 1h\n");
        assert_eq!(f.backend, BackendKind::Gcp);
        let gpu = f.spec.resources.as_ref().unwrap().gpu.clone().unwrap();
        assert_eq!(gpu.names, vec!["B200"]);
        assert_eq!(gpu.count, spec::Range::exact(8));
        assert_eq!(f.warnings.len(), 1, "idle_duration is accepted but unused");
        assert!(
            f.warnings[0]
                .to_string()
                .starts_with("f.yaml:11:1: warning: idle_duration"),
            "{}",
            f.warnings[0]
        );
    }

    #[test]
    fn gpu_specs() {
        let g: spec::GpuSpec = "A100:40GB:2".parse().unwrap();
        assert_eq!(
            (g.names.clone(), g.count, g.memory.unwrap().min_gb),
            (vec!["A100".to_string()], spec::Range::exact(2), Some(40.0))
        );
        let g: spec::GpuSpec = "nvidia:H100,H200:8".parse().unwrap();
        assert_eq!(g.names, vec!["H100", "H200"]);
        let g: spec::GpuSpec = "24GB..:1..2".parse().unwrap();
        assert_eq!(
            (g.count.min, g.count.max, g.memory.unwrap().max_gb),
            (Some(1), Some(2), None)
        );
        assert!("H100:8:4".parse::<spec::GpuSpec>().is_err());
        assert!("H100::8".parse::<spec::GpuSpec>().is_err());
    }

    #[test]
    fn unknown_field_is_located_with_suggestion() {
        let e = errors("type: fleet\nname: a\nssh_config:\n  hosts: [h1]\n  identity_fle: k\n");
        assert_eq!(e.len(), 1);
        assert!(
            e[0].starts_with("f.yaml:5:3: ssh_config: unknown field `identity_fle`"),
            "{}",
            e[0]
        );
        assert!(e[0].ends_with("did you mean `identity_file`?"), "{}", e[0]);
        let e = errors("type: fleet\nname: a\nnodes: 2\nresources:\n  gpu: H100:eight\n");
        assert!(e[0].starts_with("f.yaml:5:8: resources.gpu: "), "{}", e[0]);
        let e = errors("type: fleet\nname: a\nnodes: 4..2\ninstance_types: [x]\n");
        assert!(
            e[0].contains("f.yaml:3:8: nodes: `4..2`: the minimum 4 is above the maximum 2"),
            "{}",
            e[0]
        );
        let e = errors("type: fleet\nname: a\nssh_config:\n  hosts:\n    - hostname: h\n      prot: 22\n");
        assert!(
            e[0].starts_with("f.yaml:6:7: ssh_config.hosts[0]: unknown field `prot`"),
            "{}",
            e[0]
        );
        let e = errors("type: fleet\nname: a\nbackends: [aws]\n");
        assert!(
            e[0].contains("unknown value `aws`, expected one of `local`, `ssh`, `gcp`"),
            "{}",
            e[0]
        );
    }

    #[test]
    fn semantic_errors_are_located() {
        let e = errors("type: fleet\nname: My_Fleet\nbackends: [local]\n");
        assert!(
            e[0].starts_with("f.yaml:2:1: name: `My_Fleet` is not a valid fleet name"),
            "{e:?}"
        );
        let e = errors("name: a\nbackends: [local]\nnodes: 3\n");
        assert!(
            e.iter().any(|m| m.starts_with("f.yaml:1:1: type: missing")),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|m| m.starts_with("f.yaml:3:1: nodes: the local backend is this one machine")),
            "{e:?}"
        );
        let e = errors("type: fleet\nname: a\nnodes: 3\nssh_config:\n  hosts:\n    - h1\n    - h1\n");
        assert!(
            e.iter()
                .any(|m| m.starts_with("f.yaml:3:1: nodes: 3 does not match the 2 hosts")),
            "{e:?}"
        );
        assert!(e.iter().any(|m| m.contains("`h1` is listed twice")), "{e:?}");
        let e = errors("type: fleet\nname: a\nbackends: [local, gcp]\n");
        assert!(
            e[0].starts_with("f.yaml:3:1: backends: flightdeck brings a fleet up on one backend"),
            "{e:?}"
        );
        let e = errors("type: fleet\nname: a\nnodes: 1\n");
        assert!(
            e[0].contains("resources: a GCP fleet needs `instance_types`"),
            "{e:?}"
        );
    }

    #[test]
    fn gpudirect_flavours_are_checked_against_the_machine_type() {
        let e = errors(
            "type: fleet\nname: a\nnodes: 2\ninstance_types: [a3-megagpu-8g]\nnetwork:\n  gpudirect: tcpx\n",
        );
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with("f.yaml:6:3: network.gpudirect: instance_types[0]: a3-megagpu-8g has GPUDirect-TCPXO, not TCPX"),
            "{e:?}"
        );
        let e = errors(
            "type: fleet\nname: a\nnodes: 1\ninstance_types: [g2-standard-8]\nnetwork:\n  gpudirect: rdma\n",
        );
        assert!(
            e[0].contains("g2-standard-8 has no GPUDirect networking, not RDMA"),
            "{e:?}"
        );
        let e = errors("type: fleet\nname: a\nnodes: 1\ninstance_types: [a3-highgpu-8g]\nnetwork:\n  data_vpcs: [a, b]\n");
        assert!(
            e[0].starts_with("f.yaml:6:3: network.data_vpcs: 2 VPCs listed, but GPUDirect-TCPX needs 4"),
            "{e:?}"
        );
        let e = errors("type: fleet\nname: a\nnodes: 1\ninstance_types: [a3-megagpu-8g]\nflex_start: 5m\nspot_policy: spot\n");
        assert!(
            e.iter().any(|m| m.starts_with("f.yaml:5:1: flex_start: 300s")),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|m| m.contains("spot_policy: flex-start VMs are not Spot VMs")),
            "{e:?}"
        );
        ok("type: fleet\nname: a\nnodes: 2\ninstance_types: [a3-megagpu-8g]\nnetwork:\n  gpudirect: none\n");
        let f = ok("type: fleet\nname: a\nnodes: 2\ninstance_types: [a4-highgpu-8g]\nflex_start: 7d\n");
        assert_eq!(f.spec.flex_start, Some(spec::RunDuration(604_800)));
    }

    #[test]
    fn dstack_gcp_cluster_files_validate() {
        for f in ["a4-fleet.dstack.yml", "a3mega-fleet.dstack.yml"] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/dstack")
                .join(f);
            let fleet = load(&path).unwrap_or_else(|d| panic!("{f}: {d:?}"));
            assert_eq!(fleet.backend, BackendKind::Gcp, "{f}");
            assert!(fleet.warnings.is_empty(), "{f}: {:?}", fleet.warnings);
        }
    }

    #[test]
    fn a_gke_fleet_files_kubeconfig_is_taken_from_its_folder_checked_and_shown() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let kc = dir.path().join("kubeconfig");
        std::fs::write(
            &kc,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:9\ncontexts:\n- name: team\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user:\n    exec:\n      command: sh\n      args: [\"-c\", \"id > pwned\"]\n",
        )
        .unwrap();
        std::fs::set_permissions(&kc, std::fs::Permissions::from_mode(0o600)).unwrap();
        let file = dir.path().join("gke.yaml");
        let base = "type: fleet\nname: g\ngke:\n  context: team\n  kubeconfig: kubeconfig\n";
        let diags = |text: &str| -> Vec<String> {
            match parse(&file, text) {
                Ok(f) => f.warnings.iter().map(|d| d.to_string()).collect(),
                Err(d) => d.iter().map(|d| d.to_string()).collect(),
            }
        };
        let at = file.display().to_string();
        let shown = kc.display().to_string();
        let e = diags(base);
        assert!(parse(&file, base).is_err());
        assert!(
            e[0].starts_with(&format!("{at}:5:3: gke.kubeconfig: kubeconfig {shown} (named by the fleet file), context `team`, user `u`: its exec credential plugin would run `sh -c 'id > pwned'` on this machine as you. A kubeconfig that a fleet file names runs no local command unless you allow that command line in your own config (")),
            "{e:?}"
        );
        assert!(
            e[0].contains(
                "`gke: {allow_exec_plugins: [\"sh -c 'id > pwned'\"]}`; a fleet file cannot allow it"
            ),
            "{e:?}"
        );
        // The fleet file cannot allow it, whatever it says (hostile review 3, H1).
        for v in ["sh", "true", "gke-gcloud-auth-plugin", "3"] {
            let e = diags(&format!("{base}  allow_exec_plugin: {v}\n"));
            assert!(
                e.iter().any(|d| d.starts_with(&format!(
                    "{at}:6:3: gke.allow_exec_plugin: a fleet file cannot allow the kubeconfig it names to run a program on your machine"
                ))),
                "{v}: {e:?}"
            );
            assert!(parse(&file, &format!("{base}  allow_exec_plugin: {v}\n")).is_err());
        }
        // The path is kept absolute for apply to record.
        let plain =
            "type: fleet\nname: g\ngke:\n  context: team\n  kubeconfig: kubeconfig\n  node_pools: [p]\n";
        std::fs::write(
            &kc,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:9\ncontexts:\n- name: team\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user:\n    token: t\n",
        )
        .unwrap();
        let f = parse(&file, plain).unwrap();
        assert_eq!(
            f.spec.gke.as_ref().unwrap().kubeconfig.as_deref(),
            Some(shown.as_str())
        );
        // Others may write it: refused where it is named.
        std::fs::set_permissions(&kc, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = diags(base);
        assert_eq!(
            e[0],
            format!("{at}:5:3: gke.kubeconfig: Bad owner or permissions on {shown}: writable by group and others (mode 0666): `chmod go-w {shown}`")
        );
        // Not there: a warning (apply reads it), the path it was looked for at.
        let e = diags("type: fleet\nname: g\ngke:\n  context: team\n  kubeconfig: sub/kc\n");
        assert!(
            e[0].contains(&format!(
                "{}: not found here",
                dir.path().join("sub/kc").display()
            )),
            "{e:?}"
        );
    }

    #[test]
    fn shipped_examples_validate() {
        for f in [
            "local.yaml",
            "ssh-hosts.yaml",
            "a3-high-tcpx.yaml",
            "a3-mega-tcpxo.yaml",
            "a3-ultra-rdma.yaml",
            "a4-rdma.yaml",
        ] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fleets").join(f);
            let fleet = load(&path).unwrap_or_else(|d| panic!("{f}: {d:?}"));
            assert!(fleet.warnings.is_empty(), "{f}: {:?}", fleet.warnings);
        }
    }
}
