//! A fleet's telemetry over a window, as one plain document: per node, per NIC the rx/tx
//! rates (current, average, peak, bits per second), per GPU its figures, and the
//! imbalance flags. `flightdeck nics --json` prints it; the NICs view reads the same.

use super::imbalance::{self, Direction, Reason, Rule};
use super::layout::{Classifier, Role};
use super::rate::Device;
use super::series::{Metric, SeriesKey, Telemetry, WindowStats};

/// A node as the fleet knows it.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub index: usize,
    pub name: String,
    pub host: String,
    /// Why it could not be sampled, if it could not.
    pub error: Option<String>,
}

/// Current, average and peak; `None` where unknown (JSON `null`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Figures {
    pub current: Option<f64>,
    pub avg: Option<f64>,
    pub peak: Option<f64>,
}

fn known(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

impl From<WindowStats> for Figures {
    fn from(s: WindowStats) -> Figures {
        Figures {
            current: known(s.current),
            avg: known(s.avg),
            peak: known(s.peak),
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NicReport {
    /// `eth1`, or `mlx5_0/1` for an RDMA port.
    pub name: String,
    /// `netdev` or `rdma`.
    pub kind: &'static str,
    pub role: Role,
    /// An RDMA port's netdev.
    pub netdev: Option<String>,
    pub rx_bps: Figures,
    pub tx_bps: Figures,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GpuReport {
    pub index: u32,
    pub name: Option<String>,
    pub uuid: Option<String>,
    pub utilization_pct: Figures,
    pub power_w: Figures,
    pub memory_used_mib: Figures,
    pub memory_total_mib: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub temperature_c: Option<f64>,
    pub memory_temperature_c: Option<f64>,
    pub sm_clock_mhz: Option<f64>,
    pub pcie_rx_bps: Option<f64>,
    pub pcie_tx_bps: Option<f64>,
    pub nvlink_rx_bps: Option<f64>,
    pub nvlink_tx_bps: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NodeReport {
    pub node: String,
    pub host: String,
    /// The host name the node gives itself.
    pub hostname: Option<String>,
    pub error: Option<String>,
    /// Records taken in (rates need two).
    pub records: u64,
    /// Samples missed (gaps).
    pub missed: u64,
    pub nics: Vec<NicReport>,
    pub gpus: Vec<GpuReport>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FlagReport {
    pub node: String,
    /// The NIC; `null` for the node's total.
    pub nic: Option<String>,
    pub direction: Direction,
    pub bps: f64,
    pub reasons: Vec<Reason>,
    /// The flagged sender this flag follows from (by the TCP pairs seen), if any.
    pub follows: Option<FollowsReport>,
    /// The flag in words.
    pub message: String,
}

/// The flag a flag follows from.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FollowsReport {
    pub node: String,
    pub nic: Option<String>,
    pub direction: Direction,
    /// The share of the receiver's bytes that came from that sender.
    pub share: f64,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FleetReport {
    pub fleet: String,
    pub interval_ms: u32,
    /// The window of the figures, seconds.
    pub window_s: f64,
    pub rule: Rule,
    pub nodes: Vec<NodeReport>,
    pub flags: Vec<FlagReport>,
}

/// `1.25 Gbit/s`, `980 Mbit/s`, `12.0 kbit/s`, `-` for unknown.
pub fn format_bps(bps: Option<f64>) -> String {
    let Some(b) = bps.filter(|b| b.is_finite()) else {
        return "-".into();
    };
    let (v, unit) = if b >= 1e9 {
        (b / 1e9, "Gbit/s")
    } else if b >= 1e6 {
        (b / 1e6, "Mbit/s")
    } else if b >= 1e3 {
        (b / 1e3, "kbit/s")
    } else {
        (b, "bit/s")
    };
    if v >= 100.0 {
        format!("{v:.0} {unit}")
    } else if v >= 10.0 {
        format!("{v:.1} {unit}")
    } else {
        format!("{v:.2} {unit}")
    }
}

fn kind(d: &Device) -> &'static str {
    match d {
        Device::Nic { .. } => "netdev",
        Device::Rdma { .. } => "rdma",
    }
}

/// The report over `(from_ms, to_ms]` (store time) for `nodes`; flags over the rule's
/// window ending at the fleet's newest sample.
pub fn build(
    fleet: &str,
    store: &Telemetry,
    nodes: &[NodeInfo],
    classifier: &Classifier,
    rule: &Rule,
    from_ms: u32,
    to_ms: u32,
) -> FleetReport {
    let mut reports = Vec::new();
    let mut interval_ms = 0;
    for info in nodes {
        let mut r = NodeReport {
            node: info.name.clone(),
            host: info.host.clone(),
            hostname: None,
            error: info.error.clone(),
            records: 0,
            missed: 0,
            nics: Vec::new(),
            gpus: Vec::new(),
        };
        if let Some(n) = store.node(info.index) {
            interval_ms = interval_ms.max(n.interval_ms());
            r.hostname = n.hello.as_ref().and_then(|h| h.host.clone());
            r.records = n.records;
            r.missed = n.missed;
            let stats = |key: SeriesKey| {
                n.series(&key)
                    .map(|s| s.stats(from_ms, to_ms))
                    .unwrap_or(WindowStats::EMPTY)
            };
            let roles = classifier.roles(store, info.index);
            for (device, role) in roles {
                let netdev = n
                    .rdma_netdevs
                    .iter()
                    .find(|(_, d)| **d == device)
                    .map(|(nd, _)| nd.clone());
                r.nics.push(NicReport {
                    name: device.label(),
                    kind: kind(&device),
                    role,
                    netdev,
                    rx_bps: stats(SeriesKey::net(device.clone(), Metric::Rx)).into(),
                    tx_bps: stats(SeriesKey::net(device.clone(), Metric::Tx)).into(),
                });
            }
            for (&index, g) in &n.gpus {
                let reading = g.reading.as_ref();
                let f = |x: Option<f32>| x.map(f64::from);
                let links = g.links.as_ref();
                r.gpus.push(GpuReport {
                    index,
                    name: g.info.as_ref().map(|i| i.name.clone()),
                    uuid: g.info.as_ref().map(|i| i.uuid.clone()),
                    utilization_pct: stats(SeriesKey::gpu(index, Metric::GpuUtil)).into(),
                    power_w: stats(SeriesKey::gpu(index, Metric::GpuPower)).into(),
                    memory_used_mib: stats(SeriesKey::gpu(index, Metric::GpuMemUsed)).into(),
                    memory_total_mib: reading
                        .and_then(|r| f(r.memory_total_mib))
                        .or(g.info.as_ref().and_then(|i| i.memory_total_mib)),
                    power_limit_w: g.info.as_ref().and_then(|i| i.power_limit_w),
                    temperature_c: reading.and_then(|r| f(r.temperature_c)),
                    memory_temperature_c: reading.and_then(|r| f(r.memory_temperature_c)),
                    sm_clock_mhz: reading.and_then(|r| f(r.sm_clock_mhz)),
                    pcie_rx_bps: links.and_then(|l| l.pcie_rx_bps),
                    pcie_tx_bps: links.and_then(|l| l.pcie_tx_bps),
                    nvlink_rx_bps: links.and_then(|l| l.nvlink_rx_bps),
                    nvlink_tx_bps: links.and_then(|l| l.nvlink_tx_bps),
                });
            }
        }
        reports.push(r);
    }
    let indices: Vec<usize> = nodes.iter().map(|n| n.index).collect();
    let name_of = |i: usize| {
        nodes
            .iter()
            .find(|n| n.index == i)
            .map(|n| n.name.clone())
            .unwrap_or_else(|| format!("node {i}"))
    };
    let flags = imbalance::detect_in(store, &indices, classifier, rule)
        .into_iter()
        .map(|f| {
            let node = name_of(f.node);
            let nic = f.device.as_ref().map(Device::label);
            let what = match &nic {
                Some(n) => format!("{node} {n}"),
                None => format!("{node} (all data NICs)"),
            };
            let why: Vec<String> = f
                .reasons
                .iter()
                .map(|r| {
                    let peers = match r.peers {
                        imbalance::Peers::Rail => "its rail",
                        imbalance::Peers::Node => "its node's data NICs",
                        imbalance::Peers::Fleet => "the fleet's nodes",
                    };
                    format!("{peers} ({})", format_bps(Some(r.median_bps)))
                })
                .collect();
            let follows = f.follows.as_ref().map(|c| FollowsReport {
                node: name_of(c.node),
                nic: c.device.as_ref().map(Device::label),
                direction: c.direction,
                share: c.share,
            });
            let after = follows
                .as_ref()
                .map(|c| {
                    format!(
                        "; follows from {} {} {} ({:.0}% of its bytes came from there)",
                        c.node,
                        c.nic.as_deref().unwrap_or("(all data NICs)"),
                        c.direction.as_str(),
                        c.share * 100.0
                    )
                })
                .unwrap_or_default();
            FlagReport {
                message: format!(
                    "{what} {}: {}, under half the median of {}{after}",
                    f.direction.as_str(),
                    format_bps(Some(f.bps)),
                    why.join(" and ")
                ),
                node,
                nic,
                direction: f.direction,
                bps: f.bps,
                reasons: f.reasons,
                follows,
            }
        })
        .collect();
    FleetReport {
        fleet: fleet.to_string(),
        interval_ms,
        window_s: f64::from(to_ms.saturating_sub(from_ms)) / 1000.0,
        rule: *rule,
        nodes: reports,
        flags,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_well() {
        assert_eq!(format_bps(None), "-");
        assert_eq!(format_bps(Some(f64::NAN)), "-");
        assert_eq!(format_bps(Some(0.0)), "0.00 bit/s");
        assert_eq!(format_bps(Some(12_000.0)), "12.0 kbit/s");
        assert_eq!(format_bps(Some(980e6)), "980 Mbit/s");
        assert_eq!(format_bps(Some(1.25e9)), "1.25 Gbit/s");
        assert_eq!(format_bps(Some(400e9)), "400 Gbit/s");
    }
}
