//! Which transport NCCL used, read from its `NCCL_DEBUG=INFO` lines (the channels, the
//! network and the net plugin it loaded), and the one rule that judges it against a run's
//! GPUDirect profile ([`check_transport`]: the verdict's, and the loud warning's).
//!
//! What NCCL prints (2.18 to 2.28) and what we read from it:
//! - `Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM` (or `P2P/IPC`, `P2P/direct pointer`,
//!   `P2P/MNNVL`, with `/read`): GPU-to-GPU inside a node; `via SHM/direct/direct`: through
//!   host memory; `[send] via NET/IB/0/GDRDMA`, `via NET/Socket/0`, `via NET/gIB/3/GDRDMA`:
//!   across nodes with that network plugin.
//! - `Using network IB` / `Assigned NET plugin Socket to comm`: the network NCCL picked
//!   (used only when ranks span nodes; a one-node run prints it too).
//! - `comm 0x.. rank 0 nRanks 16 nNodes 2 ...`: how many nodes.
//! - The net plugin (NCCL's `src/net.cc` up to 2.25, `src/plugin/net.cc`,
//!   `src/plugin/plugin_open.cc` and `src/plugin/net/net_v*.cc` from 2.26):
//!   `NET/Plugin: Loaded net plugin gIB (v8)` (the plugin's own name; `coll`, `collnet`
//!   and `gin` plugins are other things), `NET/Plugin: Plugin name set by env to
//!   libnccl-net-gIB.so` (2.21 on: the library opened; 2.18-2.20 print `Plugin name set
//!   by env to X` before trying it), `Successfully loaded external plugin libnccl-net.so`
//!   (2.27 on). No plugin: `NET/Plugin : Plugin load (libnccl-net.so) returned 2 : ...`
//!   then `NET/Plugin : No plugin found, using internal implementation` (2.18),
//!   `NET/Plugin : dlerror=... No plugin found (libnccl-net.so), using internal
//!   implementation` (2.19-2.20), `NET/Plugin: No plugin found (libnccl-net.so)` (2.21),
//!   `NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.`
//!   (2.22-2.25), `NET/Plugin: Could not find: libnccl-net.so. ` (2.26-2.27),
//!   `NET/Plugin: Could not find: libnccl-net.so` (2.28); a library that exists but does
//!   not load: `NET/Plugin : Plugin load returned 2 : ...` (2.19-2.22),
//!   `NET/Plugin: <dlerror>` (2.26 on). `TUNER/Plugin`, `PROFILER/Plugin` and
//!   `ENV/Plugin` lines are other plugins.
//! - No network at all for the run: `NCCL WARN Error: network gIB not found.` (NCCL_NET
//!   names a network no plugin offers, up to 2.26) or `NCCL WARN Failed to initialize any
//!   NET plugin` (2.27 on, the same case and a plugin that did not initialise).
//! - `NET/Socket : Using [0]eth0:10.0.0.2<0>` and `NET/IB : Using [0]mlx5_0:1/RoCE ...`
//!   list the devices of NCCL's internal transports when they initialise: not a sign
//!   that they carried anything.
//! - Whether P2P runs over NVLink or PCIe is not in the channel lines. NVLink is known from
//!   a GRAPH line `Pattern 4, ..., type NVL/PIX` (intra-node part `NVL`), from NVLink SHARP
//!   (`via NVLS`, `N nvls channels` with N > 0, `NVLS multicast support is available`), from
//!   `P2P/MNNVL`, or from an `MNNVL busId .. state 3` line: NCCL prints that only for a GPU
//!   whose NVLink fabric (NVSwitch) NVML reports, and state 3 means the fabric is up.
//!   PCIe is known only from a GRAPH pattern whose intra-node part is PIX, PXB, PHB or SYS.

use serde::Serialize;
use std::fmt;

/// The link under NCCL's P2P transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum P2pLink {
    NvLink,
    Pcie,
    /// P2P seen, the link not named in the log.
    Unknown,
}

/// A NCCL network plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Net {
    /// NCCL's built-in InfiniBand / RoCE verbs transport (GPUDirect RDMA capable).
    Ib,
    /// NCCL's built-in TCP sockets: no GPUDirect.
    Socket,
    /// Google's GPUDirect-TCPX plugin (a3-highgpu-8g, a3-edgegpu-8g).
    GpuDirectTcpx,
    /// Google's GPUDirect-TCPXO plugin, named FasTrak (a3-megagpu-8g).
    FasTrak,
    /// Google's gIB plugin: IB verbs over RoCE (a3-ultragpu-8g, a4-highgpu-8g).
    Gib,
    /// Any other plugin, by the name NCCL printed (e.g. `AWS Libfabric`).
    Other(String),
}

impl Net {
    /// Classify a plugin name as NCCL prints it: `IB`, `Socket`, `GPUDirectTCPX_v7`,
    /// `FasTrak`, `gIB`.
    pub fn from_name(name: &str) -> Net {
        let base = match name.rsplit_once("_v") {
            Some((b, v)) if super::line::is_digits(v) => b,
            _ => name,
        };
        match base.to_ascii_lowercase().as_str() {
            "ib" => Net::Ib,
            "socket" => Net::Socket,
            "gpudirecttcpx" => Net::GpuDirectTcpx,
            "fastrak" | "gpudirecttcpxo" => Net::FasTrak,
            "gib" => Net::Gib,
            _ => Net::Other(name.to_string()),
        }
    }

