//! Imbalance: the NIC, or the node, that carries much less than its peers while traffic
//! flows. Pure: window means in, flags out.
//!
//! The rule, per direction (rx and tx separately: a throttled sender is slow on tx only),
//! over a window of [`Rule::window_ms`] (3 s) ending at the newest sample of the fleet:
//! * a **data NIC** is flagged when its mean rate over the window is under
//!   [`Rule::ratio`] (½) of the median of its peers' means, and that median is at least
//!   [`Rule::min_flow_bps`] (10 Mbit/s: "traffic flows"). Two peer groups are checked:
//!   its **rail** (the data NIC of the same name on the other nodes) and its **node**
//!   (the other data NICs of the same node). Either one flags it; the flag lists both.
//! * a **node** is flagged when the sum of its data NICs' means is under half the median
//!   of the other nodes' sums, that median again at least the flow threshold.
//! * a mean needs at least [`Rule::min_samples`] known values in the window: one late
//!   sample is not "staying" under anything. Gaps (NaN) are not zeros and count for
//!   nothing; a NIC with no known value in the window takes no part.
//!
//! "Stays under" is thus read as "its mean over the window is under": the mean of rates
//! is the bytes moved over the window, which a single spike cannot lift far when the
//! NIC is really starved (and a NIC at a steady half rate for 3 s is what to look at).

use super::layout::{Classifier, NodeLayout, Role};
use super::rate::Device;
use super::series::{Metric, SeriesKey, Telemetry};

/// Received or sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Rx,
    Tx,
}

impl Direction {
    pub const BOTH: [Direction; 2] = [Direction::Rx, Direction::Tx];

    pub fn metric(self) -> Metric {
        match self {
            Direction::Rx => Metric::Rx,
            Direction::Tx => Metric::Tx,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Rx => "rx",
            Direction::Tx => "tx",
        }
    }
}

/// The thresholds of the rule.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Rule {
    pub window_ms: u32,
    pub ratio: f64,
    pub min_flow_bps: f64,
    pub min_samples: usize,
}

impl Default for Rule {
    fn default() -> Self {
        Rule {
            window_ms: 3000,
            ratio: 0.5,
            min_flow_bps: 10e6,
            min_samples: 2,
        }
    }
}

/// One data NIC's mean rate over the window, in one direction.
#[derive(Debug, Clone, PartialEq)]
pub struct NicMean {
    pub node: usize,
    pub device: Device,
    pub direction: Direction,
    pub bps: f64,
}

/// Whom a flagged NIC or node was compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Peers {
    /// The same rail on the other nodes.
    Rail,
    /// The other data NICs of the node.
    Node,
    /// The other nodes (a node's total).
    Fleet,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Reason {
    pub peers: Peers,
    pub peer_count: usize,
    pub median_bps: f64,
}

/// A NIC (or a whole node, `device: None`) that carries under half of its peers.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Flag {
    pub node: usize,
    pub device: Option<Device>,
    pub direction: Direction,
    pub bps: f64,
    pub reasons: Vec<Reason>,
    /// The flag this one follows from ([`link_causes`]).
    pub follows: Option<Cause>,
}

/// The flagged sender a flagged receiver was waiting on.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Cause {
    pub node: usize,
    pub device: Option<Device>,
    pub direction: Direction,
    /// The receiver's share of bytes (over the window, on the flagged NIC) that came from
    /// that sender.
    pub share: f64,
}

/// The median of finite values (the mean of the middle two for an even count).
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

/// The median of `sorted` without its element at `skip` (`None` when nothing is left).
fn median_without(sorted: &[f64], skip: usize) -> Option<f64> {
    let m = sorted.len().checked_sub(1).filter(|&m| m > 0)?;
    let at = |i: usize| if i < skip { sorted[i] } else { sorted[i + 1] };
    Some(if m % 2 == 1 {
        at(m / 2)
    } else {
        (at(m / 2 - 1) + at(m / 2)) / 2.0
    })
}

/// Values grouped by a key, each group sorted, and where each member landed.
struct Groups<K> {
    sorted: std::collections::HashMap<K, Vec<f64>>,
}

