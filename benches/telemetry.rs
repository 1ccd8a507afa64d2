//! Telemetry ingest at fleet scale: 256 nodes (or `TELEMETRY_BENCH_NODES`), each with 10 NICs (lo, a control gVNIC and
//! 8 data gVNICs, as an a3-megagpu-8g) and 8 GPUs, sampled at 1 Hz. One "round" is what
//! flightdeck takes in each second: 256 records as the sampler prints them (bytes), parsed,
//! turned into rates and pushed into rings of the store's size for the fleet
//! (`Telemetry::for_fleet`: an hour, 3600 points, up to ~180 nodes; 682 at 1024 nodes).
//! The share of one core is the time of a round over 1 s (target < 2%).
//!
//! * `ingest/round-256x(10nic+8gpu)`: bytes -> parser -> rates -> rings, store full (steady state);
//! * `parse/round-256`: the parser alone;
//! * `view/downsample-1h-to-200`: one node's 20 NIC series, its whole history into 200 columns;
//! * `view/aggregate-256-nodes`: a fleet chart of one rail over 256 nodes, 200 columns;
//! * `flags/detect-256-nodes`: the imbalance rule over the fleet's data NICs.
//!
//! The record text repeats the recorded formats (tests/fixtures/telemetry): /proc/net/dev
//! lines and the H200's nvidia-smi line, with counters advancing every round.
//!
//! Run: `cargo bench --bench telemetry -- --warm-up-time 1 --measurement-time 5`;
//! `TELEMETRY_BENCH_NODES=1024` for another fleet size (the names follow it). The
//! process's resident memory once every ring is full is printed first.

use criterion::{criterion_group, criterion_main, Criterion};
use flightdeck::telemetry::parse::{Item, RecordParser};
use flightdeck::telemetry::{imbalance, Classifier, Device, Metric, Rule, SeriesKey, Telemetry};
use std::fmt::Write;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Nodes of the fleet: `TELEMETRY_BENCH_NODES`, else 256.
fn nodes() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("TELEMETRY_BENCH_NODES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(256)
    })
}

/// This process's resident memory, in MiB (VmRSS of /proc/self/status).
fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}
const DATA: [&str; 8] = [
    "enp6s0", "enp7s0", "enp13s0", "enp14s0", "enp134s0", "enp135s0", "enp141s0", "enp142s0",
];
const GPU_FIELDS: &str =
    "index,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,temperature.gpu,temperature.memory,clocks.sm";

fn hello() -> String {
    let mut s = format!("@fd 1 ms=1000 clock=us host=a3mega route=enp0s12 gpus=8 gpufields={GPU_FIELDS}\n");
    for g in 0..8 {
        let _ = writeln!(
            s,
            "@gpuinfo {g}, NVIDIA H100 80GB HBM3, GPU-9fb12d3a-92ce-068a-58c5-7c2f58de6be{g}, 81559, 700.00"
        );
    }
    s
}

/// Node `node`'s record of round `r` (1-based), as the sampler prints it.
fn record(out: &mut String, node: usize, r: u64) {
    let t = 1_795_315_483u64 + r;
    let _ = writeln!(out, "@s {r} {t}.{:06}", (node * 37) % 1000);
    out.push_str("Inter-|   Receive                                                |  Transmit\n");
    out.push_str(" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n");
    let line = |out: &mut String, name: &str, rate: u64| {
        let (b, p) = (1_000_000 + r * rate, 1_000 + r * (rate / 1500 + 1));
        let _ = writeln!(
            out,
            "{name:>9}: {b:>12} {p:>9}    0    0    0     0          0         0 {b:>12} {p:>9}    0    0    0     0       0          0"
        );
    };
    line(out, "lo", 3_293);
    line(out, "enp0s12", 120_000);
    for (i, d) in DATA.iter().enumerate() {
        line(out, d, 25_000_000_000 + (i as u64) * 1_000_000 + node as u64);
    }
    out.push_str("@ib\n");
    let _ = writeln!(out, "@gpu {r}");
    for g in 0..8 {
        let _ = writeln!(
            out,
            "{g}, {}, 35, 71523, 81559, {}.{:02}, 61, 70, 1980",
            90 + (r + g) % 10,
            600 + (r * 7 + g) % 90,
            r % 100
        );
    }
    let _ = writeln!(out, "@e {r}");
}