    /// Whether this network moves data GPU to NIC without a bounce through host memory.
    pub fn is_gpudirect(&self) -> bool {
        matches!(self, Net::Ib | Net::GpuDirectTcpx | Net::FasTrak | Net::Gib)
    }
}

impl fmt::Display for Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Net::Ib => f.write_str("NET/IB"),
            Net::Socket => f.write_str("NET/Socket"),
            Net::GpuDirectTcpx => f.write_str("NET/GPUDirectTCPX (TCPX)"),
            Net::FasTrak => f.write_str("NET/FasTrak (TCPXO)"),
            Net::Gib => f.write_str("NET/IB (gIB)"),
            Net::Other(name) => write!(f, "NET/{name}"),
        }
    }
}

/// What the debug lines say about the transports of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Transport {
    /// Some when a channel ran over P2P.
    pub p2p: Option<P2pLink>,
    /// A channel ran through host shared memory.
    pub shm: bool,
    /// NVLink SHARP channels were connected.
    pub nvls: bool,
    /// Networks channels ran over, in the order first seen.
    pub channel_nets: Vec<Net>,
    /// The network NCCL picked (`Using network X`).
    pub selected_net: Option<Net>,
    /// The first network whose devices NCCL listed (`NET/IB : Using [0]mlx5_0:1/IB`):
    /// before 2.12 the only sign of the network it ran on, taken when the ranks span
    /// nodes and nothing more says which.
    #[serde(skip)]
    pub listed_net: Option<Net>,
    /// A network channel used GPUDirect RDMA (`/GDRDMA`).
    pub gdr: bool,
    /// Nodes the communicator spans, when printed.
    pub nodes: Option<u32>,
    /// Ranks of the communicator, when printed.
    pub nranks: Option<u32>,
    /// The external net plugin NCCL loaded, by the name it gives itself (`gIB`,
    /// `GPUDirectTCPX_v7`, `FasTrak`); `None`: none was seen loading (NCCL's internal IB
    /// and Socket only).
    pub plugin: Option<String>,
    /// The plugin library NCCL opened (`libnccl-net-gIB.so`), when it printed it.
    pub plugin_lib: Option<String>,
    /// Some when NCCL said it found no net plugin (or could not load one): the libraries
    /// it tried, space-separated (`libnccl-net.so`), or empty when it named none.
    pub no_plugin_found: Option<String>,
    /// NCCL's warning that it had no network to run on (`Error: network gIB not found.`,
    /// `Failed to initialize any NET plugin`).
    pub net_error: Option<String>,
}

impl Transport {
    /// The network that carried inter-node traffic: the one channels ran over, or, when
    /// no channel lines were printed and the ranks span nodes (or the node count is
    /// unknown), the one NCCL picked.
    pub fn inter_node_net(&self) -> Option<&Net> {
        if let Some(first) = self.channel_nets.first() {
            // Socket among several means some channels fell back: report that one.
            return Some(
                self.channel_nets
                    .iter()
                    .find(|n| **n == Net::Socket)
                    .unwrap_or(first),
            );
        }
        let intra_channels = self.p2p.is_some() || self.shm || self.nvls;
        match self.nodes {
            Some(n) if n > 1 => self
                .selected_net
                .as_ref()
                .or(self.listed_net.as_ref().filter(|_| self.net_error.is_none())),
            None if !intra_channels => self.selected_net.as_ref(),
            _ => None,
        }
    }

    /// The human summary, e.g. `NVLink P2P`, `NET/Socket`, `NVLink P2P + NET/IB (gIB)`;
    /// `None` when the lines said nothing about transports.
    pub fn summary(&self) -> Option<String> {
        let mut parts: Vec<String> = Vec::new();
        if let Some(link) = self.p2p {
            parts.push(
                match link {
                    P2pLink::NvLink => "NVLink P2P",
                    P2pLink::Pcie => "PCIe P2P",
                    P2pLink::Unknown => "P2P",
                }
                .to_string(),
            );
        }
        if self.nvls {
            parts.push("NVLS".to_string());
        }
        if self.shm {
            parts.push("SHM".to_string());
        }
        if self.channel_nets.is_empty() {
            if let Some(net) = self.inter_node_net() {
                parts.push(net.to_string());
            }
        } else {
            parts.extend(self.channel_nets.iter().map(Net::to_string));
        }
        (!parts.is_empty()).then(|| parts.join(" + "))
    }
}

/// Reads NCCL debug messages (the text after `NCCL INFO `) one at a time.
#[derive(Debug, Clone, Default)]
pub struct TransportDetector {
    t: Transport,
    p2p_seen: bool,
    nvlink_graph: bool,
    pcie_graph: bool,
    nvlink_hint: bool,
    seen_any: bool,
    /// The library an old NCCL (2.18-2.20) said it would try (`Plugin name set by env`,
    /// `Plugin load (X) returned`), named by its `No plugin found` line that follows.
    tried_lib: Option<String>,
}

impl TransportDetector {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed one debug message. Returns true when it changed what [`Self::transport`] says.
    pub fn feed(&mut self, message: &str) -> bool {
        let before = self.transport();
        self.seen_any = true;
        self.read(message.trim());
        self.transport() != before
    }

