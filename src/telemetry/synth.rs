//! **Constructed** telemetry, for tests, snapshots and benchmarks where no fleet runs (and
//! no GPU exists): records in the parser's own shape whose counters advance by given rate
//! functions, so they pass through the same rates, gap rule and rings as a real sampler's.
//! Nothing here is a recording; callers say so where they use it.

use super::parse::{ClockKind, GpuInfo, GpuReading, Hello, NicCounters, Record, DEFAULT_GPU_FIELDS};
use super::series::Telemetry;

/// A fleet of identical nodes: the same NIC names and GPU count on each.
#[derive(Debug, Clone)]
pub struct Synth {
    pub nics: Vec<String>,
    pub gpus: u32,
    pub interval_ms: u32,
    /// The interface of the default route (`None`: eth0 is control, as in the testbed).
    pub route: Option<String>,
    /// Unix time of record 0, s.
    pub start_unix_s: i64,
    /// Bytes so far, per node, per NIC: (rx, tx).
    counters: Vec<Vec<(u64, u64)>>,
}

impl Synth {
    pub fn new(nodes: usize, nics: &[&str], gpus: u32, interval_ms: u32) -> Synth {
        Synth {
            nics: nics.iter().map(|s| s.to_string()).collect(),
            gpus,
            interval_ms: interval_ms.max(1),
            route: None,
            start_unix_s: 1_795_315_000,
            counters: vec![vec![(1_000_000, 2_000_000); nics.len()]; nodes],
        }
    }

    pub fn nodes(&self) -> usize {
        self.counters.len()
    }

    /// What node `node`'s sampler says first.
    pub fn hello(&self, node: usize) -> Hello {
        Hello {
            version: 1,
            interval_ms: self.interval_ms,
            clock: ClockKind::Unix,
            host: Some(format!("node{node}")),
            default_route: self.route.clone(),
            gpu_fields: DEFAULT_GPU_FIELDS.iter().map(|s| s.to_string()).collect(),
            gpus: (0..self.gpus)
                .map(|g| GpuInfo {
                    index: g,
                    name: "NVIDIA H100 80GB HBM3".into(),
                    uuid: format!("GPU-00000000-0000-0000-0000-0000000{node:02}{g:03}"),
                    memory_total_mib: Some(81559.0),
                    power_limit_w: Some(700.0),
                })
                .collect(),
            addrs: vec![],
        }
    }

    /// Record `seq` (1-based, one interval after record `seq - 1`) of `node`: each NIC's
    /// counters moved by `rate(nic) = (rx, tx)` bits per second over the interval, each
    /// GPU at `gpu(g) = (utilisation %, power W)`.
    pub fn record(
        &mut self,
        node: usize,
        seq: u64,
        rate: impl Fn(usize) -> (f64, f64),
        gpu: impl Fn(u32) -> (f32, f32),
    ) -> Record {
        let secs = f64::from(self.interval_ms) / 1000.0;
        let t_ns = self.start_unix_s * 1_000_000_000 + seq as i64 * i64::from(self.interval_ms) * 1_000_000;
        let mut nics = Vec::with_capacity(self.nics.len());
        for (i, name) in self.nics.iter().enumerate() {
            let (rx, tx) = rate(i);
            let c = &mut self.counters[node][i];
            c.0 += (rx.max(0.0) * secs / 8.0) as u64;
            c.1 += (tx.max(0.0) * secs / 8.0) as u64;
            nics.push(NicCounters {
                name: name.clone(),
                rx_bytes: c.0,
                rx_packets: c.0 / 1500,
                rx_errs: 0,
                rx_drop: 0,
                tx_bytes: c.1,
                tx_packets: c.1 / 1500,
                tx_errs: 0,
                tx_drop: 0,
            });
        }
        let gpus = (0..self.gpus)
            .map(|g| {
                let (util, power) = gpu(g);
                GpuReading {
                    index: g,
                    utilization_pct: Some(util),
                    memory_utilization_pct: Some(util / 2.0),
                    memory_used_mib: Some(71523.0),
                    memory_total_mib: Some(81559.0),
                    power_w: Some(power),
                    temperature_c: Some(61.0),
                    memory_temperature_c: Some(70.0),
                    sm_clock_mhz: Some(1980.0),
                }
            })
            .collect::<Vec<_>>();
        Record {
            seq,
            t_ns,
            clock: ClockKind::Unix,
            nics,
            rdma: vec![],
            gpu_batch: (self.gpus > 0).then_some(seq),
            gpus,
            link_batch: None,
            links: vec![],
            tcp: vec![],
            bad_lines: 0,
        }
    }

    /// Say hello for every node, then take records `1..=records` of each into `store`,
    /// leaving out those `missed(node, seq)` names (their time passes, their counters
    /// move: the next record's rates are a gap, as after a lost record).
    pub fn fill(
        &mut self,
        store: &mut Telemetry,
        records: u64,
        rate: impl Fn(usize, usize, u64) -> (f64, f64),
        gpu: impl Fn(usize, u32, u64) -> (f32, f32),
        missed: impl Fn(usize, u64) -> bool,
    ) {
        for node in 0..self.nodes() {
            store.hello(node, self.hello(node));
        }
        for seq in 1..=records {
            for node in 0..self.nodes() {
                let rec = self.record(node, seq, |nic| rate(node, nic, seq), |g| gpu(node, g, seq));
                if !missed(node, seq) {
                    store.ingest(node, &rec, rec.t_ns);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::rate::Device;
    use crate::telemetry::series::{Metric, SeriesKey};

    #[test]
    fn constructed_rates_come_back_and_a_left_out_record_is_a_gap() {
        let mut s = Synth::new(2, &["eth0", "eth1"], 1, 1000);
        let mut store = Telemetry::new(100);
        s.fill(
            &mut store,
            10,
            |node, nic, _| (1e9 * (node + nic + 1) as f64, 5e8),
            |_, _, seq| (seq as f32, 100.0),
            |node, seq| node == 1 && seq == 5,
        );
        let n1 = store.node(1).unwrap();
        let rx = n1
            .series(&SeriesKey::net(Device::nic("eth1"), Metric::Rx))
            .unwrap();
        let v: Vec<f32> = rx.v.iter().collect();
        assert_eq!(v.len(), 9, "one record left out");
        assert!(v[0].is_nan(), "the first record has no rate");
        assert!(
            v[4].is_nan(),
            "the record after the left-out one: a gap, not a zero"
        );
        for x in v[1..4].iter().chain(&v[5..]) {
            assert!((x - 3e9).abs() < 1e3, "{x}");
        }
        let util = n1.series(&SeriesKey::gpu(0, Metric::GpuUtil)).unwrap();
        assert_eq!(util.v.last(), Some(10.0));
    }
}