impl<K: std::hash::Hash + Eq> Groups<K> {
    fn new(items: impl Iterator<Item = (K, f64)>) -> Groups<K> {
        let mut sorted: std::collections::HashMap<K, Vec<f64>> = std::collections::HashMap::new();
        for (k, v) in items {
            sorted.entry(k).or_default().push(v);
        }
        for v in sorted.values_mut() {
            v.sort_by(|a, b| a.total_cmp(b));
        }
        Groups { sorted }
    }

    /// The median of the group of `key` without one member of value `v`, and the count.
    fn peers(&self, key: &K, v: f64) -> Option<(f64, usize)> {
        let g = self.sorted.get(key)?;
        let skip = g.partition_point(|x| x.total_cmp(&v).is_lt());
        Some((median_without(g, skip)?, g.len() - 1))
    }
}

/// Flags from the means of data NICs (only finite means are given).
pub fn detect(rule: &Rule, means: &[NicMean]) -> Vec<Flag> {
    let low = |bps: f64, peers: Option<(f64, usize)>| -> Option<(f64, usize)> {
        let (m, count) = peers?;
        (m >= rule.min_flow_bps && bps < rule.ratio * m).then_some((m, count))
    };
    // Rails: the same device in the same direction on every node; a node: its devices.
    let rails = Groups::new(means.iter().map(|m| ((&m.device, m.direction), m.bps)));
    let nodes = Groups::new(means.iter().map(|m| ((m.node, m.direction), m.bps)));
    let mut flags: Vec<Flag> = Vec::new();
    for m in means {
        let mut reasons = Vec::new();
        if let Some((median_bps, peer_count)) = low(m.bps, rails.peers(&(&m.device, m.direction), m.bps)) {
            reasons.push(Reason {
                peers: Peers::Rail,
                peer_count,
                median_bps,
            });
        }
        if let Some((median_bps, peer_count)) = low(m.bps, nodes.peers(&(m.node, m.direction), m.bps)) {
            reasons.push(Reason {
                peers: Peers::Node,
                peer_count,
                median_bps,
            });
        }
        if !reasons.is_empty() {
            flags.push(Flag {
                node: m.node,
                device: Some(m.device.clone()),
                direction: m.direction,
                bps: m.bps,
                reasons,
                follows: None,
            });
        }
    }
    for dir in Direction::BOTH {
        let mut totals: std::collections::BTreeMap<usize, f64> = Default::default();
        for m in means.iter().filter(|m| m.direction == dir) {
            *totals.entry(m.node).or_default() += m.bps;
        }
        let fleet = Groups::new(totals.values().map(|&t| ((), t)));
        for (&node, &total) in &totals {
            if let Some((median_bps, peer_count)) = low(total, fleet.peers(&(), total)) {
                flags.push(Flag {
                    node,
                    device: None,
                    direction: dir,
                    bps: total,
                    reasons: vec![Reason {
                        peers: Peers::Fleet,
                        peer_count,
                        median_bps,
                    }],
                    follows: None,
                });
            }
        }
    }
    flags.sort_by(|a, b| (a.node, &a.device, a.direction).cmp(&(b.node, &b.device, b.direction)));
    flags
}

impl Classifier {
    /// The role of each NIC and RDMA port of `node` in `store`.
    pub fn roles(&self, store: &Telemetry, node: usize) -> Vec<(Device, Role)> {
        let Some(n) = store.node(node) else {
            return Vec::new();
        };
        let netdevs: Vec<String> = n.rdma_netdevs.keys().cloned().collect();
        let devices = n.devices();
        let layout = NodeLayout {
            default_route: n.hello.as_ref().and_then(|h| h.default_route.as_deref()),
            rdma_netdevs: &netdevs,
            has_rdma: devices.iter().any(|d| matches!(d, Device::Rdma { .. })),
        };
        devices
            .into_iter()
            .map(|d| (d.clone(), self.role(d, &layout)))
            .collect()
    }
}

