//! NICs and the reachability matrix. Pure: the node script's NIC sections in, NIC facts
//! out; probe results in, the node, NIC or pair to blame out.
//!
//! The matrix: every node probes every other on every data NIC, in rounds (round `r`:
//! node `i` probes node `i+r mod N` on all its data NICs at once), so a NIC sends one
//! probe and answers one at a time, and `N-1` rounds cover every ordered pair. A probe
//! is `ping -q -c C -i 0.005` bound to the NIC; [`analyse`] reads the rounds.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// One NIC of a node as its /sys and `ip -4 addr` show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Nic {
    pub name: String,
    pub state: String,
    pub mtu: Option<u32>,
    /// Link speed in Mbit/s, when the driver says.
    pub speed: Option<u32>,
    pub numa: Option<i32>,
    /// Its first IPv4 address as the node printed it (checked before it is probed:
    /// [`probe_target`]).
    pub addr: Option<String>,
    /// The subnets the node reaches through this NIC: its address's prefix, and the
    /// routes through it (GCP gives a NIC a /32 address and its subnet as a route).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subnets: Vec<Subnet>,
    /// A bridge (the node script's sixth field): never a data NIC, whatever its name.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub bridge: bool,
}

/// An IPv4 subnet: address and prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Subnet {
    pub addr: std::net::Ipv4Addr,
    pub len: u8,
}

impl Subnet {
    /// `10.0.0.0/24` (an address in it, `10.0.0.5/24`, names it too); `None` unless an
    /// IPv4 address with a prefix of 1 to 32.
    fn parse(cidr: &str) -> Option<Subnet> {
        let (a, l) = cidr.split_once('/')?;
        let len: u8 = l.parse().ok().filter(|l| (1..=32).contains(l))?;
        let any = Subnet {
            addr: a.parse().ok()?,
            len,
        };
        Some(Subnet {
            addr: any.network().into(),
            len,
        })
    }

    fn mask(self) -> u32 {
        u32::MAX << (32 - u32::from(self.len))
    }

    fn network(self) -> u32 {
        u32::from(self.addr) & self.mask()
    }

    pub fn contains(self, ip: std::net::Ipv4Addr) -> bool {
        u32::from(ip) & self.mask() == self.network()
    }

    /// Its network and broadcast addresses, for a prefix that has them (up to /30).
    fn ends(self) -> Option<(u32, u32)> {
        (self.len <= 30).then(|| (self.network(), self.network() | !self.mask()))
    }
}

impl std::fmt::Display for Subnet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", std::net::Ipv4Addr::from(self.network()), self.len)
    }
}

/// The `nics`, `addrs` and `routes` sections.
pub fn parse_nics(nics: &str, addrs: &str, routes: &str) -> Vec<Nic> {
    let mut out: Vec<Nic> = nics
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 5 {
                return None;
            }
            Some(Nic {
                name: f[0].to_string(),
                state: f[1].to_string(),
                mtu: f[2].parse().ok(),
                speed: f[3].parse::<i64>().ok().filter(|s| *s > 0).map(|s| s as u32),
                numa: f[4].parse().ok().filter(|n| *n >= 0),
                addr: None,
                subnets: vec![],
                bridge: f.get(5) == Some(&"bridge"),
            })
        })
        .collect();
    // `2: eth1    inet 10.88.1.1/24 brd 10.88.1.255 scope global eth1\       valid_lft ...`
    for l in addrs.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let Some(i) = f.iter().position(|w| *w == "inet") else {
            continue;
        };
        let (Some(dev), Some(cidr)) = (f.get(1), f.get(i + 1)) else {
            continue;
        };
        let Some(n) = out.iter_mut().find(|n| n.name == *dev) else {
            continue;
        };
        if n.addr.is_none() {
            n.addr = Some(cidr.split('/').next().unwrap_or("").to_string());
        }
        if let Some(net) = Subnet::parse(cidr).filter(|s| s.len < 32) {
            n.subnets.push(net);
        }
    }
    // `10.37.0.0/20 via 10.37.0.1 dev eth1 proto static`: unicast routes of any table
    // (a first word of `local`, `broadcast`, ... is another type); not the default route
    // and not one host.
    for l in routes.lines() {
        let mut f: Vec<&str> = l.split_whitespace().collect();
        if f.first() == Some(&"unicast") {
            f.remove(0);
        }
        let Some(net) = f.first().and_then(|d| Subnet::parse(d)).filter(|s| s.len < 32) else {
            continue;
        };
        let Some(dev) = f.iter().position(|w| *w == "dev").and_then(|i| f.get(i + 1)) else {
            continue;
        };
        if let Some(n) = out.iter_mut().find(|n| n.name == *dev) {
            n.subnets.push(net);
        }
    }
    for n in &mut out {
        n.subnets.sort();
        n.subnets.dedup();
    }
    out.sort_by(|a, b| crate::telemetry::layout::natural_cmp(&a.name, &b.name));
    out
}

/// Whether a node probes `addr`, an address its peer reports on the same NIC `nic`:
/// only a unicast IPv4 address inside one of the node's own subnets on that NIC, not the
/// subnet's network or broadcast address and not the node's own. Else why not.
pub fn probe_target(nic: &Nic, addr: &str) -> Result<std::net::Ipv4Addr, String> {
    let shown: String = addr.chars().flat_map(char::escape_debug).take(64).collect();
    let Ok(ip) = addr.parse::<std::net::Ipv4Addr>() else {
        return Err(format!("`{shown}` is not an IPv4 address"));
    };
    let kind = if ip.is_unspecified() {
        Some("the unspecified address")
    } else if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_multicast() {
        Some("a multicast address")
    } else if ip.is_broadcast() {
        Some("the broadcast address")
    } else if u32::from(ip) >> 28 == 0xf {
        Some("a reserved address (240.0.0.0/4)")
    } else {
        None
    };
    if let Some(kind) = kind {
        return Err(format!("{ip} is {kind}, not a unicast one"));
    }
    if nic.addr.as_deref() == Some(addr) {
        return Err(format!("{ip} is the prober's own address"));
    }
    if nic.subnets.is_empty() {
        return Err(format!(
            "the prober knows no subnet of its own on {} (no prefix or route through it)",
            nic.name
        ));
    }
    let Some(net) = nic.subnets.iter().find(|s| s.contains(ip)) else {
        let mine: Vec<String> = nic.subnets.iter().map(Subnet::to_string).collect();
        let link_local = if ip.is_link_local() {
            "a link-local address "
        } else {
            ""
        };
        return Err(format!(
            "{ip} is {link_local}outside the prober's subnets on {} ({})",
            nic.name,
            mine.join(", ")
        ));
    };
    if let Some((network, broadcast)) = net.ends() {
        if u32::from(ip) == broadcast || u32::from(ip) == network {
            return Err(format!(
                "{ip} is the {} address of {net}",
                if u32::from(ip) == broadcast {
                    "broadcast"
                } else {
                    "network"
                }
            ));
        }
    }
    Ok(ip)
}

/// The interface of `ip route show default`'s first route.
pub fn default_route(route: &str) -> Option<String> {
    let f: Vec<&str> = route.split_whitespace().collect();
    let i = f.iter().position(|w| *w == "dev")?;
    f.get(i + 1).map(|s| s.to_string())
}