    fn read(&mut self, m: &str) {
        if let Some((_, via)) = m.split_once(" via ") {
            if m.starts_with("Channel ") || m.contains("] ->") || m.contains("->") {
                self.read_via(via.trim());
            }
        }
        if let Some(name) = m.strip_prefix("Using network ") {
            self.select(name.trim());
        } else if m.starts_with("Using internal Network Socket") {
            // NCCL 2.2.
            self.select("Socket");
        } else if m.starts_with("NET/IB : Using [") {
            // NCCL before `Using network` (2.12) names no network but lists the devices
            // of the first that has some: IB's, else the sockets'.
            self.t.listed_net = Some(Net::Ib);
        } else if m.starts_with("NET/Socket : Using [") && self.t.listed_net.is_none() {
            self.t.listed_net = Some(Net::Socket);
        } else if let Some(rest) = m.strip_prefix("Assigned NET plugin ") {
            if let Some(name) = rest.strip_suffix(" to comm") {
                self.select(name.trim());
            }
        }
        self.read_plugin(m);
        if m.starts_with("comm 0x") || m.starts_with("ncclCommInitRank") {
            if let Some(n) = number_after(m, "nNodes ") {
                self.t.nodes = Some(n);
            }
            if let Some(n) = number_after(m, "nRanks ").or_else(|| number_after(m, "nranks ")) {
                self.t.nranks = Some(n);
            }
        }
        if m.starts_with("Pattern ") {
            if let Some(kind) = m.split_once("type ").map(|(_, t)| t) {
                let intra = kind.split(['/', ',', ' ']).next().unwrap_or("");
                match intra {
                    "NVL" | "NVB" => self.nvlink_graph = true,
                    "PIX" | "PXB" | "PHB" | "SYS" | "PCI" => self.pcie_graph = true,
                    _ => {}
                }
            }
        }
        if m.starts_with("MNNVL busId") && m.contains(" state 3") {
            self.nvlink_hint = true;
        }
        if m.starts_with("NVLS multicast support is available") || m.starts_with("Connected NVLS") {
            self.nvlink_hint = true;
            if m.starts_with("Connected NVLS") {
                self.t.nvls = true;
            }
        }
        if let Some(n) = number_before(m, " nvls channels") {
            if n > 0 {
                self.nvlink_hint = true;
            }
        }
    }

    fn read_via(&mut self, via: &str) {
        let word = via.split_whitespace().next().unwrap_or("");
        if let Some(rest) = via.strip_prefix("P2P/") {
            self.p2p_seen = true;
            if rest.starts_with("MNNVL") {
                self.nvlink_hint = true;
            }
        } else if word.starts_with("SHM") {
            self.t.shm = true;
        } else if word.starts_with("NVLS") {
            self.t.nvls = true;
            self.nvlink_hint = true;
        } else if let Some(rest) = via.strip_prefix("NET/") {
            let name = rest.split('/').next().unwrap_or(rest).trim();
            let net = Net::from_name(name);
            if !self.t.channel_nets.contains(&net) {
                self.t.channel_nets.push(net);
            }
            if rest.contains("GDRDMA") {
                self.t.gdr = true;
            }
        }
    }

    /// The net plugin lines (see the module doc for each version's).
    fn read_plugin(&mut self, m: &str) {
        // NCCL's WARN lines (`net.cc`, 2.26 `plugin/net.cc`; `plugin/net.cc` from 2.27).
        let not_found = m.starts_with("Error: network ") && m.ends_with("not found.");
        if not_found || m.starts_with("Failed to initialize any NET plugin") {
            self.t.net_error = Some(m.chars().take(MAX_LIBS_TEXT).collect());
            return;
        }
        if let Some(lib) = m.strip_prefix("Successfully loaded external plugin ") {
            self.t.plugin_lib = Some(lib.trim().chars().take(MAX_LIBS_TEXT).collect());
            return;
        }
        // 2.18-2.20, without the NET/Plugin prefix: the library about to be tried.
        if let Some(lib) = m.strip_prefix("Plugin name set by env to ") {
            self.tried_lib = Some(lib.trim().chars().take(MAX_LIBS_TEXT).collect());
            return;
        }
        let Some(rest) = m
            .strip_prefix("NET/Plugin")
            .map(|r| r.trim_start().strip_prefix(':').unwrap_or(r).trim())
        else {
            return;
        };
        if let Some(named) = rest.strip_prefix("Loaded net plugin ") {
            // `gIB (v8)`; a name may hold spaces (`AWS Libfabric`).
            let name = named.rsplit_once(" (v").map_or(named, |(n, _)| n).trim();
            if !name.is_empty() {
                self.t.plugin = Some(name.chars().take(MAX_LIBS_TEXT).collect());
            }
        } else if let Some(lib) = rest.strip_prefix("Plugin name set by env to ") {
            self.t.plugin_lib = Some(lib.trim().chars().take(MAX_LIBS_TEXT).collect());
        } else if let Some(list) = rest.strip_prefix("Could not find:") {
            // `Could not find: gIB libnccl-net-gIB.so. Using internal network plugin.`
            let list = list.split_once(". ").map_or(list, |(l, _)| l);
            self.no_plugin(list.trim().trim_end_matches('.'));
        } else if let Some(at) = rest.find("No plugin found") {
            let after = &rest[at + "No plugin found".len()..];
            let named = after
                .trim_start()
                .strip_prefix('(')
                .and_then(|a| a.split_once(')'))
                .map(|(n, _)| n.trim().to_string());
            let lib = named.or_else(|| self.tried_lib.clone()).unwrap_or_default();
            self.no_plugin(&lib);
        } else if let Some(load) = rest.strip_prefix("Plugin load (") {
            // 2.18: `Plugin load (libnccl-net.so) returned 2 : ...`; `No plugin found` follows.
            if let Some((lib, _)) = load.split_once(')') {
                self.tried_lib = Some(lib.trim().chars().take(MAX_LIBS_TEXT).collect());
            }
        } else if let Some(err) = rest.strip_prefix("Plugin load returned ") {
            // A library that is there but does not load (2.19-2.22).
            let lib = err
                .rsplit_once(" when loading ")
                .map(|(_, l)| l.trim().to_string())
                .or_else(|| self.tried_lib.clone())
                .unwrap_or_default();
            self.no_plugin(&lib);
        } else if rest.contains("cannot open shared object file") || rest.contains("undefined symbol") {
            // 2.26 on: `NET/Plugin: libnccl-net.so: <dlerror>` for a library that is
            // there but does not load.
            let lib = rest.split(':').next().unwrap_or("").trim();
            self.no_plugin(if lib.ends_with(".so") { lib } else { "" });
        }
    }