impl Classifier {
    /// The NICs of `node` worth a chart (data and control; not loopback, virtual NICs or
    /// the netdevs of RDMA ports), in natural order ([`super::layout::device_cmp`]).
    pub fn charted(&self, store: &Telemetry, node: usize) -> Vec<(Device, Role)> {
        let mut v: Vec<(Device, Role)> = self
            .roles(store, node)
            .into_iter()
            .filter(|(_, r)| *r != Role::Other)
            .collect();
        v.sort_by(|a, b| super::layout::device_cmp(&a.0, &b.0));
        v
    }

    /// The rails of `nodes`: every data NIC label seen on any of them, in natural order.
    /// Rail `i` is the `i`th of these on every node.
    pub fn rails(&self, store: &Telemetry, nodes: &[usize]) -> Vec<Device> {
        let mut v: Vec<Device> = Vec::new();
        for &n in nodes {
            for (d, r) in self.roles(store, n) {
                if r == Role::Data && !v.contains(&d) {
                    v.push(d);
                }
            }
        }
        v.sort_by(super::layout::device_cmp);
        v
    }
}

/// The means of every data NIC of `nodes` over the window ending at the fleet's newest
/// sample, then [`detect`].
pub fn detect_in(store: &Telemetry, nodes: &[usize], classifier: &Classifier, rule: &Rule) -> Vec<Flag> {
    let Some(now) = store.now_ms() else {
        return Vec::new();
    };
    let from = now.saturating_sub(rule.window_ms);
    let mut means = Vec::new();
    for &node in nodes {
        let Some(n) = store.node(node) else { continue };
        for (device, role) in classifier.roles(store, node) {
            if role != Role::Data {
                continue;
            }
            for direction in Direction::BOTH {
                let Some(s) = n.series(&SeriesKey::net(device.clone(), direction.metric())) else {
                    continue;
                };
                let st = s.stats(from, now);
                if st.known >= rule.min_samples && st.avg.is_finite() {
                    means.push(NicMean {
                        node,
                        device: device.clone(),
                        direction,
                        bps: st.avg,
                    });
                }
            }
        }
    }
    let mut flags = detect(rule, &means);
    link_causes(&mut flags, store, nodes, from, now);
    flags
}

/// How far before the rule's window the TCP pairs are read from.
pub const TCP_LOOKBACK_MS: u32 = 6000;

/// A receiver gets a sender's share of its bytes only as fast as that sender sends.
pub const CAUSE_SHARE: f64 = 0.25;