/// An RDMA port as the `rdma` section lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RdmaPort {
    pub device: String,
    pub port: String,
    /// `4:ACTIVE` when up.
    pub state: String,
    /// `5:LinkUp` when up.
    pub phys_state: String,
    pub netdev: Option<String>,
    pub numa: Option<i32>,
}

/// The `rdma` section: its ports and the count of RDMA devices.
pub fn parse_rdma(text: &str) -> (Vec<RdmaPort>, usize) {
    let mut ports = vec![];
    let mut devices = 0;
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.first() == Some(&"devices") {
            devices = f.get(1).and_then(|n| n.parse().ok()).unwrap_or(0);
            continue;
        }
        if f.len() < 4 {
            continue;
        }
        // The netdev may be missing: the NUMA field then comes fifth.
        let (netdev, numa) = match f.len() {
            4 => (None, None),
            5 => (None, f[4].parse().ok()),
            _ => (Some(f[4].to_string()), f[5].parse().ok()),
        };
        ports.push(RdmaPort {
            device: f[0].to_string(),
            port: f[1].to_string(),
            state: f[2].to_string(),
            phys_state: f[3].to_string(),
            netdev,
            numa: numa.filter(|n: &i32| *n >= 0),
        });
    }
    (ports, devices)
}

/// The NICs that carry a fleet's traffic between nodes: every NIC that is not virtual and
/// not the control NIC (the default route's; `eth0` without a default route). On A3
/// Ultra / A4 this is the second gVNIC and the MRDMA netdevs; on A3 High / Mega the
/// 4 or 8 data gVNICs; on the testbed `eth1..K`.
pub fn data_nics<'a>(nics: &'a [Nic], route: Option<&str>) -> Vec<&'a Nic> {
    use crate::telemetry::layout::{Classifier, NodeLayout, Role};
    use crate::telemetry::rate::Device;
    let layout = NodeLayout {
        default_route: route,
        rdma_netdevs: &[],
        has_rdma: false,
    };
    let c = Classifier::auto();
    nics.iter()
        .filter(|n| !n.bridge && c.role(&Device::Nic { name: n.name.clone() }, &layout) == Role::Data)
        .collect()
}

/// Whether `name` matches NCCL's interface list `list` (`NCCL_SOCKET_IFNAME`): names by
/// prefix, comma-separated; a leading `^` excludes them, a leading `=` (after the `^`)
/// asks for exact names. As NVIDIA/nccl src/misc/socket.cc (`findInterfaces`,
/// `matchIfList`) and src/misc/utils.cc (`parseStringList`, `matchIf`) read it.
pub fn nccl_if_match(list: &str, name: &str) -> bool {
    nccl_list_match(list, name, None)
}

/// NCCL's `matchIfList` over a `^`/`=` list of `name[:port]` entries: an entry's port
/// counts when `port` is given (`NCCL_IB_HCA`'s devices), not for interfaces.
pub fn nccl_list_match(list: &str, name: &str, port: Option<&str>) -> bool {
    let (not, list) = match list.strip_prefix('^') {
        Some(l) => (true, l),
        None => (false, list),
    };
    let (exact, list) = match list.strip_prefix('=') {
        Some(l) => (true, l),
        None => (false, list),
    };
    let hit = list.split(',').filter(|e| !e.is_empty()).any(|e| {
        let (entry, want_port) = match e.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (e, None),
        };
        // An interface entry of a port alone names nothing; an HCA's (`:1`) names port 1
        // of every device, as NCCL's prefix match of nothing does.
        let named = port.is_some() || !entry.is_empty();
        let name_ok = named
            && if exact {
                name == entry
            } else {
                name.starts_with(entry)
            };
        let port_ok = match (want_port, port) {
            (Some(w), Some(p)) => w == p,
            _ => true,
        };
        name_ok && port_ok
    });
    hit != not
}

/// The interfaces NCCL's socket transport and bootstrap use on a node, as
/// NVIDIA/nccl src/misc/socket.cc (`ncclFindInterfaces`) picks them among the
/// interfaces with an address: `NCCL_SOCKET_IFNAME` when set (more than one character),
/// else those named `ib*`, else all but `docker*` and `lo*`, else `docker*`, else `lo*`.
/// Only IPv4 addresses are known here (the node script reads `ip -4 addr`).
pub fn nccl_socket_nics<'a>(nics: &'a [Nic], ifname: Option<&str>) -> Vec<&'a Nic> {
    let with_addr: Vec<&Nic> = nics.iter().filter(|n| n.addr.is_some()).collect();
    let pick = |list: &str| -> Vec<&'a Nic> {
        with_addr
            .iter()
            .copied()
            .filter(|n| nccl_if_match(list, &n.name))
            .collect()
    };
    if let Some(list) = ifname.filter(|l| l.len() > 1) {
        return pick(list);
    }
    for list in ["ib", "^docker,lo", "docker", "lo"] {
        let found = pick(list);
        if !found.is_empty() {
            return found;
        }
    }
    vec![]
}

/// Probes per pair and NIC (each way) for a fleet of `n` nodes: 600 over its rounds,
/// 100 to 400. A node's loss shows over its pairs: with both ends of a pair probing each
/// other, a node of `R` rounds sends and answers `2 × 600` probes, and at 2% loss the
/// pairs other than its worst still lose some 20 (it takes 3 to be named, at
/// [`MIN_LOST`]); small fleets, with few pairs, get more a pair.
pub fn probes_per_pair(n: usize) -> u32 {
    (600 / round_count(n).max(1)).clamp(100, 400) as u32
}

/// How many rounds of disjoint pairs a fleet of `n` nodes gets: every pair (`n-1`
/// rounds, `n` when odd) up to 8 nodes, then `⌈log2 n⌉ + 1` (5 at 16 nodes, 7 at 64, 11 at 1024), each
/// node meeting that many different partners (docs/DESIGN.md, the doctor's probe
/// schedule).
pub fn round_count(n: usize) -> usize {
    if n < 2 {
        return 0;
    }
    // The circle method's full tournament: n-1 rounds, n with a bye (odd n).
    let full = n - 1 + n % 2;
    if n <= 8 {
        return full;
    }
    let log = usize::BITS - (n - 1).leading_zeros();
    (log as usize + 1).min(full)
}

/// The rounds of a fleet of `n` nodes: perfect matchings (each node in at most one pair
/// a round) from the round-robin tournament's circle method, so no two rounds pair the
/// same nodes and a node meets a new partner each round; [`round_count`] of them. With
/// an odd `n` one node sits each round out (a different one each round). The nodes go
/// round the circle in a shuffled order (a fixed seed: the same fleet gets the same
/// schedule), so a node's partners are not its neighbours by name.
pub fn rounds(n: usize) -> Vec<Vec<(usize, usize)>> {
    let count = round_count(n);
    if count == 0 {
        return vec![];
    }
    // The circle: m slots (n, or n+1 with a bye); slot 0 stays, the others turn.
    let m = n + n % 2;
    let mut order: Vec<usize> = (0..n).collect();
    if n > 8 {
        // xorshift: a fixed, portable shuffle.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ n as u64;
        for i in (1..n).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            order.swap(i, (x % (i as u64 + 1)) as usize);
        }
    }
    let node = |slot: usize| order.get(slot).copied();
    (0..count)
        .map(|r| {
            let at = |k: usize| if k == 0 { 0 } else { 1 + (k - 1 + r) % (m - 1) };
            (0..m / 2)
                .filter_map(|k| {
                    let (a, b) = (node(at(k))?, node(at(m - 1 - k))?);
                    Some((a.min(b), a.max(b)))
                })
                .collect()
        })
        .collect()
}

