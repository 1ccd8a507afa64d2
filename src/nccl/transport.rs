//! Which transport NCCL used, read from its `NCCL_DEBUG=INFO` lines, and the warning for
//! a machine that should use GPUDirect but fell back to plain sockets.
//!
//! What NCCL prints (2.18 to 2.28) and what we read from it:
//! - `Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM` (or `P2P/IPC`, `P2P/direct pointer`,
//!   `P2P/MNNVL`, with `/read`): GPU-to-GPU inside a node; `via SHM/direct/direct`: through
//!   host memory; `[send] via NET/IB/0/GDRDMA`, `via NET/Socket/0`, `via NET/gIB/3/GDRDMA`:
//!   across nodes with that network plugin.
//! - `Using network IB` / `Assigned NET plugin Socket to comm`: the network NCCL picked
//!   (used only when ranks span nodes; a one-node run prints it too).
//! - `comm 0x.. rank 0 nRanks 16 nNodes 2 ...`: how many nodes.
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
    /// A network channel used GPUDirect RDMA (`/GDRDMA`).
    pub gdr: bool,
    /// Nodes the communicator spans, when printed.
    pub nodes: Option<u32>,
    /// Ranks of the communicator, when printed.
    pub nranks: Option<u32>,
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
            Some(n) if n > 1 => self.selected_net.as_ref(),
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
        } else if let Some(rest) = m.strip_prefix("Assigned NET plugin ") {
            if let Some(name) = rest.strip_suffix(" to comm") {
                self.select(name.trim());
            }
        }
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

fn number_after(m: &str, key: &str) -> Option<u32> {
    let (_, rest) = m.split_once(key)?;
    rest.split_whitespace().next()?.parse().ok()
}

fn number_before(m: &str, key: &str) -> Option<u32> {
    let (head, _) = m.split_once(key)?;
    head.rsplit([' ', ',']).find(|s| !s.is_empty())?.parse().ok()
}

/// The GPUDirect flavour a machine type should run NCCL with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuDirect {
    /// No GPUDirect networking (or a single-node shape).
    None,
    /// GPUDirect-TCPX: a3-highgpu-8g, a3-edgegpu-8g.
    Tcpx,
    /// GPUDirect-TCPXO (FasTrak): a3-megagpu-8g.
    Tcpxo,
    /// GPUDirect RDMA over RoCE (gIB plugin or NCCL's IB): a3-ultragpu-8g, a4-highgpu-8g, a4x.
    Rdma,
}

impl GpuDirect {
    /// The profile's name, as runs and jobs record it: `none`, `tcpx`, `tcpxo`, `rdma`.
    pub fn name(self) -> &'static str {
        match self {
            GpuDirect::None => "none",
            GpuDirect::Tcpx => "tcpx",
            GpuDirect::Tcpxo => "tcpxo",
            GpuDirect::Rdma => "rdma",
        }
    }

    /// The flavour Google documents for a Compute Engine machine type.
    pub fn for_machine_type(machine_type: &str) -> GpuDirect {
        let mt = machine_type.to_ascii_lowercase();
        if mt.starts_with("a3-highgpu-8g") || mt.starts_with("a3-edgegpu-8g") {
            GpuDirect::Tcpx
        } else if mt.starts_with("a3-megagpu-8g") {
            GpuDirect::Tcpxo
        } else if mt.starts_with("a3-ultragpu-8g")
            || mt.starts_with("a4-highgpu-8g")
            || mt.starts_with("a4x-")
        {
            GpuDirect::Rdma
        } else {
            GpuDirect::None
        }
    }

    fn expected_net(self) -> &'static str {
        match self {
            GpuDirect::None => "",
            GpuDirect::Tcpx => "GPUDirect-TCPX (NET/GPUDirectTCPX)",
            GpuDirect::Tcpxo => "GPUDirect-TCPXO (NET/FasTrak)",
            GpuDirect::Rdma => "GPUDirect RDMA (NET/IB via gIB)",
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

/// A loud warning when a machine that should use GPUDirect ran NCCL's inter-node traffic
/// over plain sockets; `None` when nothing is wrong, nothing is known, or the machine has
/// no GPUDirect to lose.
pub fn fallback_warning(expected: GpuDirect, transport: Option<&Transport>) -> Option<String> {
    if expected == GpuDirect::None {
        return None;
    }
    let net = transport?.inter_node_net()?;
    if *net != Net::Socket {
        return None;
    }
    Some(format!(
        "WARNING: NCCL FELL BACK TO NET/Socket on a machine type that should use {}: \
         inter-node traffic goes through host TCP sockets, about 3x slower \
         (SkyPilot measured all_reduce busbw 19.39 GB/s without TCPX vs 65.72 GB/s with it \
         on 2 x a3-highgpu-8g). Fix: {}.",
        expected.expected_net(),
        expected.fix_hint()
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

    #[test]
    fn warning_only_for_gpudirect_machines_on_socket() {
        let socket_2_nodes = detect(&[
            "Using network Socket",
            "comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0",
        ]);
        let socket_channels = detect(&["Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0"]);
        let socket_one_node = detect(&[
            "Using network Socket",
            "comm 0x1 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0",
            "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM",
        ]);
        let tcpx = detect(&["Channel 00/0 : 0[0] -> 8[0] [send] via NET/GPUDirectTCPX_v7/0"]);
        let mixed = detect(&[
            "Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA",
            "Channel 01/0 : 0[0] -> 8[0] [send] via NET/Socket/0",
        ]);

        for flavour in [GpuDirect::Tcpx, GpuDirect::Tcpxo, GpuDirect::Rdma] {
            for t in [&socket_2_nodes, &socket_channels, &mixed] {
                let w = fallback_warning(flavour, Some(t)).expect("warns");
                assert!(w.starts_with("WARNING: NCCL FELL BACK TO NET/Socket"), "{w}");
                assert!(w.contains("3x"), "{w}");
            }
            assert_eq!(fallback_warning(flavour, Some(&socket_one_node)), None);
            assert_eq!(fallback_warning(flavour, Some(&tcpx)), None);
            assert_eq!(fallback_warning(flavour, None), None);
        }
        assert_eq!(fallback_warning(GpuDirect::None, Some(&socket_2_nodes)), None);
        let w = fallback_warning(GpuDirect::Tcpxo, Some(&socket_channels)).unwrap();
        assert!(w.contains("TCPXO") && w.contains("nccl-env-profile.sh"), "{w}");
        let w = fallback_warning(GpuDirect::Rdma, Some(&socket_channels)).unwrap();
        assert!(w.contains("gIB"), "{w}");
    }
}