/// Mark the rx flags that follow from a flagged sender, by the TCP traffic pairs seen
/// (each node's connections, `ss -ti`, over `from..=to`): a receiver flagged on a NIC (or
/// as a node) that got at least [`CAUSE_SHARE`] of its bytes there from a node whose tx
/// is flagged (on the NIC those bytes left by, or as a node) follows from that flag.
/// RDMA ports carry no TCP: their flags stay as they are.
pub fn link_causes(flags: &mut [Flag], store: &Telemetry, nodes: &[usize], from: u32, to: u32) {
    // Which node and NIC an address is.
    let mut owner: std::collections::HashMap<String, (usize, String)> = Default::default();
    for &n in nodes {
        if let Some(h) = store.node(n).and_then(|s| s.hello.as_ref()) {
            for (nic, ip) in &h.addrs {
                owner.insert(ip.clone(), (n, nic.clone()));
            }
        }
    }
    let senders: Vec<(usize, Option<Device>)> = flags
        .iter()
        .filter(|f| f.direction == Direction::Tx)
        .map(|f| (f.node, f.device.clone()))
        .collect();
    for f in flags.iter_mut().filter(|f| f.direction == Direction::Rx) {
        let Some(n) = store.node(f.node) else { continue };
        let local: Option<Vec<&str>> = match &f.device {
            Some(Device::Nic { name }) => Some(
                n.hello
                    .iter()
                    .flat_map(|h| h.addrs.iter())
                    .filter(|(nic, _)| nic == name)
                    .map(|(_, ip)| ip.as_str())
                    .collect(),
            ),
            Some(Device::Rdma { .. }) => continue,
            None => None,
        };
        let mut total = 0u64;
        let mut by: std::collections::BTreeMap<(usize, String), u64> = Default::default();
        // The sampler lists connections in every third record: a wider window holds two.
        for ((l, r), (_, received)) in n.tcp_bytes(from.saturating_sub(TCP_LOOKBACK_MS), to) {
            if local.as_ref().is_some_and(|ips| !ips.contains(&l.as_str())) {
                continue;
            }
            total += received;
            if let Some((node, nic)) = owner.get(&r) {
                *by.entry((*node, nic.clone())).or_default() += received;
            }
        }
        if total == 0 {
            continue;
        }
        let mut ranked: Vec<((usize, String), u64)> = by.into_iter().collect();
        ranked.sort_by_key(|(_, b)| std::cmp::Reverse(*b));
        for ((node, nic), bytes) in ranked {
            let share = bytes as f64 / total as f64;
            if share < CAUSE_SHARE {
                break;
            }
            // The sender's flag on the NIC the bytes left by, else its node's.
            let of_node = || senders.iter().filter(|(sn, _)| *sn == node && *sn != f.node);
            let flagged = of_node()
                .find(|(_, d)| d.as_ref().is_some_and(|d| d.label() == nic))
                .or_else(|| of_node().find(|(_, d)| d.is_none()));
            if let Some((node, device)) = flagged {
                f.follows = Some(Cause {
                    node: *node,
                    device: device.clone(),
                    direction: Direction::Tx,
                    share,
                });
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean(node: usize, nic: &str, direction: Direction, mbps: f64) -> NicMean {
        NicMean {
            node,
            device: Device::nic(nic),
            direction,
            bps: mbps * 1e6,
        }
    }

    fn names(flags: &[Flag]) -> Vec<String> {
        flags
            .iter()
            .map(|f| {
                let what = f.device.as_ref().map(|d| d.label()).unwrap_or_else(|| "*".into());
                let peers: Vec<&str> = f
                    .reasons
                    .iter()
                    .map(|r| match r.peers {
                        Peers::Rail => "rail",
                        Peers::Node => "node",
                        Peers::Fleet => "fleet",
                    })
                    .collect();
                format!("{} {what} {} {}", f.node, f.direction.as_str(), peers.join("+"))
            })
            .collect()
    }

    /// 4 nodes x 2 rails, every node sending to every other on both rails; `f(node, nic, dir)`
    /// gives the Mbit/s.
    fn fleet(f: impl Fn(usize, &str, Direction) -> f64) -> Vec<NicMean> {
        let mut v = vec![];
        for node in 0..4 {
            for nic in ["eth1", "eth2"] {
                for d in Direction::BOTH {
                    v.push(mean(node, nic, d, f(node, nic, d)));
                }
            }
        }
        v
    }

    #[test]
    fn table_of_cases() {
        use Direction::*;
        let rule = Rule::default();
        let cases: Vec<(&str, Vec<NicMean>, Vec<&str>)> = vec![
            ("balanced", fleet(|_, _, _| 150.0), vec![]),
            (
                "idle fleet: nothing flows, nothing is flagged",
                fleet(|n, _, _| if n == 1 { 0.0 } else { 4.0 }),
                vec![],
            ),
            (
                "node 1 eth2 sender throttled to 10 Mbit/s: its receivers lose a third",
                fleet(|n, nic, d| match (n, nic, d) {
                    (1, "eth2", Tx) => 10.0,
                    (_, "eth2", Rx) if n != 1 => 103.0,
                    _ => 150.0,
                }),
                vec!["1 eth2 tx rail+node"],
            ),
            (
                "a dead rail on one node: both directions, both peer groups",
                fleet(|n, nic, _| if n == 2 && nic == "eth1" { 0.0 } else { 150.0 }),
                vec!["2 eth1 rx rail+node", "2 eth1 tx rail+node"],
            ),
            (
                "a node at a third of the others on every NIC: rail flags and a node flag",
                fleet(|n, _, _| if n == 3 { 50.0 } else { 150.0 }),
                vec![
                    "3 eth1 rx rail",
                    "3 eth1 tx rail",
                    "3 eth2 rx rail",
                    "3 eth2 tx rail",
                    "3 * rx fleet",
                    "3 * tx fleet",
                ],
            ),
            (
                "just above half is not flagged",
                fleet(|n, nic, _| if n == 0 && nic == "eth2" { 76.0 } else { 150.0 }),
                vec![],
            ),
        ];
        for (what, means, want) in cases {
            let mut got = names(&detect(&rule, &means));
            got.sort();
            let mut want: Vec<String> = want.into_iter().map(String::from).collect();
            want.sort();
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn medians() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3.0]), Some(3.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        // Without one member: the same as the median of the others.
        let sorted = [1.0, 2.0, 3.0, 5.0, 8.0];
        for skip in 0..sorted.len() {
            let mut rest: Vec<f64> = sorted
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != skip)
                .map(|(_, v)| *v)
                .collect();
            assert_eq!(median_without(&sorted, skip), median(&mut rest), "without {skip}");
        }
        assert_eq!(median_without(&[7.0], 0), None);
    }

    /// NCCL on one NIC of two: the unused one is flagged against its node.
    #[test]
    fn one_nic_of_a_node_unused() {
        let means = vec![
            mean(0, "eth1", Direction::Tx, 900.0),
            mean(0, "eth2", Direction::Tx, 0.2),
        ];
        assert_eq!(names(&detect(&Rule::default(), &means)), vec!["0 eth2 tx node"]);
    }

    /// A ring on eth1 (node i sends to node i+1) whose node 1 sends at a tenth: node 1's
    /// eth1 tx is flagged, and node 2's eth1 rx, which gets all its bytes from node 1,
    /// follows from it (by the TCP pairs seen); without the pairs nothing is linked.
    #[test]
    fn a_starved_receiver_follows_from_its_throttled_sender() {
        use crate::telemetry::parse::TcpFlow;
        use crate::telemetry::synth::Synth;
        let run = |pairs: bool| {
            let mut synth = Synth::new(4, &["eth0", "eth1"], 0, 1000);
            let mut store = Telemetry::new(1000);
            let ip = |n: usize| format!("10.1.0.{}", n + 1);
            for n in 0..4 {
                let mut h = synth.hello(n);
                h.addrs = vec![
                    ("eth0".into(), format!("10.0.0.{}", n + 1)),
                    ("eth1".into(), ip(n)),
                ];
                store.hello(n, h);
            }
            let rate = |n: usize| if n == 1 { 1e8 } else { 1e9 };
            let mut sent = [0u64; 4];
            for seq in 1..=8u64 {
                for n in 0..4 {
                    let prev = (n + 3) % 4;
                    let mut rec = synth.record(
                        n,
                        seq,
                        |nic| {
                            if nic == 1 {
                                (rate(prev), rate(n))
                            } else {
                                (1e5, 1e5)
                            }
                        },
                        |_| (0.0, 0.0),
                    );
                    sent[n] += (rate(n) / 8.0) as u64;
                    if pairs {
                        rec.tcp = vec![
                            TcpFlow {
                                local: ip(n),
                                remote: ip((n + 1) % 4),
                                sent: sent[n],
                                received: 0,
                            },
                            TcpFlow {
                                local: ip(n),
                                remote: ip(prev),
                                sent: 0,
                                received: sent[prev],
                            },
                        ];
                    }
                    store.ingest(n, &rec, rec.t_ns);
                }
            }
            detect_in(&store, &[0, 1, 2, 3], &Classifier::auto(), &Rule::default())
        };
        let flags = run(true);
        let eth1 = Some(Device::Nic { name: "eth1".into() });
        let tx = flags
            .iter()
            .find(|f| f.node == 1 && f.direction == Direction::Tx && f.device == eth1)
            .unwrap();
        assert!(tx.follows.is_none(), "the cause: {flags:#?}");
        let rx = flags
            .iter()
            .find(|f| f.node == 2 && f.direction == Direction::Rx && f.device == eth1)
            .unwrap();
        let c = rx.follows.as_ref().expect("node 2's rx follows from node 1's tx");
        assert_eq!(
            (c.node, c.device.clone(), c.direction),
            (1, eth1.clone(), Direction::Tx)
        );
        assert!((c.share - 1.0).abs() < 1e-9, "{c:?}");
        assert!(run(false).iter().all(|f| f.follows.is_none()));
    }
}