    /// NCCL found no plugin: add the libraries it names (bounded: a log cannot grow it
    /// past [`MAX_LIBS_TEXT`]).
    fn no_plugin(&mut self, libs: &str) {
        let known = self.t.no_plugin_found.get_or_insert_with(String::new);
        for lib in libs.split_whitespace() {
            if known.split(' ').any(|k| k == lib) || known.len() + lib.len() >= MAX_LIBS_TEXT {
                continue;
            }
            if !known.is_empty() {
                known.push(' ');
            }
            known.push_str(lib);
        }
    }

    fn select(&mut self, name: &str) {
        if !name.is_empty() {
            self.t.selected_net = Some(Net::from_name(name));
        }
    }

    /// Whether any debug message was fed.
    pub fn saw_debug_lines(&self) -> bool {
        self.seen_any
    }

    /// What is known so far.
    pub fn transport(&self) -> Transport {
        let mut t = self.t.clone();
        if self.p2p_seen {
            t.p2p = Some(if self.nvlink_graph {
                P2pLink::NvLink
            } else if self.pcie_graph {
                P2pLink::Pcie
            } else if self.nvlink_hint {
                P2pLink::NvLink
            } else {
                P2pLink::Unknown
            });
        }
        t
    }
}

/// The most text [`Transport::no_plugin_found`] keeps.
const MAX_LIBS_TEXT: usize = 512;

fn number_after(m: &str, key: &str) -> Option<u32> {
    let (_, rest) = m.split_once(key)?;
    rest.split_whitespace().next()?.parse().ok()
}

fn number_before(m: &str, key: &str) -> Option<u32> {
    let (head, _) = m.split_once(key)?;
    head.rsplit([' ', ',']).find(|s| !s.is_empty())?.parse().ok()
}

pub use crate::gpudirect::GpuDirect;

/// What NCCL runs of each flavour must show: the plugin and the transports it accepts.
impl GpuDirect {
    fn expected_net(self) -> &'static str {
        match self {
            GpuDirect::None => "",
            GpuDirect::Tcpx => "GPUDirect-TCPX (NET/GPUDirectTCPX)",
            GpuDirect::Tcpxo => "GPUDirect-TCPXO (NET/FasTrak)",
            GpuDirect::Rdma => "GPUDirect RDMA (NET/IB via gIB)",
        }
    }

    /// The plugin the profile's runs must use, as NCCL names it.
    pub fn expected_plugin(self) -> &'static str {
        match self {
            GpuDirect::None => "",
            GpuDirect::Tcpx => "GPUDirectTCPX",
            GpuDirect::Tcpxo => "FasTrak",
            GpuDirect::Rdma => "gIB",
        }
    }

    /// Whether `net` (a network channels ran over, or a plugin NCCL loaded) is one this
    /// profile's runs may use: TCPX's plugin, FasTrak, gIB or NCCL's own IB verbs.
    pub fn accepts(self, net: &Net) -> bool {
        match self {
            GpuDirect::None => true,
            GpuDirect::Tcpx => *net == Net::GpuDirectTcpx,
            GpuDirect::Tcpxo => *net == Net::FasTrak,
            GpuDirect::Rdma => matches!(net, Net::Gib | Net::Ib),
        }
    }

    fn fix_hint(self) -> &'static str {
        match self {
            GpuDirect::None => "",
            GpuDirect::Tcpx => {
                "check that the RxDM container runs and that the TCPX plugin is on LD_LIBRARY_PATH \
                 (/usr/local/tcpx/lib64 in the container, /var/lib/tcpx/lib64 on the host) with \
                 the NCCL_GPUDIRECTTCPX_* variables set"
            }
            GpuDirect::Tcpxo => {
                "check that the RxDM runs and source /var/lib/tcpxo/lib64/nccl-env-profile.sh \
                 (NCCL_FASTRAK_* variables, LD_LIBRARY_PATH=/var/lib/tcpxo/lib64)"
            }
            GpuDirect::Rdma => {
                "set NCCL_NET=gIB and source /usr/local/gib/scripts/set_nccl_env.sh \
                 (LD_LIBRARY_PATH=/usr/local/gib/lib64), and check the RDMA VPC NICs"
            }
        }
    }
}

/// What a run's NCCL lines say about its GPUDirect profile's network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportCheck {
    /// No GPUDirect profile, or one node: the network carries nothing to judge.
    NotApplicable,
    /// The profile's network carried the run (its name, e.g. `NET/IB (gIB)`).
    Verified(String),
    /// Nothing printed says which network NCCL used: why not, in a phrase.
    Unverified(String),
    /// NCCL did not use the profile's network: what it did, in a phrase, e.g. `profile
    /// rdma expects gIB, but NCCL used NET/Socket (no plugin found: libnccl-net.so)`.
    Wrong(String),
}