/// One round's text for every node.
fn round(r: u64) -> Vec<String> {
    (0..nodes())
        .map(|n| {
            let mut s = String::with_capacity(4096);
            record(&mut s, n, r);
            s
        })
        .collect()
}

struct Fleet {
    store: Telemetry,
    parsers: Vec<RecordParser>,
    items: Vec<Item>,
    next: u64,
}

impl Fleet {
    fn new() -> Fleet {
        let mut f = Fleet {
            store: Telemetry::for_fleet(nodes()),
            parsers: (0..nodes()).map(|_| RecordParser::new()).collect(),
            items: Vec::new(),
            next: 1,
        };
        let h = hello();
        for n in 0..nodes() {
            f.feed(n, h.as_bytes());
        }
        f
    }

    fn feed(&mut self, node: usize, bytes: &[u8]) {
        self.items.clear();
        self.parsers[node].push(bytes, &mut self.items);
        for it in self.items.drain(..) {
            match it {
                Item::Hello(h) => self.store.hello(node, h),
                Item::Record(rec) => {
                    black_box(self.store.ingest(node, &rec, 0));
                }
            }
        }
    }

    fn ingest_round(&mut self, texts: &[String]) {
        for (n, t) in texts.iter().enumerate() {
            self.feed(n, t.as_bytes());
        }
        self.next += 1;
    }

    /// Fill every ring to its capacity (steady state: every push overwrites).
    fn fill(&mut self) {
        while self.next <= self.store.capacity() as u64 + 1 {
            let texts = round(self.next);
            self.ingest_round(&texts);
        }
    }
}

fn benches(c: &mut Criterion) {
    let mut fleet = Fleet::new();
    let empty = rss_mib();
    fleet.fill();
    let bytes: usize = round(1).iter().map(String::len).sum();
    eprintln!(
        "one round: {} records, {} KiB of sampler output; store: {} nodes x {} points; resident {:.0} MiB ({:.0} MiB before the first record)",
        nodes(),
        bytes / 1024,
        fleet.store.node_count(),
        fleet.store.node(0).map_or(0, |n| n.times().len()),
        rss_mib(),
        empty
    );

    let mut g = c.benchmark_group("ingest");
    g.bench_function(format!("round-{}x(10nic+8gpu)", nodes()), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let texts = round(fleet.next);
                let t = Instant::now();
                fleet.ingest_round(&texts);
                total += t.elapsed();
            }
            total
        })
    });
    g.finish();

    let texts = round(1);
    c.bench_function(&format!("parse/round-{}", nodes()), |b| {
        b.iter(|| {
            let mut items = Vec::new();
            for t in &texts {
                let mut p = RecordParser::new();
                p.push(t.as_bytes(), &mut items);
            }
            black_box(items.len())
        })
    });

    let store = &fleet.store;
    let now = store.now_ms().unwrap();
    // The whole history the store keeps (an hour up to ~180 nodes, less past that).
    let from = now.saturating_sub(store.capacity() as u32 * 1000);
    let node0 = store.node(0).unwrap();
    let keys: Vec<SeriesKey> = ["lo", "enp0s12"]
        .iter()
        .chain(DATA.iter())
        .flat_map(|d| [Metric::Rx, Metric::Tx].map(|m| SeriesKey::net(Device::nic(d), m)))
        .collect();
    c.bench_function("view/downsample-1h-to-200", |b| {
        b.iter(|| {
            for k in &keys {
                black_box(node0.series(k).unwrap().downsample(from, now, 200));
            }
        })
    });
    let rail: Vec<(usize, SeriesKey)> = (0..nodes())
        .map(|n| (n, SeriesKey::net(Device::nic(DATA[0]), Metric::Tx)))
        .collect();
    c.bench_function(&format!("view/aggregate-{}-nodes", nodes()), |b| {
        b.iter(|| black_box(store.aggregate(&rail, from, now, 200)))
    });
    let all: Vec<usize> = (0..nodes()).collect();
    let classifier = Classifier::auto();
    let rule = Rule::default();
    c.bench_function(&format!("flags/detect-{}-nodes", nodes()), |b| {
        b.iter(|| black_box(imbalance::detect_in(store, &all, &classifier, &rule)))
    });
}

criterion_group!(telemetry, benches);
criterion_main!(telemetry);