const PROBE: &str = "@@fd-probe";

/// What a node's probe script prints once it runs, before it waits for its start time.
pub const READY: &str = "@@fd-probe-ready";

/// What a node's probe script prints once its pings have ended, before the time.
pub const PROBES_END: &str = "@@fd-probes-end";

/// A ping to send: NIC, address, id (the number its output carries), probes.
pub type Target = (String, String, usize, u32);

/// The gap between a ping's probes, ms. iputils' ping busy-waits (a `sched_yield` loop)
/// whenever its next probe is due in 10 ms or less and no reply is outstanding
/// (`main_loop` in ping/ping_common.c): at 5 ms each ping holds a core for its whole run,
/// which on nodes that share cores starves everything else and on any node burns a core
/// per NIC and partner. From 10 ms on it sleeps in `recvmsg` (a probe then takes some 17
/// to 20 ms, the socket timeout's rounding to the kernel's ticks).
pub const PACE_MS: u64 = 10;

/// The most probes one ping sends: a pair's probes beyond it are split over several pings
/// run at once, so every pair's probes end within one ping's time.
pub const PING_MAX: u32 = 100;

/// A pair's `count` probes as pings of at most [`PING_MAX`], as even as can be.
pub fn pings(count: u32) -> Vec<u32> {
    let n = count.div_ceil(PING_MAX).max(1);
    (0..n).map(|i| count / n + u32::from(i < count % n)).collect()
}

/// How long a node's probes take for pairs of `count`: its longest ping at 20 ms a
/// probe, and room for the pings to start and the last replies to come back.
pub fn probes_ms(count: u32) -> u64 {
    u64::from(pings(count).into_iter().max().unwrap_or(0)) * 20 + 300
}

/// A ping's deadline (its `-w`), counted from its own start: its probes at 30 ms, and a
/// second.
pub fn probe_deadline_s(count: u32) -> u64 {
    (u64::from(count) * 30).div_ceil(1000) + 1
}

/// The script a node runs for all its probes, in one session (as `sh -c SCRIPT`, its
/// stdin free): it says [`READY`], then reads its start time from stdin, in nanoseconds
/// on the node's own clock (the caller sends it once every prober is ready, its clock
/// offset in it; an empty or unreadable line, or a node without a nanosecond clock: at
/// once), and at that time starts every ping at once (one per (NIC, peer address, part
/// of the pair's probes)): the pairs are those of the rounds of disjoint pairs
/// ([`rounds`]), a node's partners all probed together, so the whole look takes one
/// ping's time at any fleet size. Once they have ended it prints `@@fd-probes-end TIME`.
/// A `ping` that may not send at [`PACE_MS`] as this user falls back to 5 probes at
/// 200 ms. ping's own deadline (`-w`, [`probe_deadline_s`]) bounds each ping from its
/// own start: with it, ping stops once `-c` probes are answered or at the deadline, so a
/// lossy pair is sent a few more probes than the others (its loss is still lost over
/// sent), an unreachable one probes until the deadline, and one on a NIC so congested
/// that ping paces itself by its late replies is stopped there, what it did not send
/// counting as not sent. (An outer `timeout` counted from before ping started: on nodes
/// that share cores, pings started late under load were stopped before they had printed
/// anything, and read as unreachable.)
///
/// Each target is (NIC, address, id, probes): the id names the ping in the output (the
/// first number of its `@@fd-probe` line), so the caller knows whom it probed.
pub fn schedule_script(targets: &[Target]) -> String {
    let mut s = String::from("#!/bin/sh\n# flightdeck doctor: the reachability probes of this node\n");
    let _ = writeln!(s, "echo {READY}; st=; IFS= read -r st");
    s.push_str("case $st in ''|*[!0-9]*) st=0;; esac\n");
    s.push_str("now=$(date +%s%N 2>/dev/null); case $now in ''|*[!0-9]*) st=0;; esac\n");
    s.push_str(
        "if [ \"$st\" != 0 ]; then w=$(( st - now )); \
         [ \"$w\" -gt 0 ] && sleep $(( w / 1000000000 )).$(printf %09d $(( w % 1000000000 ))); fi\n",
    );
    let pace = format!("{}.{:03}", PACE_MS / 1000, PACE_MS % 1000);
    let _ = writeln!(
        s,
        "probe() {{ o=$(exec ping -n -q -c \"$4\" -w \"$5\" -i {pace} -W 1 -I \"$2\" \"$3\" 2>&1); \
         case \"$o\" in *'minimal interval'*|*'cannot flood'*) o=$(ping -n -q -c 5 -i 0.2 -W 1 -I \"$2\" \"$3\" 2>&1);; esac; \
         printf '{PROBE} %s %s %s\\n%s\\n{PROBE}-end\\n' \"$1\" \"$2\" \"$3\" \"$o\"; }}",
    );
    for (nic, addr, id, count) in targets {
        let _ = writeln!(
            s,
            "probe {id} {} {} {count} {} &",
            crate::detach::quote(nic),
            crate::detach::quote(addr),
            probe_deadline_s(*count)
        );
    }
    let _ = writeln!(s, "wait; echo \"{PROBES_END} $(date +%s%N)\"");
    s
}

/// One probe's result.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Probe {
    pub from: usize,
    pub to: usize,
    pub nic: String,
    pub sent: u32,
    pub received: u32,
    pub avg_ms: Option<f64>,
    /// ping's own words when it printed no statistics (`connect: Network is unreachable`).
    pub error: Option<String>,
}

/// The parts of a pair's probes (the pings [`pings`] split it into) as one probe per
/// (from, to, NIC), in the order first seen: sent and received summed, the average RTT
/// weighted by the replies. Parts that printed statistics count; a pair whose every part
/// failed keeps its first part's error.
pub fn merge_parts(parts: Vec<Probe>) -> Vec<Probe> {
    let mut merged: Vec<Probe> = vec![];
    let mut at: std::collections::HashMap<(usize, usize, String), usize> = Default::default();
    for p in parts {
        let key = (p.from, p.to, p.nic.clone());
        let Some(&k) = at.get(&key) else {
            at.insert(key, merged.len());
            merged.push(p);
            continue;
        };
        let m = &mut merged[k];
        match (m.error.is_some(), p.error.is_some()) {
            (_, true) => {}
            (true, false) => *m = p,
            (false, false) => {
                let rtt = |q: &Probe| q.avg_ms.map(|a| (a * f64::from(q.received), q.received));
                m.avg_ms = match (rtt(m), rtt(&p)) {
                    (Some((a, x)), Some((b, y))) if x + y > 0 => Some((a + b) / f64::from(x + y)),
                    (a, b) => a.or(b).map(|(v, x)| v / f64::from(x.max(1))),
                };
                m.sent += p.sent;
                m.received += p.received;
            }
        }
    }
    merged
}