/// Judge a run's transport against its GPUDirect `profile`: the one rule behind the
/// verdict ([`super::expect::judge_run`]) and the loud warning ([`fallback_warning`]).
///
/// `nodes` is the run's node count when known (NCCL's own `nNodes` wins): a one-node run
/// does not use the network, so it is never wrong for it. On a GPUDirect profile the run
/// is wrong when NCCL found no network to run on, when inter-node traffic went over
/// NET/Socket, when the plugin it loaded is not the profile's (TCPX: GPUDirectTCPX,
/// TCPXO: FasTrak, RDMA: gIB, or NCCL's own IB verbs seen carrying the traffic), or when
/// it said it found no plugin and nothing shows the profile's network was used anyway.
/// Without `NCCL_DEBUG=INFO` lines (`transport` `None`) it is unverified, not wrong.
pub fn check_transport(
    profile: GpuDirect,
    transport: Option<&Transport>,
    nodes: Option<u32>,
) -> TransportCheck {
    if profile == GpuDirect::None {
        return TransportCheck::NotApplicable;
    }
    if transport.and_then(|t| t.nodes).or(nodes) == Some(1) {
        return TransportCheck::NotApplicable;
    }
    let Some(t) = transport else {
        return TransportCheck::Unverified(
            "no NCCL_DEBUG=INFO lines in the output, so which net plugin NCCL used is unknown".into(),
        );
    };
    let want = format!("profile {} expects {}", profile.name(), profile.expected_plugin());
    let net = t.inter_node_net();
    let plugin = t.plugin.as_deref().map(Net::from_name);
    // What NCCL said about plugins, for the reason: `no plugin found: libnccl-net.so`,
    // `plugin GPUDirectTCPX_v7 loaded`.
    let plugin_note = match (&t.plugin, &t.no_plugin_found) {
        (Some(p), _) => Some(format!("plugin {p} loaded")),
        (None, Some(libs)) if libs.is_empty() => Some("no plugin found".to_string()),
        (None, Some(libs)) => Some(format!("no plugin found: {libs}")),
        (None, None) => None,
    };
    let with_note = |what: String| match &plugin_note {
        Some(n) => format!("{want}, but NCCL {what} ({n})"),
        None => format!("{want}, but NCCL {what}"),
    };
    if let Some(e) = &t.net_error {
        return TransportCheck::Wrong(with_note(format!(
            "found no network to run on: {}",
            e.trim_end_matches('.')
        )));
    }
    if net == Some(&Net::Socket) {
        return TransportCheck::Wrong(with_note("used NET/Socket".into()));
    }
    if let (Some(p), Some(name)) = (&plugin, &t.plugin) {
        if !profile.accepts(p) {
            let used = net.map_or(String::new(), |n| format!(" and used {n}"));
            return TransportCheck::Wrong(format!("{want}, but NCCL loaded the {name} plugin{used}"));
        }
    }
    if let Some(n) = net.filter(|n| !profile.accepts(n)) {
        return TransportCheck::Wrong(with_note(format!("used {n}")));
    }
    if plugin.is_none() && t.no_plugin_found.is_some() && net.is_none() {
        let libs = t.no_plugin_found.as_deref().unwrap_or("");
        let libs = if libs.is_empty() {
            String::new()
        } else {
            format!(" ({libs})")
        };
        return TransportCheck::Wrong(format!("{want}, but NCCL found no plugin{libs}"));
    }
    match (net, &t.plugin) {
        (Some(n), _) => TransportCheck::Verified(n.to_string()),
        (None, Some(p)) => TransportCheck::Verified(format!("plugin {p}")),
        (None, None) => TransportCheck::Unverified(
            "NCCL's INFO lines name no network (NCCL_DEBUG_SUBSYS without INIT,NET?)".into(),
        ),
    }
}

