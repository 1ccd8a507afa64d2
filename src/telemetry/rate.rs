//! From counters to rates, one node at a time. Pure: the time of a rate is the node's
//! clock in its record, never the time the record arrived.
//!
//! Rules, in order, for a counter that went from `prev` to `cur` in `dt`:
//! * `cur >= prev`: the difference.
//! * the packet counter went back too (and not by a 32-bit wrap of its own): a **reset**
//!   (interface re-created, driver reloaded): no rate (NaN) for this sample.
//! * `prev` fits in 32 bits and `2^32 - prev + cur` is under half the 32-bit range and
//!   under what [`MAX_BPS`] moves in `dt`: a **32-bit wrap** (32-bit kernels, old drivers).
//! * `2^64 - prev + cur` is under what [`MAX_BPS`] moves in `dt`: a **64-bit wrap**.
//! * otherwise a reset.
//!
//! An RDMA counter stuck at `2^32 - 1` is a saturated 32-bit IB PortCounters counter: no
//! rate. A device seen for the first time has no rate yet (NaN); a device missing from a
//! record has no rate (NaN) there and starts afresh when it comes back. A **missed sample**
//! gives NaN for every device at the sample after it, never a zero; counting resumes
//! from there. A sample was missed when the record numbers jump (a record lost), when
//! more than [`MISSED_FACTOR`] intervals passed since the last record (the node stalled:
//! a record that is merely late, within that, still gives the exact mean rate over its
//! longer interval), or when the clock went back.

use super::parse::{GpuReading, LinkReading, Record};
use std::collections::HashMap;

/// The fastest rate believed when telling a wrap from a reset (bits per second): well
/// over any single NIC today (800 Gbit/s).
pub const MAX_BPS: f64 = 3.2e12;

/// A gap between records longer than this many intervals counts as a missed sample.
pub const MISSED_FACTOR: f64 = 2.5;

/// GPU figures older than this many intervals (and 3 s) are stale: not reported.
pub const GPU_STALE_INTERVALS: i64 = 3;

/// A NIC (a netdev of /proc/net/dev) or an RDMA port.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Device {
    Nic { name: String },
    Rdma { device: String, port: u32 },
}

impl Device {
    pub fn nic(name: &str) -> Device {
        Device::Nic {
            name: name.to_string(),
        }
    }

    pub fn rdma(device: &str, port: u32) -> Device {
        Device::Rdma {
            device: device.to_string(),
            port,
        }
    }

    /// `eth1`, or `mlx5_0/1` for an RDMA port.
    pub fn label(&self) -> String {
        match self {
            Device::Nic { name } => name.clone(),
            Device::Rdma { device, port } => format!("{device}/{port}"),
        }
    }
}

/// What became of a counter between two records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delta {
    Plain(u64),
    Wrapped32(u64),
    Wrapped64(u64),
    /// The counter was reset (or cannot be told from one): no rate.
    Reset,
    /// A 32-bit counter stuck at its maximum: no rate.
    Saturated,
}

impl Delta {
    pub fn value(self) -> Option<u64> {
        match self {
            Delta::Plain(v) | Delta::Wrapped32(v) | Delta::Wrapped64(v) => Some(v),
            Delta::Reset | Delta::Saturated => None,
        }
    }
}

const TWO_32: u64 = 1 << 32;

/// Did a packet counter go back (other than by a 32-bit wrap of its own)?
fn went_back(prev: Option<u64>, cur: Option<u64>) -> bool {
    match (prev, cur) {
        (Some(p), Some(c)) if c < p => !(p <= u32::MAX as u64 && p >= 3 * (TWO_32 / 4) && c < TWO_32 / 4),
        _ => false,
    }
}

/// The increase of a byte counter from `prev` to `cur`, given its packet counter (if any)
/// and the most bytes believable in the interval.
pub fn counter_delta(prev: u64, cur: u64, packets: (Option<u64>, Option<u64>), max_bytes: f64) -> Delta {
    if cur >= prev {
        return Delta::Plain(cur - prev);
    }
    if went_back(packets.0, packets.1) {
        return Delta::Reset;
    }
    if prev <= u32::MAX as u64 {
        let w = TWO_32 - prev + cur;
        if w < TWO_32 / 2 && (w as f64) <= max_bytes {
            return Delta::Wrapped32(w);
        }
    }
    let w = cur.wrapping_sub(prev);
    if (w as f64) <= max_bytes {
        return Delta::Wrapped64(w);
    }
    Delta::Reset
}

/// A device's rates at one sample, in bits per second; NaN: unknown.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceRate {
    pub device: Device,
    /// For an RDMA port, the netdev of its PCI function.
    pub netdev: Option<String>,
    pub rx_bps: f64,
    pub tx_bps: f64,
}

/// One node's rates at one of its records.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub seq: u64,
    /// The node's clock, ns (as the record has it).
    pub t_ns: i64,
    /// Time since the previous record, ns (none for the first).
    pub dt_ns: Option<i64>,
    /// Samples were missed just before this one (its rates are NaN).
    pub missed: bool,
    pub devices: Vec<DeviceRate>,
    /// GPU figures, fresh ones only (empty when stale or absent).
    pub gpus: Vec<GpuReading>,
    pub links: Vec<LinkReading>,
}