/// One probe as a node's output reports it: its id ([`schedule_script`]), NIC, sent,
/// received, average RTT, error.
pub type ProbeLine = (usize, String, u32, u32, Option<f64>, Option<String>);

/// A node's standing over the remaining probes of a NIC.
#[derive(Default)]
struct Standing {
    /// Its peers, and the peers of its bad probes.
    peers: BTreeSet<usize>,
    bad: BTreeSet<usize>,
    /// Packets lost and sent per peer, over the probes that got any answer.
    loss: BTreeMap<usize, (u64, u64)>,
    rtts: Vec<f64>,
}

impl Standing {
    fn lost_sent(&self) -> (u64, u64) {
        self.loss
            .values()
            .fold((0, 0), |(l, s), (pl, ps)| (l + pl, s + ps))
    }

    /// Lossy as a node: the loss shows over its pairs, not in one of them. Without its
    /// worst pair it still loses [`MIN_LOST`] packets and [`LOSSY_SHARE`] of them, so one
    /// lossy pair is named as a pair rather than blamed on whichever end comes first; and
    /// more than the pairs without it lose at their rate `others` (lost, sent) would
    /// ([`beyond_chance`], of `tests` nodes): its partners are good elsewhere.
    fn lossy(&self, others: (u64, u64), tests: usize) -> bool {
        let (lost, sent) = self.lost_sent();
        let worst = self.loss.values().max().copied().unwrap_or((0, 0));
        let (rest_lost, rest_sent) = (lost - worst.0, sent - worst.1);
        let rate = others.0 as f64 / others.1.max(1) as f64;
        rest_lost >= MIN_LOST
            && rest_lost as f64 >= LOSSY_SHARE * rest_sent as f64
            && beyond_chance(rest_lost, rate * rest_sent as f64, tests)
    }
}

/// Whether losing `lost` packets where `expected` would be lost at the fleet's own rate
/// is beyond chance among `tests` such looks: the Poisson tail P(X ≥ lost) times `tests`
/// (Bonferroni) under 1%. At 1024 nodes losing 0.1% everywhere (200 probes a pair), a
/// pair is named from 5 lost, not 3; on a fleet that loses nothing, from [`MIN_LOST`].
pub fn beyond_chance(lost: u64, expected: f64, tests: usize) -> bool {
    if expected <= 0.0 {
        return true;
    }
    // P(X < lost) summed term by term.
    let mut term = (-expected).exp();
    let mut below = 0.0;
    for i in 0..lost {
        below += term;
        term *= expected / (i + 1) as f64;
    }
    (1.0 - below).max(0.0) * tests.max(1) as f64 <= 0.01
}

/// The probes a node's output reports.
pub fn parse_probes(out: &str) -> Vec<ProbeLine> {
    let mut res = vec![];
    let mut cur: Option<(usize, String, Vec<String>)> = None;
    for l in out.lines() {
        if l == format!("{PROBE}-end") {
            if let Some((round, nic, body)) = cur.take() {
                res.push(read_ping(round, nic, &body));
            }
        } else if let Some(rest) = l.strip_prefix(PROBE).and_then(|r| r.strip_prefix(' ')) {
            let mut w = rest.split(' ');
            let round = w.next().and_then(|r| r.parse().ok());
            let nic = w.next().unwrap_or("").to_string();
            cur = round.map(|r| (r, nic, vec![]));
        } else if let Some((_, _, body)) = cur.as_mut() {
            body.push(l.to_string());
        }
    }
    res
}

fn read_ping(round: usize, nic: String, body: &[String]) -> ProbeLine {
    let mut sent = 0;
    let mut received = 0;
    let mut avg = None;
    let mut stats = false;
    for l in body {
        if l.contains("packets transmitted") {
            stats = true;
            let nums: Vec<u32> = l
                .split(',')
                .filter_map(|p| p.split_whitespace().next()?.parse().ok())
                .collect();
            sent = nums.first().copied().unwrap_or(0);
            received = nums.get(1).copied().unwrap_or(0);
        } else if let Some(rest) = l
            .strip_prefix("rtt min/avg/max/mdev = ")
            .or_else(|| l.strip_prefix("round-trip min/avg/max = "))
        {
            avg = rest.split('/').nth(1).and_then(|v| v.trim().parse().ok());
        }
    }
    let error = (!stats).then(|| {
        body.iter()
            .map(|l| l.trim())
            .find(|l| !l.is_empty())
            .unwrap_or("ping printed nothing")
            .to_string()
    });
    (round, nic, sent, received, avg, error)
}

/// Whether a probe's error says ping could not run at all (not on the node), rather than
/// anything about the network: `sh: 1: ping: not found`, bash's `command not found`,
/// timeout's `failed to run command 'ping'`.
pub fn not_run(error: &str) -> bool {
    error.contains("ping: not found")
        || error.contains("ping: command not found")
        || error.contains("failed to run command 'ping'")
}

/// What is wrong with a NIC of a node, or between two nodes on a NIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Trouble {
    Unreachable,
    Lossy,
    Slow,
}

impl Trouble {
    pub fn as_str(self) -> &'static str {
        match self {
            Trouble::Unreachable => "unreachable",
            Trouble::Lossy => "lossy",
            Trouble::Slow => "slow",
        }
    }
}

/// A problem [`analyse`] names: on one node's NIC (`b: None`; every pair through it is
/// bad), or between two nodes on a NIC.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Named {
    pub trouble: Trouble,
    pub nic: String,
    pub a: usize,
    pub b: Option<usize>,
    pub evidence: String,
    /// A lossy NIC whose round trips are slow too (a throttled NIC: its queue delays, then
    /// drops).
    pub also_slow: bool,
}

/// A NIC's figures over all its probes.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RailSummary {
    pub nic: String,
    pub probes: usize,
    pub sent: u64,
    pub received: u64,
    pub median_ms: Option<f64>,
}

/// Loss under this share (with fewer than [`MIN_LOST`] packets lost) is noise.
pub const LOSSY_SHARE: f64 = 0.005;
pub const MIN_LOST: u64 = 3;

/// Slow: a round trip over `SLOW_FACTOR` times the NIC's lower quartile plus
/// [`SLOW_MARGIN_MS`].
pub const SLOW_FACTOR: f64 = 3.0;
pub const SLOW_MARGIN_MS: f64 = 1.0;

/// The lower quartile of values already sorted by [`median`](crate::telemetry::imbalance::median).
fn quartile(sorted: &[f64]) -> Option<f64> {
    sorted.get(sorted.len() / 4).copied()
}

fn pct(lost: u64, sent: u64) -> f64 {
    if sent == 0 {
        0.0
    } else {
        100.0 * lost as f64 / sent as f64
    }
}

/// Name who is to blame, per NIC. Greedy, worst first: a node whose remaining pairs on a
/// NIC are (nearly) all bad is named, and its pairs are explained by it; what is left is
/// named pair by pair. A node is named only with two or more peers (with two nodes, the
/// pair is all one can say).
pub fn analyse(probes: &[Probe]) -> (Vec<Named>, Vec<RailSummary>) {
    analyse_with(probes, &BTreeMap::new())
}