/// A loud warning when a run on a GPUDirect profile did not use the profile's network
/// (the [`check_transport`] rule: sockets, another plugin, no plugin); `None` when
/// nothing is wrong, nothing is known, or the profile has no GPUDirect to lose.
pub fn fallback_warning(
    profile: GpuDirect,
    transport: Option<&Transport>,
    nodes: Option<u32>,
) -> Option<String> {
    let TransportCheck::Wrong(what) = check_transport(profile, transport, nodes) else {
        return None;
    };
    let socket = transport.and_then(Transport::inter_node_net) == Some(&Net::Socket);
    let cost = if socket {
        "inter-node traffic goes through host TCP sockets, about 3x slower \
         (SkyPilot measured all_reduce busbw 19.39 GB/s without TCPX vs 65.72 GB/s with it \
         on 2 x a3-highgpu-8g)"
    } else {
        "inter-node traffic does not take the GPUDirect path this machine is built for"
    };
    Some(format!(
        "WARNING: NCCL DID NOT USE {}: {what}; {cost}. Fix: {}.",
        profile.expected_net(),
        profile.fix_hint()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect(lines: &[&str]) -> Transport {
        let mut d = TransportDetector::new();
        for l in lines {
            d.feed(l);
        }
        d.transport()
    }

    #[test]
    fn summaries_from_debug_messages() {
        let cases: &[(&[&str], Option<&str>)] = &[
            (&[], None),
            (&["NET/IB : No device found.", "cudaDriverVersion 13000"], None),
            (
                &[
                    "MNNVL busId 0x60 fabric UUID 0.0 cliqueId 0x0 state 3 healthMask 0x0",
                    "Using network Socket",
                    "comm 0x5 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
                    "Channel 00/0 : 0[0] -> 1[1] via P2P/direct pointer",
                ],
                Some("NVLink P2P"),
            ),
            (&["Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM"], Some("P2P")),
            (
                &[
                    "Pattern 4, crossNic 0, nChannels 2, bw 20.000000/20.000000, type PIX/PIX, sameChannels 1",
                    "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read",
                ],
                Some("PCIe P2P"),
            ),
            (
                &[
                    "Pattern 4, crossNic 0, nChannels 16, bw 40.000000/40.000000, type NVL/PIX, sameChannels 1",
                    "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM",
                ],
                Some("NVLink P2P"),
            ),
            (&["Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct"], Some("SHM")),
            (
                &[
                    "Using network Socket",
                    "comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0",
                ],
                Some("NET/Socket"),
            ),
            (&["Using network Socket"], Some("NET/Socket")),
            (
                &[
                    "Using network IB",
                    "Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA",
                    "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM",
                    "24 coll channels, 24 collnet channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer",
                ],
                Some("NVLink P2P + NET/IB"),
            ),
            (&["Channel 03/0 : 2[2] -> 11[3] [send] via NET/gIB/3/GDRDMA"], Some("NET/IB (gIB)")),
            (&["Using network gIB"], Some("NET/IB (gIB)")),
            (&["Using network GPUDirectTCPX_v7"], Some("NET/GPUDirectTCPX (TCPX)")),
            (
                &["Channel 00/0 : 0[0] -> 8[0] [send] via NET/GPUDirectTCPX_v7/0"],
                Some("NET/GPUDirectTCPX (TCPX)"),
            ),
            (&["Using network FasTrak"], Some("NET/FasTrak (TCPXO)")),
            (&["Channel 00/0 : 0[0] -> 8[0] [send] via NET/FasTrak/1"], Some("NET/FasTrak (TCPXO)")),
            (&["Assigned NET plugin Socket to comm"], Some("NET/Socket")),
            (&["Using network AWS Libfabric"], Some("NET/AWS Libfabric")),
        ];
        for (lines, want) in cases {
            assert_eq!(detect(lines).summary().as_deref(), *want, "{lines:?}");
        }
    }

    #[test]
    fn counts_nodes_and_ranks() {
        let t = detect(&["comm 0x1 rank 3 nRanks 16 nNodes 2 localRanks 8 localRank 3 MNNVL 0"]);
        assert_eq!((t.nodes, t.nranks), (Some(2), Some(16)));
        let t = detect(&[
            "ncclCommInitRankConfig comm 0x5 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 70 - Init START",
        ]);
        assert_eq!((t.nodes, t.nranks), (None, Some(2)));
    }

    #[test]
    fn gdr_flag_from_channels() {
        assert!(detect(&["Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA"]).gdr);
        assert!(!detect(&["Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0"]).gdr);
    }

    #[test]
    fn machine_types_map_to_flavours() {
        for (mt, want) in [
            ("a3-highgpu-8g", GpuDirect::Tcpx),
            ("a3-edgegpu-8g", GpuDirect::Tcpx),
            ("a3-megagpu-8g", GpuDirect::Tcpxo),
            ("a3-ultragpu-8g", GpuDirect::Rdma),
            ("a4-highgpu-8g", GpuDirect::Rdma),
            ("a4x-highgpu-4g", GpuDirect::Rdma),
            ("a3-highgpu-1g", GpuDirect::None),
            ("g2-standard-48", GpuDirect::None),
        ] {
            assert_eq!(GpuDirect::for_machine_type(mt), want, "{mt}");
        }
    }

    /// Every way NCCL 2.18 to 2.28 says which net plugin it loaded, or that it found
    /// none (the strings of `src/net.cc`, `src/plugin/plugin_open.cc`,
    /// `src/plugin/net.cc`, `src/plugin/net/net_v*.cc` of each release); other plugins'
    /// lines and the internal transports' device lists say nothing about it.
    #[test]
    fn net_plugin_lines_of_each_version() {
        type Want = (Option<&'static str>, Option<&'static str>, Option<&'static str>);
        let cases: &[(&[&str], Want)] = &[
            (
                &[
                    "NET/Plugin: Plugin name set by env to libnccl-net-gIB.so",
                    "NET/Plugin: Loaded net plugin gIB (v8)",
                ],
                (Some("gIB"), Some("libnccl-net-gIB.so"), None),
            ),
            // 2.27: the plugin's name, then the library it came from.
            (
                &[
                    "NET/Plugin: Loaded net plugin GPUDirectTCPX_v7 (v7)",
                    "Successfully loaded external plugin libnccl-net.so",
                    "Initialized NET plugin GPUDirectTCPX_v7",
                ],
                (Some("GPUDirectTCPX_v7"), Some("libnccl-net.so"), None),
            ),
            (
                &["NET/Plugin: Loaded net plugin AWS Libfabric (v6)"],
                (Some("AWS Libfabric"), None, None),
            ),
            // 2.18: the library, then that it was not found.
            (
                &[
                    "Plugin name set by env to libnccl-net-gIB.so",
                    "NET/Plugin : Plugin load (libnccl-net-gIB.so) returned 2 : libnccl-net-gIB.so: cannot open shared object file: No such file or directory",
                    "NET/Plugin : No plugin found, using internal implementation",
                ],
                (None, None, Some("libnccl-net-gIB.so")),
            ),
            // 2.19-2.20.
            (
                &["NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or directory No plugin found (libnccl-net.so), using internal implementation"],
                (None, None, Some("libnccl-net.so")),
            ),
            // 2.21.
            (&["NET/Plugin: No plugin found (libnccl-net.so)"], (None, None, Some("libnccl-net.so"))),
            // 2.22-2.25.
            (
                &["NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin."],
                (None, None, Some("libnccl-net.so")),
            ),
            // 2.26-2.27 with NCCL_NET_PLUGIN=gIB: both names tried, an empty fallback.
            (
                &["NET/Plugin: Could not find: gIB libnccl-net-gIB.so. "],
                (None, None, Some("gIB libnccl-net-gIB.so")),
            ),
            // A library that is there but does not load: 2.21-2.22, 2.28.
            (
                &["NET/Plugin: Plugin load returned 0 : libnccl-net.so: undefined symbol: ncclNetPlugin_v8 when loading libnccl-net.so"],
                (None, None, Some("libnccl-net.so")),
            ),
            (
                &["NET/Plugin: libnccl-net.so: libnccl-net.so: undefined symbol: ncclNetPlugin_v9"],
                (None, None, Some("libnccl-net.so")),
            ),
            // Not the net plugin, or not a load at all.
            (
                &[
                    "TUNER/Plugin: Could not find: libnccl-tuner.so. Using internal tuner plugin.",
                    "PROFILER/Plugin: Could not find: libnccl-profiler.so. ",
                    "ENV/Plugin: Could not find: libnccl-env.so",
                    "NET/Plugin: Loaded collnet plugin gIB (v8)",
                    "NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.",
                    "NET/Socket : Using [0]eth0:10.0.0.2<0>",
                    "NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.0.0.2<0>",
                ],
                (None, None, None),
            ),
        ];
        for (lines, (plugin, lib, missing)) in cases {
            let t = detect(lines);
            assert_eq!(
                (
                    t.plugin.as_deref(),
                    t.plugin_lib.as_deref(),
                    t.no_plugin_found.as_deref()
                ),
                (*plugin, *lib, *missing),
                "{lines:?}"
            );
            assert_eq!(t.net_error, None, "{lines:?}");
        }
        // A device list is not `Using network`.
        assert_eq!(
            detect(&["NET/Socket : Using [0]eth0:10.0.0.2<0>"]).summary(),
            None
        );
    }

    #[test]
    fn no_network_for_the_run() {
        for (line, want) in [
            ("Error: network gIB not found.", "Error: network gIB not found."),
            (
                "Failed to initialize any NET plugin",
                "Failed to initialize any NET plugin",
            ),
        ] {
            assert_eq!(detect(&[line]).net_error.as_deref(), Some(want));
        }
    }

    /// The recorded 2.28.9 run (one VM, no plugin: `NET/Plugin: Could not find:
    /// libnccl-net.so`, its `ENV/Plugin` line not counted) and the composed 2.27.7 run
    /// whose `NCCL_NET=gIB` names a plugin that is not there.
    #[test]
    fn plugins_of_the_fixtures() {
        let recorded = crate::nccl::parse_text(include_str!(
            "../../tests/fixtures/nccl/h200x2-all_reduce-nccl-debug.txt"
        ))
        .remove(0)
        .transport
        .unwrap();
        assert_eq!(recorded.plugin, None);
        assert_eq!(recorded.no_plugin_found.as_deref(), Some("libnccl-net.so"));
        assert_eq!(recorded.net_error, None);
        let composed = crate::nccl::parse_text(include_str!(
            "../../tests/fixtures/nccl/composed/nccl2.27.7-rdma-no-gib-all_reduce.txt"
        ))
        .remove(0)
        .transport
        .unwrap();
        assert_eq!(composed.plugin, None);
        assert_eq!(composed.no_plugin_found.as_deref(), Some("libnccl-net.so"));
        assert_eq!(
            composed.net_error.as_deref(),
            Some("Failed to initialize any NET plugin")
        );
        assert_eq!(composed.selected_net, None, "no network was assigned");
    }

    #[test]
    fn profile_names_round_trip() {
        for g in [
            GpuDirect::None,
            GpuDirect::Tcpx,
            GpuDirect::Tcpxo,
            GpuDirect::Rdma,
        ] {
            assert_eq!(GpuDirect::parse(g.name()), Some(g));
        }
        assert_eq!(GpuDirect::parse("RDMA"), Some(GpuDirect::Rdma));
        assert_eq!(GpuDirect::parse(""), None);
    }

    const TWO_NODES: &str = "comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0";
    const NO_PLUGIN: &str = "NET/Plugin: Could not find: libnccl-net.so";

    fn check(profile: GpuDirect, lines: &[&str], nodes: Option<u32>) -> TransportCheck {
        check_transport(profile, Some(&detect(lines)), nodes)
    }

    fn wrong(c: TransportCheck) -> String {
        match c {
            TransportCheck::Wrong(w) => w,
            other => panic!("not wrong: {other:?}"),
        }
    }

    #[test]
    fn the_transport_is_judged_against_the_profile() {
        use GpuDirect::{Rdma, Tcpx, Tcpxo};
        let socket = [NO_PLUGIN, "Using network Socket", TWO_NODES];
        assert_eq!(
            wrong(check(Rdma, &socket, None)),
            "profile rdma expects gIB, but NCCL used NET/Socket (no plugin found: libnccl-net.so)"
        );
        assert_eq!(
            wrong(check(
                Tcpxo,
                &["Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0"],
                Some(2)
            )),
            "profile tcpxo expects FasTrak, but NCCL used NET/Socket"
        );
        // Socket among the channels is a fallback even when another network ran too.
        let mixed = [
            "Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA",
            "Channel 01/0 : 0[0] -> 8[0] [send] via NET/Socket/0",
        ];
        assert!(wrong(check(Rdma, &mixed, Some(2))).contains("used NET/Socket"));
        // The plugin loaded is the profile's, or not.
        let gib = [
            "NET/Plugin: Loaded net plugin gIB (v8)",
            "Channel 00/0 : 0[0] -> 8[0] [send] via NET/gIB/0/GDRDMA",
        ];
        assert_eq!(
            check(Rdma, &gib, Some(2)),
            TransportCheck::Verified("NET/IB (gIB)".into())
        );
        assert_eq!(
            wrong(check(Tcpx, &gib, Some(2))),
            "profile tcpx expects GPUDirectTCPX, but NCCL loaded the gIB plugin and used NET/IB (gIB)"
        );
        let tcpx = [
            "NET/Plugin: Loaded net plugin GPUDirectTCPX_v7 (v7)",
            "Using network GPUDirectTCPX_v7",
            TWO_NODES,
        ];
        assert!(matches!(check(Tcpx, &tcpx, None), TransportCheck::Verified(_)));
        assert!(wrong(check(Tcpxo, &tcpx, None)).contains("loaded the GPUDirectTCPX_v7 plugin"));
        // RDMA may run on NCCL's own IB verbs, seen carrying the traffic; TCPX may not.
        let ib = [
            NO_PLUGIN,
            "Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA",
        ];
        assert_eq!(
            check(Rdma, &ib, Some(2)),
            TransportCheck::Verified("NET/IB".into())
        );
        assert_eq!(
            wrong(check(Tcpx, &ib, Some(2))),
            "profile tcpx expects GPUDirectTCPX, but NCCL used NET/IB (no plugin found: libnccl-net.so)"
        );
        // No plugin and nothing showing what carried the traffic.
        assert_eq!(
            wrong(check(Rdma, &[NO_PLUGIN], Some(2))),
            "profile rdma expects gIB, but NCCL found no plugin (libnccl-net.so)"
        );
        // No network at all.
        assert_eq!(
            wrong(check(
                Rdma,
                &[NO_PLUGIN, "Failed to initialize any NET plugin"],
                Some(2)
            )),
            "profile rdma expects gIB, but NCCL found no network to run on: \
             Failed to initialize any NET plugin (no plugin found: libnccl-net.so)"
        );
        // One node never uses the network: NCCL's nNodes, or the run's node count.
        let one = [
            NO_PLUGIN,
            "Using network Socket",
            "comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0",
        ];
        assert_eq!(check(Rdma, &one, Some(2)), TransportCheck::NotApplicable);
        assert_eq!(
            check(Rdma, &[NO_PLUGIN, "Using network Socket"], Some(1)),
            TransportCheck::NotApplicable
        );
        assert_eq!(
            check_transport(Rdma, None, Some(1)),
            TransportCheck::NotApplicable
        );
        // Nothing to go by: unverified, not wrong.
        assert!(
            matches!(check_transport(Rdma, None, Some(2)), TransportCheck::Unverified(w) if w.contains("NCCL_DEBUG=INFO"))
        );
        assert!(matches!(
            check(Tcpxo, &["Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM"], Some(2)),
            TransportCheck::Unverified(_)
        ));
        // No GPUDirect profile: nothing to lose.
        assert_eq!(
            check(GpuDirect::None, &socket, Some(2)),
            TransportCheck::NotApplicable
        );
    }

    #[test]
    fn the_warning_follows_the_same_rule() {
        let socket = detect(&[NO_PLUGIN, "Using network Socket", TWO_NODES]);
        for profile in [GpuDirect::Tcpx, GpuDirect::Tcpxo, GpuDirect::Rdma] {
            let w = fallback_warning(profile, Some(&socket), None).expect("warns");
            assert!(w.starts_with("WARNING: NCCL DID NOT USE GPUDirect"), "{w}");
            assert!(w.contains("used NET/Socket") && w.contains("3x"), "{w}");
            let unsized_socket = detect(&[NO_PLUGIN, "Using network Socket"]);
            assert!(fallback_warning(profile, Some(&unsized_socket), None).is_some());
            assert_eq!(
                fallback_warning(profile, Some(&unsized_socket), Some(1)),
                None,
                "one node"
            );
            assert_eq!(fallback_warning(profile, None, Some(2)), None, "unverified");
        }
        assert_eq!(fallback_warning(GpuDirect::None, Some(&socket), None), None);
        let w = fallback_warning(GpuDirect::Tcpxo, Some(&socket), None).unwrap();
        assert!(w.contains("TCPXO") && w.contains("nccl-env-profile.sh"), "{w}");
        // Another plugin than the profile's: warned too, without the sockets' figure.
        let gib = detect(&[
            "NET/Plugin: Loaded net plugin gIB (v8)",
            "Using network gIB",
            TWO_NODES,
        ]);
        let w = fallback_warning(GpuDirect::Tcpx, Some(&gib), None).unwrap();
        assert!(w.contains("loaded the gIB plugin") && !w.contains("3x"), "{w}");
        assert_eq!(fallback_warning(GpuDirect::Rdma, Some(&gib), None), None);
    }
}