#[derive(Debug, Clone, Copy)]
struct Counts {
    rx: Option<u64>,
    tx: Option<u64>,
    rx_packets: Option<u64>,
    tx_packets: Option<u64>,
    /// Bytes per counter unit (4 for RDMA words).
    unit: u64,
    rdma: bool,
}

#[derive(Debug, Clone, Copy)]
struct Batch {
    number: u64,
    since_ns: i64,
}

/// Turns a node's records into [`Sample`]s.
#[derive(Debug, Clone)]
pub struct RateTracker {
    interval_ns: i64,
    last: Option<(u64, i64)>,
    prev: HashMap<Device, Counts>,
    gpu_batch: Option<Batch>,
    link_batch: Option<Batch>,
}

impl RateTracker {
    pub fn new(interval_ms: u32) -> RateTracker {
        RateTracker {
            interval_ns: i64::from(interval_ms.max(1)) * 1_000_000,
            last: None,
            prev: HashMap::new(),
            gpu_batch: None,
            link_batch: None,
        }
    }

    /// Forget the baseline (a new stream): the next record has no rates.
    pub fn restart(&mut self, interval_ms: u32) {
        *self = RateTracker::new(interval_ms);
    }

    pub fn interval_ns(&self) -> i64 {
        self.interval_ns
    }

    fn fresh(batch: &mut Option<Batch>, number: Option<u64>, t_ns: i64, stale_ns: i64) -> bool {
        let Some(number) = number else {
            *batch = None;
            return false;
        };
        match batch {
            Some(b) if b.number == number => t_ns - b.since_ns <= stale_ns,
            _ => {
                *batch = Some(Batch {
                    number,
                    since_ns: t_ns,
                });
                true
            }
        }
    }

    /// The rates at `rec`, from the previous record of this node.
    pub fn update(&mut self, rec: &Record) -> Sample {
        let counts = counts_of(rec);
        let (dt_ns, missed) = match self.last {
            None => (None, false),
            Some((seq, t)) => {
                let dt = rec.t_ns - t;
                let missed =
                    rec.seq != seq + 1 || dt <= 0 || dt as f64 > MISSED_FACTOR * self.interval_ns as f64;
                (Some(dt), missed)
            }
        };
        let max_bytes = dt_ns.map(|dt| MAX_BPS / 8.0 * dt as f64 / 1e9).unwrap_or(0.0);
        let mut devices = Vec::with_capacity(counts.len());
        for (device, netdev, c) in &counts {
            let (mut rx, mut tx) = (f64::NAN, f64::NAN);
            if let (Some(dt), false, Some(p)) = (dt_ns, missed, self.prev.get(device)) {
                let secs = dt as f64 / 1e9;
                let rate = |prev: Option<u64>, cur: Option<u64>, pp: Option<u64>, cp: Option<u64>| {
                    let (Some(prev), Some(cur)) = (prev, cur) else {
                        return f64::NAN;
                    };
                    if c.rdma && cur == u32::MAX as u64 && prev == cur {
                        return f64::NAN;
                    }
                    match counter_delta(prev, cur, (pp, cp), max_bytes / c.unit as f64).value() {
                        Some(d) => (d * c.unit) as f64 * 8.0 / secs,
                        None => f64::NAN,
                    }
                };
                rx = rate(p.rx, c.rx, p.rx_packets, c.rx_packets);
                tx = rate(p.tx, c.tx, p.tx_packets, c.tx_packets);
            }
            devices.push(DeviceRate {
                device: device.clone(),
                netdev: netdev.clone(),
                rx_bps: rx,
                tx_bps: tx,
            });
        }
        // A backwards clock restarts the baseline, as does anything else: counters are
        // always compared with the last record seen.
        self.prev.clear();
        self.prev.extend(counts.into_iter().map(|(d, _, c)| (d, c)));
        self.last = Some((rec.seq, rec.t_ns));
        let stale_ns = (GPU_STALE_INTERVALS * self.interval_ns).max(3_000_000_000);
        let gpus = if Self::fresh(&mut self.gpu_batch, rec.gpu_batch, rec.t_ns, stale_ns) {
            rec.gpus.clone()
        } else {
            Vec::new()
        };
        let links = if Self::fresh(&mut self.link_batch, rec.link_batch, rec.t_ns, stale_ns) {
            rec.links.clone()
        } else {
            Vec::new()
        };
        Sample {
            seq: rec.seq,
            t_ns: rec.t_ns,
            dt_ns,
            missed,
            devices,
            gpus,
            links,
        }
    }
}

fn counts_of(rec: &Record) -> Vec<(Device, Option<String>, Counts)> {
    let mut v = Vec::with_capacity(rec.nics.len() + rec.rdma.len());
    for n in &rec.nics {
        v.push((
            Device::nic(&n.name),
            None,
            Counts {
                rx: Some(n.rx_bytes),
                tx: Some(n.tx_bytes),
                rx_packets: Some(n.rx_packets),
                tx_packets: Some(n.tx_packets),
                unit: 1,
                rdma: false,
            },
        ));
    }
    for r in &rec.rdma {
        v.push((
            Device::rdma(&r.device, r.port),
            r.netdev.clone(),
            Counts {
                rx: r.rcv_words,
                tx: r.xmit_words,
                rx_packets: r.rcv_packets,
                tx_packets: r.xmit_packets,
                unit: 4,
                rdma: true,
            },
        ));
    }
    v
}