/// Each NIC's baseline round trip over `probes` (the lower quartile of its probes'
/// averages), which [`analyse_with`] judges slow by.
pub fn baselines(probes: &[Probe]) -> BTreeMap<String, f64> {
    let mut by: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for p in probes {
        if let Some(a) = p.avg_ms {
            by.entry(p.nic.clone()).or_default().push(a);
        }
    }
    by.into_iter()
        .filter_map(|(nic, mut v)| {
            crate::telemetry::imbalance::median(&mut v);
            Some((nic, quartile(&v)?))
        })
        .collect()
}

/// [`analyse`], slow judged by `baselines` where they name the NIC (a second look at a
/// few suspects has no fleet of its own to compare with: the first look's is used).
pub fn analyse_with(probes: &[Probe], baselines: &BTreeMap<String, f64>) -> (Vec<Named>, Vec<RailSummary>) {
    let mut by_nic: BTreeMap<&str, Vec<&Probe>> = BTreeMap::new();
    for p in probes {
        by_nic.entry(p.nic.as_str()).or_default().push(p);
    }
    let mut named = vec![];
    let mut rails = vec![];
    for (nic, ps) in by_nic {
        let mut rtts: Vec<f64> = ps.iter().filter_map(|p| p.avg_ms).collect();
        let median = crate::telemetry::imbalance::median(&mut rtts);
        // The baseline of "slow": the lower quartile, since one slow node of four is in
        // half of the pairs, which moves the median.
        let baseline = baselines.get(nic).copied().or_else(|| quartile(&rtts));
        rails.push(RailSummary {
            nic: nic.to_string(),
            probes: ps.len(),
            sent: ps.iter().map(|p| p.sent as u64).sum(),
            received: ps.iter().map(|p| p.received as u64).sum(),
            median_ms: median,
        });
        let slow_over = baseline.map(|m| m * SLOW_FACTOR + SLOW_MARGIN_MS);
        let unreachable = |p: &Probe| p.received == 0;
        let slow = |p: &Probe| matches!((p.avg_ms, slow_over), (Some(a), Some(t)) if a > t);
        let mut remaining: Vec<&Probe> = ps.clone();
        for trouble in [Trouble::Unreachable, Trouble::Lossy, Trouble::Slow] {
            loop {
                // Per node over the remaining probes: peers, bad peers, lost/sent.
                let mut per: BTreeMap<usize, Standing> = BTreeMap::new();
                for p in &remaining {
                    for (me, peer) in [(p.from, p.to), (p.to, p.from)] {
                        let e = per.entry(me).or_default();
                        e.peers.insert(peer);
                        let bad = match trouble {
                            Trouble::Unreachable => unreachable(p),
                            Trouble::Lossy => false,
                            Trouble::Slow => slow(p),
                        };
                        if bad {
                            e.bad.insert(peer);
                        }
                        if !unreachable(p) {
                            let l = e.loss.entry(peer).or_default();
                            l.0 += u64::from(p.sent - p.received.min(p.sent));
                            l.1 += u64::from(p.sent);
                        }
                        if let Some(a) = p.avg_ms {
                            e.rtts.push(a);
                        }
                    }
                }
                let score = |s: &Standing| match trouble {
                    Trouble::Lossy => {
                        let (lost, sent) = s.lost_sent();
                        pct(lost, sent)
                    }
                    _ => s.bad.len() as f64,
                };
                // Loss over every remaining answered probe, and how many nodes are looked at.
                let all = remaining
                    .iter()
                    .filter(|p| !unreachable(p))
                    .fold((0u64, 0u64), |(l, s), p| {
                        (
                            l + u64::from(p.sent - p.received.min(p.sent)),
                            s + u64::from(p.sent),
                        )
                    });
                let looked = per.len();
                let pick = per
                    .iter()
                    .filter(|(_, s)| {
                        s.peers.len() >= 2
                            && match trouble {
                                Trouble::Lossy => {
                                    let (l, n) = s.lost_sent();
                                    s.lossy((all.0.saturating_sub(l), all.1.saturating_sub(n)), looked)
                                }
                                _ => s.bad.len() == s.peers.len(),
                            }
                    })
                    .max_by(|a, b| score(a.1).total_cmp(&score(b.1)))
                    .map(|(n, s)| {
                        let (lost, sent) = s.lost_sent();
                        (*n, s.peers.len(), lost, sent, s.rtts.clone())
                    });
                let Some((node, peers, lost, sent, mut rtts)) = pick else {
                    break;
                };
                // What the pairs without this node lose, to say it of the others.
                let (others_lost, others_sent) = remaining
                    .iter()
                    .filter(|p| p.from != node && p.to != node && !unreachable(p))
                    .fold((0u64, 0u64), |(l, s), p| {
                        (
                            l + u64::from(p.sent - p.received.min(p.sent)),
                            s + u64::from(p.sent),
                        )
                    });
                let rtt = crate::telemetry::imbalance::median(&mut rtts);
                let also_slow =
                    trouble == Trouble::Lossy && matches!((rtt, slow_over), (Some(r), Some(t)) if r > t);
                let evidence = match trouble {
                    Trouble::Unreachable => format!("no reply on {nic} to or from any of its {peers} peers"),
                    Trouble::Lossy => format!(
                        "{lost} of {sent} probes lost ({:.1}%) on {nic} with its {peers} peers; {}{}",
                        pct(lost, sent),
                        if others_lost == 0 {
                            "the other pairs lose none".to_string()
                        } else {
                            format!(
                                "the other pairs lose {others_lost} of {others_sent} ({:.1}%)",
                                pct(others_lost, others_sent)
                            )
                        },
                        if also_slow {
                            format!(
                                "; round trip {:.2} ms, where the NIC usually takes {:.3} ms",
                                rtt.unwrap_or(0.0),
                                baseline.unwrap_or(0.0)
                            )
                        } else {
                            String::new()
                        }
                    ),
                    Trouble::Slow => format!(
                        "round trip {:.2} ms on {nic} with its {peers} peers, where the NIC usually takes {:.3} ms",
                        rtt.unwrap_or(0.0),
                        baseline.unwrap_or(0.0)
                    ),
                };
                named.push(Named {
                    trouble,
                    nic: nic.to_string(),
                    a: node,
                    b: None,
                    evidence,
                    also_slow,
                });
                remaining.retain(|p| p.from != node && p.to != node);
            }
        }
        // What no node explains: pair by pair (both directions together), loss judged
        // against the rest's rate.
        let mut pairs: BTreeMap<(usize, usize), Vec<&Probe>> = BTreeMap::new();
        for p in &remaining {
            pairs
                .entry((p.from.min(p.to), p.from.max(p.to)))
                .or_default()
                .push(p);
        }
        let (all_lost, all_sent) =
            remaining
                .iter()
                .filter(|p| !unreachable(p))
                .fold((0u64, 0u64), |(l, s), p| {
                    (
                        l + u64::from(p.sent - p.received.min(p.sent)),
                        s + u64::from(p.sent),
                    )
                });
        let tests = pairs.len();
        for ((a, b), ps) in pairs {
            let sent: u64 = ps.iter().map(|p| p.sent as u64).sum();
            let received: u64 = ps.iter().map(|p| p.received.min(p.sent) as u64).sum();
            let lost = sent - received;
            let avg = ps
                .iter()
                .filter_map(|p| p.avg_ms)
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
            let (trouble, evidence) = if ps.iter().all(|p| unreachable(p)) {
                let why = ps
                    .iter()
                    .find_map(|p| p.error.clone())
                    .unwrap_or_else(|| format!("0 of {sent} probes answered"));
                (Trouble::Unreachable, format!("no reply on {nic}: {why}"))
            } else if lost >= MIN_LOST
                && lost as f64 >= LOSSY_SHARE * sent as f64
                && beyond_chance(
                    lost,
                    all_lost.saturating_sub(lost) as f64 / all_sent.saturating_sub(sent).max(1) as f64
                        * sent as f64,
                    tests,
                )
            {
                (
                    Trouble::Lossy,
                    format!("{lost} of {sent} probes lost ({:.1}%) on {nic}", pct(lost, sent)),
                )
            } else if ps.iter().any(|p| slow(p)) {
                (
                    Trouble::Slow,
                    format!(
                        "round trip {:.2} ms on {nic}, where the NIC usually takes {:.3} ms",
                        avg.unwrap_or(0.0),
                        baseline.unwrap_or(0.0)
                    ),
                )
            } else {
                continue;
            };
            named.push(Named {
                trouble,
                nic: nic.to_string(),
                a,
                b: Some(b),
                evidence,
                also_slow: false,
            });
        }
    }
    (named, rails)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(from: usize, to: usize, nic: &str, sent: u32, received: u32, avg: f64) -> Probe {
        Probe {
            from,
            to,
            nic: nic.into(),
            sent,
            received,
            avg_ms: (received > 0).then_some(avg),
            error: None,
        }
    }

    /// All rounds of `n` nodes on `nic`, both ends of each pair probing the other, with
    /// `f` deciding each probe.
    fn matrix(n: usize, nic: &str, f: impl Fn(usize, usize) -> (u32, u32, f64)) -> Vec<Probe> {
        rounds(n)
            .into_iter()
            .flatten()
            .flat_map(|(a, b)| [(a, b), (b, a)])
            .map(|(a, b)| {
                let (s, r, avg) = f(a, b);
                probe(a, b, nic, s, r, avg)
            })
            .collect()
    }

    #[test]
    fn nics_and_addresses() {
        let nics = parse_nics(
            "eth0 up 1500 10000 -\neth1 down 1400 - -\nlo unknown 65536 - -\nens5 up 8244 200000 1\n",
            "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever\n2: eth0    inet 10.88.0.1/24 brd 10.88.0.255 scope global eth0\\\n",
            "",
        );
        assert_eq!(
            nics.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
            vec!["ens5", "eth0", "eth1", "lo"]
        );
        let eth0 = nics.iter().find(|n| n.name == "eth0").unwrap();
        assert_eq!(
            (eth0.mtu, eth0.speed, eth0.addr.as_deref()),
            (Some(1500), Some(10000), Some("10.88.0.1"))
        );
        assert_eq!(nics[0].numa, Some(1));
        assert_eq!(
            default_route("default via 10.0.0.1 dev ens4 proto dhcp src 10.0.0.2 metric 100\n").as_deref(),
            Some("ens4")
        );
        let data: Vec<&str> = data_nics(&nics, None).iter().map(|n| n.name.as_str()).collect();
        assert_eq!(data, vec!["ens5", "eth1"]);
        let (ports, devices) =
            parse_rdma("mlx5_0 1 4:ACTIVE 5:LinkUp gpu0rdma0 0\nmlx5_1 1 1:DOWN 3:Disabled 1\ndevices 2\n");
        assert_eq!(devices, 2);
        assert_eq!(ports[0].netdev.as_deref(), Some("gpu0rdma0"));
        assert_eq!((ports[1].netdev.clone(), ports[1].numa), (None, Some(1)));
    }

    #[test]
    fn only_unicast_addresses_in_the_probers_own_subnets_are_probed() {
        let nics = parse_nics(
            "eth1 up 1500 - -\nens5 up 8244 - -\neth3 up 1500 - -\n",
            "3: eth1    inet 10.88.1.1/24 brd 10.88.1.255 scope global eth1\n\
             4: ens5    inet 10.37.0.59/32 brd 10.37.0.59 scope global dynamic ens5\n\
             5: eth3    inet 169.254.3.1/16 scope link eth3\n",
            // GCP: a /32 address, the subnet a route through the NIC; other types skipped.
            "default via 10.33.0.1 dev eth0 proto dhcp metric 100\n\
             10.37.0.0/20 via 10.37.0.1 dev ens5 proto static\n\
             10.37.0.1 dev ens5 scope link\n\
             local 10.37.0.59 dev ens5 table local proto kernel scope host src 10.37.0.59\n\
             broadcast 10.88.1.255 dev eth1 table local proto kernel scope link src 10.88.1.1\n",
        );
        let nic = |n: &str| nics.iter().find(|x| x.name == n).unwrap().clone();
        let (eth1, ens5, eth3) = (nic("eth1"), nic("ens5"), nic("eth3"));
        assert_eq!(
            eth1.subnets.iter().map(Subnet::to_string).collect::<Vec<_>>(),
            ["10.88.1.0/24"]
        );
        assert_eq!(
            ens5.subnets.iter().map(Subnet::to_string).collect::<Vec<_>>(),
            ["10.37.0.0/20"]
        );
        assert_eq!(probe_target(&eth1, "10.88.1.2"), Ok("10.88.1.2".parse().unwrap()));
        assert_eq!(probe_target(&ens5, "10.37.3.4"), Ok("10.37.3.4".parse().unwrap()));
        assert_eq!(
            probe_target(&eth3, "169.254.3.2"),
            Ok("169.254.3.2".parse().unwrap())
        );
        let no = |n: &Nic, a: &str| probe_target(n, a).unwrap_err();
        assert_eq!(
            no(&eth1, "169.254.169.254"),
            "169.254.169.254 is a link-local address outside the prober's subnets on eth1 (10.88.1.0/24)"
        );
        assert_eq!(
            no(&eth1, "8.8.8.8"),
            "8.8.8.8 is outside the prober's subnets on eth1 (10.88.1.0/24)"
        );
        assert_eq!(
            no(&eth1, "10.88.1.255"),
            "10.88.1.255 is the broadcast address of 10.88.1.0/24"
        );
        assert_eq!(
            no(&eth1, "10.88.1.0"),
            "10.88.1.0 is the network address of 10.88.1.0/24"
        );
        assert_eq!(no(&eth1, "10.88.1.1"), "10.88.1.1 is the prober's own address");
        assert_eq!(
            no(&eth1, "224.0.0.1"),
            "224.0.0.1 is a multicast address, not a unicast one"
        );
        assert_eq!(
            no(&eth1, "255.255.255.255"),
            "255.255.255.255 is the broadcast address, not a unicast one"
        );
        assert_eq!(
            no(&eth1, "127.0.0.1"),
            "127.0.0.1 is a loopback address, not a unicast one"
        );
        assert_eq!(
            no(&eth1, "0.0.0.0"),
            "0.0.0.0 is the unspecified address, not a unicast one"
        );
        assert_eq!(
            no(&eth1, "metadata.google.internal"),
            "`metadata.google.internal` is not an IPv4 address"
        );
        assert_eq!(no(&eth1, "-f"), "`-f` is not an IPv4 address");
        let mut bare = eth1.clone();
        bare.subnets.clear();
        assert!(no(&bare, "10.88.1.2").starts_with("the prober knows no subnet of its own on eth1"));
    }

    #[test]
    fn ping_output_and_the_schedule() {
        let out = "@@fd-probe 1 eth1 10.88.1.2\nPING 10.88.1.2 (10.88.1.2) from 10.88.1.1 eth1: 56(84) bytes of data.\n\n--- 10.88.1.2 ping statistics ---\n100 packets transmitted, 98 received, 2% packet loss, time 512ms\nrtt min/avg/max/mdev = 0.031/0.047/0.101/0.012 ms\n@@fd-probe-end\n\
                   @@fd-probe 1 eth2 10.88.2.2\nping: connect: Network is unreachable\n@@fd-probe-end\n\
                   @@fd-probe 2 eth3 10.88.3.2\n\n--- 10.88.3.2 ping statistics ---\n20 packets transmitted, 0 received, +20 errors, 100% packet loss, time 95ms\n\n@@fd-probe-end\n";
        let p = parse_probes(out);
        assert_eq!(p[0], (1, "eth1".into(), 100, 98, Some(0.047), None));
        assert_eq!(
            p[1],
            (
                1,
                "eth2".into(),
                0,
                0,
                None,
                Some("ping: connect: Network is unreachable".into())
            )
        );
        assert_eq!((p[2].0, p[2].2, p[2].3), (2, 20, 0));
        assert_eq!(rounds(3), vec![vec![(1, 2)], vec![(0, 1)], vec![(0, 2)]]);
        assert_eq!(
            (
                probes_per_pair(2),
                probes_per_pair(4),
                probes_per_pair(16),
                probes_per_pair(64)
            ),
            (400, 200, 120, 100)
        );
        // A pair's probes in pings of at most 100, as even as can be.
        assert_eq!(
            (pings(400), pings(200), pings(120), pings(100), pings(3)),
            (vec![100; 4], vec![100; 2], vec![60; 2], vec![100], vec![3])
        );
        assert_eq!(pings(201), vec![67; 3]);
        // The script runs here: two pings against this machine's loopback, at once, at the
        // start it is given.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i128;
        let script = schedule_script(&[
            ("lo".into(), "127.0.0.1".into(), 0, 3),
            ("lo".into(), "127.0.0.1".into(), 1, 2),
        ]);
        assert!(script.contains("probe 1 'lo' '127.0.0.1' 2 2 &"), "{script}");
        assert!(script.contains("-i 0.010 "), "paced at 10 ms: {script}");
        // As the doctor runs it: `sh -c SCRIPT`, the start on stdin once it is ready.
        let t = std::time::Instant::now();
        let mut child = std::process::Command::new("sh")
            .args(["-c", &script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        {
            use std::io::{BufRead as _, Write as _};
            let mut first = String::new();
            std::io::BufReader::new(child.stdout.as_mut().unwrap())
                .read_line(&mut first)
                .unwrap();
            assert_eq!(first.trim(), READY);
            let mut stdin = child.stdin.take().unwrap();
            writeln!(stdin, "{}", now + 600_000_000).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        let took = t.elapsed();
        let text = String::from_utf8_lossy(&out.stdout);
        let p = parse_probes(&text);
        if p.iter()
            .any(|x| x.5.as_deref().is_some_and(|e| e.contains("not found")))
        {
            return; // no ping here
        }
        let mut got: Vec<(usize, u32)> = p.iter().map(|x| (x.0, x.3)).collect();
        got.sort();
        assert_eq!(got, vec![(0, 3), (1, 2)], "{p:?}");
        assert!(text.contains(&format!("{PROBES_END} ")), "{text}");
        assert!(
            took >= std::time::Duration::from_millis(500),
            "the pings wait for their start: {took:?}"
        );
    }

    #[test]
    fn the_parts_of_a_pair_are_one_probe() {
        let part =
            |to: usize, nic: &str, sent: u32, received: u32, avg: Option<f64>, error: Option<&str>| Probe {
                from: 0,
                to,
                nic: nic.into(),
                sent,
                received,
                avg_ms: avg,
                error: error.map(str::to_string),
            };
        let merged = merge_parts(vec![
            part(1, "eth1", 100, 100, Some(1.0), None),
            part(2, "eth1", 100, 90, Some(2.0), None),
            part(1, "eth1", 100, 50, Some(4.0), None),
            part(
                1,
                "eth2",
                0,
                0,
                None,
                Some("ping: connect: Network is unreachable"),
            ),
            part(
                1,
                "eth2",
                0,
                0,
                None,
                Some("ping: connect: Network is unreachable"),
            ),
            part(
                3,
                "eth1",
                0,
                0,
                None,
                Some("ping: sendmsg: Operation not permitted"),
            ),
            part(3, "eth1", 60, 60, Some(0.5), None),
        ]);
        assert_eq!(merged.len(), 4, "{merged:?}");
        // Sent and received summed, the RTT weighted by the replies: (100 × 1 + 50 × 4) / 150.
        assert_eq!((merged[0].sent, merged[0].received), (200, 150));
        assert!((merged[0].avg_ms.unwrap() - 2.0).abs() < 1e-9, "{merged:?}");
        assert_eq!((merged[1].to, merged[1].received), (2, 90));
        // Every part failed: the error stays; one part with statistics: they count.
        assert!(merged[2].error.as_deref().unwrap().contains("unreachable"));
        assert_eq!(
            (merged[3].sent, merged[3].received, merged[3].error.clone()),
            (60, 60, None)
        );
    }

    #[test]
    fn a_healthy_fleet_names_nothing() {
        let p = matrix(4, "eth1", |a, b| (100, 100, 0.05 + 0.001 * (a + b) as f64));
        let (named, rails) = analyse(&p);
        assert!(named.is_empty(), "{named:?}");
        assert_eq!(
            (rails[0].probes, rails[0].sent, rails[0].received),
            (12, 1200, 1200)
        );
    }

    #[test]
    fn the_node_behind_every_bad_pair_is_named_not_its_peers() {
        // Node 2's eth1 delays 5 ms, node 1's eth2 loses 2%, node 3's eth3 is down.
        let mut p = matrix(4, "eth1", |a, b| {
            (100, 100, if a == 2 || b == 2 { 5.1 } else { 0.05 })
        });
        p.extend(matrix(4, "eth2", |a, b| {
            (100, if a == 1 || b == 1 { 97 } else { 100 }, 0.05)
        }));
        p.extend(matrix(4, "eth3", |a, b| {
            (100, if a == 3 || b == 3 { 0 } else { 100 }, 0.05)
        }));
        let (named, _) = analyse(&p);
        let got: Vec<(Trouble, &str, usize, Option<usize>)> = named
            .iter()
            .map(|n| (n.trouble, n.nic.as_str(), n.a, n.b))
            .collect();
        assert_eq!(
            got,
            vec![
                (Trouble::Slow, "eth1", 2, None),
                (Trouble::Lossy, "eth2", 1, None),
                (Trouble::Unreachable, "eth3", 3, None)
            ],
            "{named:#?}"
        );
        assert!(
            named[1].evidence.contains("18 of 600 probes lost (3.0%)"),
            "{}",
            named[1].evidence
        );
    }

    #[test]
    fn with_two_nodes_the_pair_is_named() {
        let p = matrix(2, "eth1", |_, _| (100, 0, 0.0));
        let (named, _) = analyse(&p);
        assert_eq!(named.len(), 1);
        assert_eq!((named[0].a, named[0].b), (0, Some(1)));
        // One lost packet in 200 is noise.
        let p = matrix(2, "eth1", |a, _| (100, if a == 0 { 99 } else { 100 }, 0.05));
        assert!(analyse(&p).0.is_empty());
    }

    #[test]
    fn one_lossy_pair_is_named_as_the_pair_not_blamed_on_an_end() {
        // Node 2 is unreachable on eth2; of the rest only the pair 0-1 loses (4 of 200):
        // nodes 0 and 1 lose the same share, so neither is the lossy node.
        let p = matrix(4, "eth2", |a, b| {
            let received = match (a.min(b), a.max(b)) {
                (_, 2) | (2, _) => 0,
                (0, 1) => 98,
                _ => 100,
            };
            (100, received, 0.05)
        });
        let (named, _) = analyse(&p);
        let got: Vec<(Trouble, usize, Option<usize>)> = named.iter().map(|n| (n.trouble, n.a, n.b)).collect();
        assert_eq!(
            got,
            vec![(Trouble::Unreachable, 2, None), (Trouble::Lossy, 0, Some(1))],
            "{named:#?}"
        );
        // With the loss on both of node 0's pairs, node 0 is named, and what the other
        // pairs lose is said as it is.
        let p = matrix(4, "eth2", |a, b| {
            let received = match (a.min(b), a.max(b)) {
                (0, _) => 97,
                (1, 3) => 99,
                _ => 100,
            };
            (100, received, 0.05)
        });
        let (named, _) = analyse(&p);
        assert_eq!(
            (named[0].trouble, named[0].a, named[0].b),
            (Trouble::Lossy, 0, None)
        );
        assert!(
            named[0].evidence.ends_with(
                "18 of 600 probes lost (3.0%) on eth2 with its 3 peers; the other pairs lose 2 of 600 (0.3%)"
            ),
            "{}",
            named[0].evidence
        );
    }
    /// A fixed pseudo-random stream for synthetic matrices.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }
        /// Of `n` packets, how many arrive when each is lost with probability `p`.
        fn arrive(&mut self, n: u32, p: f64) -> u32 {
            (0..n).filter(|_| self.next() >= p).count() as u32
        }
    }

    /// The probes of the schedule of `n` nodes on eth1 where node `i` drops `loss[i]` of
    /// what it sends and adds `delay[i]` ms, every path losing `noise` besides.
    fn scheduled(
        n: usize,
        loss: &[(usize, f64)],
        delay: &[(usize, f64)],
        noise: f64,
        seed: u64,
    ) -> Vec<Probe> {
        let mut rng = Rng(seed);
        let count = probes_per_pair(n);
        let of = |v: &[(usize, f64)], i: usize| v.iter().find(|(k, _)| *k == i).map_or(0.0, |x| x.1);
        rounds(n)
            .into_iter()
            .flatten()
            .flat_map(|(a, b)| [(a, b), (b, a)])
            .map(|(a, b)| {
                // A probe and its reply: lost going out of `a`, or coming back out of `b`.
                let p = 1.0 - (1.0 - of(loss, a) - noise) * (1.0 - of(loss, b) - noise);
                let received = rng.arrive(count, p);
                let avg = 0.05 + of(delay, a) + of(delay, b) + 0.01 * rng.next();
                probe(a, b, "eth1", count, received, avg)
            })
            .collect()
    }

    fn who(named: &[Named]) -> Vec<(Trouble, usize, Option<usize>)> {
        named.iter().map(|n| (n.trouble, n.a, n.b)).collect()
    }

    #[test]
    fn the_schedule_covers_every_node_with_new_partners_each_round() {
        for n in [2, 3, 4, 5, 8, 9, 16, 17, 64, 255, 256, 1024] {
            let r = rounds(n);
            assert_eq!(r.len(), round_count(n), "{n}");
            let mut partners: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
            for round in &r {
                let mut busy = BTreeSet::new();
                for &(a, b) in round {
                    assert!(a < b && b < n, "{n}: {a}-{b}");
                    assert!(busy.insert(a) && busy.insert(b), "{n}: a node twice in a round");
                    assert!(
                        partners[a].insert(b) && partners[b].insert(a),
                        "{n}: a pair twice"
                    );
                }
                // Every node in every round, one sitting out when n is odd.
                assert_eq!(busy.len(), n - n % 2, "{n}");
            }
            let least = partners.iter().map(BTreeSet::len).min().unwrap();
            let want = if n <= 8 { n - 1 } else { round_count(n) - 1 };
            assert!(least >= want, "{n}: a node met only {least} partners");
        }
        assert_eq!(
            (
                round_count(16),
                round_count(64),
                round_count(256),
                round_count(1024)
            ),
            (5, 7, 9, 11)
        );
        assert_eq!(rounds(8).len(), 7, "small fleets: every pair");
    }

    #[test]
    fn a_lossy_node_is_named_from_the_pairs_it_shares() {
        // One node of 1024 losing 2%, every path 0.05% besides: it alone is named.
        let p = scheduled(1024, &[(417, 0.02)], &[], 0.0005, 7);
        let (named, _) = analyse(&p);
        assert_eq!(who(&named), vec![(Trouble::Lossy, 417, None)], "{named:#?}");
        // Two of 256 (whether or not they meet), and one of 16.
        for seed in 1..6 {
            let p = scheduled(256, &[(3, 0.02), (200, 0.03)], &[], 0.0005, seed);
            let mut got = who(&analyse(&p).0);
            got.sort();
            assert_eq!(
                got,
                vec![(Trouble::Lossy, 3, None), (Trouble::Lossy, 200, None)],
                "seed {seed}"
            );
            let p = scheduled(16, &[(9, 0.02)], &[], 0.0005, seed);
            assert_eq!(
                who(&analyse(&p).0),
                vec![(Trouble::Lossy, 9, None)],
                "seed {seed}"
            );
        }
        // A healthy fleet with its noise: nothing.
        for (n, seed) in [(16, 1), (64, 2), (256, 3), (1024, 4)] {
            let p = scheduled(n, &[], &[], 0.0005, seed);
            assert!(analyse(&p).0.is_empty(), "{n}: {:#?}", analyse(&p).0);
        }
    }

    #[test]
    fn a_slow_or_unreachable_node_is_named_from_the_pairs_it_shares() {
        let p = scheduled(512, &[], &[(33, 5.0)], 0.0, 11);
        assert_eq!(who(&analyse(&p).0), vec![(Trouble::Slow, 33, None)]);
        let p = scheduled(128, &[(5, 1.0)], &[], 0.0, 12);
        assert_eq!(who(&analyse(&p).0), vec![(Trouble::Unreachable, 5, None)]);
        // A slow host everywhere (every round trip a little longer, jittery): nothing.
        let mut p = scheduled(64, &[], &[], 0.0, 13);
        let mut rng = Rng(99);
        for x in &mut p {
            x.avg_ms = x.avg_ms.map(|a| a * 4.0 + 0.5 * rng.next());
        }
        assert!(analyse(&p).0.is_empty(), "{:#?}", analyse(&p).0);
    }
}
