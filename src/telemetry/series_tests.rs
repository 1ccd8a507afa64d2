//! Rates and series on recorded sampler output: iperf3 traffic, wraps, a reset, a
//! vanished interface, missed samples; rings, downsampling and window statistics.

use super::*;
use crate::telemetry::parse::{Item, RecordParser};
use crate::telemetry::rate::{counter_delta, Delta, RateTracker};

const TESTBED: &str = include_str!("../../tests/fixtures/telemetry/sampler-testbed-node.txt");
const WRAPS: &str = include_str!("../../tests/fixtures/telemetry/sampler-wraps.txt");
const RDMA: &str = include_str!("../../tests/fixtures/telemetry/sampler-rdma-node.txt");
const H200: &str = include_str!("../../tests/fixtures/telemetry/sampler-h200.txt");

fn parse(text: &str) -> (Option<Hello>, Vec<Record>) {
    let mut p = RecordParser::new();
    let mut out = Vec::new();
    p.push(text.as_bytes(), &mut out);
    p.finish(&mut out);
    let mut hello = None;
    let mut recs = Vec::new();
    for i in out {
        match i {
            Item::Hello(h) => hello = Some(h),
            Item::Record(r) => recs.push(r),
        }
    }
    (hello, recs)
}

/// (seq, rx, tx) of `nic` at every sample, Mbit/s; NaN stays NaN.
fn rates_of(text: &str, nic: &str, skip: &[u64]) -> Vec<(u64, f64, f64)> {
    let (hello, recs) = parse(text);
    let mut t = RateTracker::new(hello.map(|h| h.interval_ms).unwrap_or(1000));
    recs.iter()
        .filter(|r| !skip.contains(&r.seq))
        .map(|r| {
            let s = t.update(r);
            let d = s.devices.iter().find(|d| d.device.label() == nic);
            let (rx, tx) = d.map(|d| (d.rx_bps, d.tx_bps)).unwrap_or((f64::NAN, f64::NAN));
            (r.seq, rx / 1e6, tx / 1e6)
        })
        .collect()
}

fn near(a: f64, b: f64, tol: f64) -> bool {
    (a.is_nan() && b.is_nan()) || (a - b).abs() <= tol
}

#[test]
fn counter_deltas() {
    let max = 1e12;
    type Packets = (Option<u64>, Option<u64>);
    let cases: &[(&str, u64, u64, Packets, Delta)] = &[
        ("plain", 100, 150, (Some(1), Some(2)), Delta::Plain(50)),
        ("unchanged", 7, 7, (None, None), Delta::Plain(0)),
        (
            "32-bit wrap",
            4_294_967_000,
            500,
            (Some(10), Some(20)),
            Delta::Wrapped32(796),
        ),
        (
            "64-bit wrap",
            u64::MAX - 99,
            50,
            (Some(10), Some(20)),
            Delta::Wrapped64(150),
        ),
        (
            "reset: packets back too",
            4_294_967_000,
            500,
            (Some(1000), Some(3)),
            Delta::Reset,
        ),
        (
            "reset: small prev, no packets",
            1000,
            10,
            (None, None),
            Delta::Reset,
        ),
        (
            "reset: 64-bit far from the top",
            1 << 40,
            10,
            (None, None),
            Delta::Reset,
        ),
        (
            "both counters wrap at 32 bits",
            4_294_967_000,
            500,
            (Some(4_294_967_200), Some(5)),
            Delta::Wrapped32(796),
        ),
        (
            "a 32-bit wrap over half the range is a reset",
            2_000_000_000,
            10,
            (None, None),
            Delta::Reset,
        ),
    ];
    for (what, prev, cur, pk, want) in cases {
        assert_eq!(counter_delta(*prev, *cur, *pk, max), *want, "{what}");
    }
    // A wrap faster than MAX_BPS allows is a reset.
    assert_eq!(
        counter_delta(u64::MAX - 99, 50, (None, None), 100.0),
        Delta::Reset
    );
}

/// Real capture: iperf3 at -b 200M on eth1 (~2 s), then eth2 deleted and created again.
#[test]
fn rates_from_the_testbed_capture() {
    let eth1 = rates_of(TESTBED, "eth1", &[]);
    assert!(
        eth1[0].1.is_nan() && eth1[0].2.is_nan(),
        "no rate before two samples"
    );
    // iperf3 paced at 200 Mbit/s of payload; the veth counts it with its headers.
    let busy: Vec<f64> = eth1.iter().filter(|r| r.2 > 150.0).map(|r| r.2).collect();
    assert_eq!(busy.len(), 4, "{eth1:?}");
    assert!(busy.iter().all(|&r| (185.0..210.0).contains(&r)), "{busy:?}");
    let mean = busy.iter().sum::<f64>() / 4.0;
    assert!((195.0..203.0).contains(&mean), "{mean}");
    assert!(
        eth1.iter().skip(8).all(|r| r.2 < 0.01),
        "idle after iperf3: {eth1:?}"
    );
    let eth2 = rates_of(TESTBED, "eth2", &[]);
    let seqs_nan: Vec<u64> = eth2.iter().filter(|r| r.1.is_nan()).map(|r| r.0).collect();
    assert_eq!(seqs_nan, [1, 9, 10, 11, 12], "absent in 9-11, new again in 12");
    assert!(eth2[12].1.is_finite() && eth2[13].1.is_finite());
}

/// The capture with its counters edited near 2^32 and 2^64 (see the fixtures' README).
#[test]
fn wraps_and_a_reset() {
    let eth1 = rates_of(WRAPS, "eth1", &[]);
    // eth1 tx crosses 2^32 between samples 5 and 6: the rates are those of the capture.
    let unedited = rates_of(TESTBED, "eth1", &[]);
    assert!(eth1[0].2.is_nan());
    for got in &eth1[1..] {
        let want = unedited.iter().find(|r| r.0 == got.0).unwrap();
        assert!(near(got.2, want.2, 1e-9), "eth1 tx {got:?} vs {want:?}");
    }
    assert!(eth1[2].2 > 150.0);
    let eth2 = rates_of(WRAPS, "eth2", &[]);
    // rx crosses 2^64 between 5 and 6: 250 bytes in 0.464 s.
    assert!(near(eth2[2].1 * 1e6, 250.0 * 8.0 / 0.463811848, 0.01), "{eth2:?}");
    let eth0 = rates_of(WRAPS, "eth0", &[]);
    assert!(
        eth0[2].1.is_nan(),
        "reset: no rate, never a zero or a huge one: {eth0:?}"
    );
    assert!(
        near(eth0[3].1 * 1e6, 90.0 * 8.0 / 0.523193707, 0.01),
        "counting resumes"
    );
}

#[test]
fn a_missed_sample_is_a_gap() {
    // Record 5 never arrived: sample 6 is NaN for every NIC, 7 counts again.
    let eth1 = rates_of(TESTBED, "eth1", &[5]);
    let at = |seq: u64| eth1.iter().find(|r| r.0 == seq).unwrap();
    assert!(at(6).1.is_nan() && at(6).2.is_nan(), "{eth1:?}");
    assert!(at(7).2 > 150.0);
    // Too long a pause between records is a gap too, even with the numbers in order.
    let (_, mut recs) = parse(TESTBED);
    let mut t = RateTracker::new(500);
    for r in recs.iter_mut() {
        if r.seq >= 6 {
            r.t_ns += 2_000_000_000;
        }
    }
    let samples: Vec<_> = recs.iter().map(|r| t.update(r)).collect();
    assert!(samples[5].missed && !samples[6].missed);
    assert!(samples[5].devices.iter().all(|d| d.tx_bps.is_nan()));
    // A record late by 400 ms (1.8 intervals) is no gap: its rate is the mean over 0.9 s.
    let (_, mut late) = parse(TESTBED);
    for r in late.iter_mut().filter(|r| r.seq >= 6) {
        r.t_ns += 400_000_000;
    }
    let mut t = RateTracker::new(500);
    let samples: Vec<_> = late.iter().map(|r| t.update(r)).collect();
    assert!(!samples[5].missed);
    let tx = |s: &crate::telemetry::rate::Sample| {
        s.devices
            .iter()
            .find(|d| d.device.label() == "eth1")
            .unwrap()
            .tx_bps
    };
    let bytes = (late[5].nics[2].tx_bytes - late[4].nics[2].tx_bytes) as f64;
    let secs = (late[5].t_ns - late[4].t_ns) as f64 / 1e9;
    assert!(near(tx(&samples[5]), bytes * 8.0 / secs, 1e-6));
    // A clock that goes back: a gap, and the next sample counts from there.
    let mut t = RateTracker::new(500);
    t.update(&recs[0]);
    let mut back = recs[1].clone();
    back.t_ns = recs[0].t_ns - 1;
    assert!(t.update(&back).missed);
}

#[test]
fn rdma_words_are_four_bytes() {
    let store = store_of(RDMA, 100);
    let n = store.node(0).unwrap();
    let s = n
        .series(&SeriesKey::net(Device::rdma("mlx5_0", 1), Metric::Tx))
        .unwrap();
    let st = s.stats(0, u32::MAX);
    // 3.125e9 words/s = 100 Gbit/s; the recorded clock jitters by < 0.5 ms.
    assert!(near(st.avg, 100e9, 0.1e9), "{st:?}");
    let slow = n
        .series(&SeriesKey::net(Device::rdma("mlx5_7", 1), Metric::Rx))
        .unwrap();
    assert!(near(slow.stats(0, u32::MAX).peak, 10e9, 0.02e9));
    assert_eq!(n.rdma_netdevs.get("gpu7rdma0"), Some(&Device::rdma("mlx5_7", 1)));
    // The a3-ultra layout: 8 data rails, the slow one flagged against its node.
    let roles = Classifier::auto().roles(&store, 0);
    let data: Vec<String> = roles
        .iter()
        .filter(|(_, r)| *r == Role::Data)
        .map(|(d, _)| d.label())
        .collect();
    assert_eq!(data.len(), 8, "{roles:?}");
    let flags = crate::telemetry::imbalance::detect_in(&store, &[0], &Classifier::auto(), &Rule::default());
    let named: Vec<(String, Direction)> = flags
        .iter()
        .map(|f| (f.device.as_ref().unwrap().label(), f.direction))
        .collect();
    assert_eq!(
        named,
        vec![
            ("mlx5_7/1".to_string(), Direction::Rx),
            ("mlx5_7/1".to_string(), Direction::Tx)
        ]
    );
}

use crate::telemetry::imbalance::{Direction, Rule};
use crate::telemetry::layout::{Classifier, Role};

fn store_of(text: &str, cap: usize) -> Telemetry {
    let mut s = Telemetry::new(cap);
    s.ingest_text(0, text);
    s
}

#[test]
fn ring_buffers() {
    let mut r: Ring<u32> = Ring::new(4);
    assert!(r.is_empty() && r.last().is_none());
    for i in 1..=3 {
        r.push(i);
    }
    assert_eq!(r.iter().collect::<Vec<_>>(), [1, 2, 3]);
    for i in 4..=10 {
        r.push(i);
    }
    assert_eq!(r.len(), 4);
    assert_eq!(r.iter().collect::<Vec<_>>(), [7, 8, 9, 10]);
    assert_eq!(r.iter().rev().collect::<Vec<_>>(), [10, 9, 8, 7]);
    for start in 0..6 {
        let want: Vec<u32> = r.iter().skip(start).collect();
        assert_eq!(r.iter_from(start).collect::<Vec<_>>(), want, "from {start}");
    }
    let mut half: Ring<u32> = Ring::new(4);
    half.push(1);
    half.push(2);
    assert_eq!(half.iter_from(1).collect::<Vec<_>>(), [2]);
    assert_eq!(half.iter_from(3).count(), 0);
    assert_eq!(
        (r.get(0), r.get(3), r.get(4), r.last()),
        (Some(7), Some(10), None, Some(10))
    );
    assert_eq!(r.partition_point(|v| v <= 8), 2);
    assert_eq!(r.partition_point(|v| v <= 100), 4);
    assert_eq!(r.partition_point(|_| false), 0);
    // Filled, a ring holds room for its capacity and no more (a Vec's doubling would
    // give 1024 for 682: half as much again of a large fleet's memory).
    let mut big: Ring<f32> = Ring::new(682);
    for i in 0..2000 {
        big.push(i as f32);
    }
    assert_eq!((big.len(), big.buf.capacity()), (682, 682));
    assert_eq!(big.last(), Some(1999.0));
}

/// A store fed points by hand: `(t_ms after the first, rx Mbit/s)` on eth1 of node 0.
fn store_with(points: &[(i64, f64)]) -> Telemetry {
    use crate::telemetry::parse::{ClockKind, NicCounters};
    let mut s = Telemetry::new(1000);
    s.hello(
        0,
        Hello {
            version: 1,
            interval_ms: 1000,
            clock: ClockKind::Unix,
            host: None,
            default_route: None,
            gpu_fields: vec![],
            gpus: vec![],
            addrs: vec![],
        },
    );
    let t0 = 1_800_000_000_000_000_000i64;
    let (mut bytes, mut last_t) = (0u64, 0i64);
    let mut seq = 0;
    for &(t, mbps) in std::iter::once(&(0, 0.0)).chain(points) {
        seq += 1;
        if mbps.is_finite() {
            bytes += (mbps * 1e6 / 8.0 * (t - last_t) as f64 / 1000.0) as u64;
        } else {
            seq += 1; // a lost record: the numbers jump
        }
        last_t = t;
        let rec = Record {
            seq,
            t_ns: t0 + t * 1_000_000,
            clock: ClockKind::Unix,
            nics: vec![NicCounters {
                name: "eth1".into(),
                rx_bytes: bytes,
                rx_packets: seq,
                rx_errs: 0,
                rx_drop: 0,
                tx_bytes: 0,
                tx_packets: 0,
                tx_errs: 0,
                tx_drop: 0,
            }],
            rdma: vec![],
            gpu_batch: None,
            gpus: vec![],
            link_batch: None,
            links: vec![],
            tcp: vec![],
            bad_lines: 0,
        };
        s.ingest(0, &rec, 0).expect("in order");
    }
    s
}

fn eth1(s: &Telemetry) -> Series<'_> {
    s.node(0)
        .unwrap()
        .series(&SeriesKey::net(Device::nic("eth1"), Metric::Rx))
        .unwrap()
}

#[test]
fn downsampling_keeps_the_max_and_the_gaps() {
    // 1 s samples, a spike at 5 s, a lost record at 8 s.
    let pts: Vec<(i64, f64)> = (1..=12)
        .map(|i| {
            let v = match i {
                5 => 900.0,
                8 => f64::NAN,
                _ => 100.0 + i as f64,
            };
            (i * 1000, v)
        })
        .collect();
    let s = store_with(&pts);
    let ser = eth1(&s);
    let t0 = ser.t_ms.get(0).unwrap(); // the store time of "0 s"
    let at = |sec: u32| t0 + sec * 1000;
    // 4 columns of 3 s over (0, 12]: max of each, the spike kept, the gap skipped.
    let cols = ser.downsample(at(0), at(12), 4);
    let r = |v: f32| (v / 1e5).round() / 10.0;
    assert_eq!(
        cols.iter().map(|&v| r(v)).collect::<Vec<_>>(),
        [103.0, 900.0, 109.0, 112.0]
    );
    // 12 columns: one a sample; the lost one (and the one after it, which spans the loss)
    // are gaps, never zeros.
    let cols = ser.downsample(at(0), at(12), 12);
    assert!(cols[7].is_nan(), "{cols:?}");
    assert_eq!(r(cols[4]), 900.0);
    assert_eq!(r(cols[8]), 109.0);
    // More columns than samples: each sample fills the columns of its interval.
    let cols = ser.downsample(at(0), at(2), 8);
    assert!(cols.iter().all(|v| v.is_finite()), "{cols:?}");
    assert_eq!(r(cols[0]), 101.0);
    assert_eq!(r(cols[7]), 102.0);
    // Nothing known before the first sample; degenerate windows.
    assert!(ser
        .downsample(at(0) - 100_000, at(0) - 50_000, 5)
        .iter()
        .all(|v| v.is_nan()));
    assert!(ser.downsample(at(5), at(5), 3).iter().all(|v| v.is_nan()));
    assert!(ser.downsample(at(0), at(12), 0).is_empty());
}

#[test]
fn window_statistics() {
    let pts: Vec<(i64, f64)> = (1..=10)
        .map(|i| (i * 1000, if i == 9 { f64::NAN } else { i as f64 * 10.0 }))
        .collect();
    let s = store_with(&pts);
    let ser = eth1(&s);
    let t0 = ser.t_ms.get(0).unwrap();
    let st = ser.stats(t0 + 5000, t0 + 10_000);
    // (5, 10]: 60, 70, 80, a gap (record 9 came after a lost one), 100.
    assert_eq!(st.points, 5);
    assert_eq!(st.known, 4);
    assert!(near(st.current, 100e6, 1e5));
    assert!(near(st.avg, 77.5e6, 1e5), "{st:?}");
    assert!(near(st.peak, 100e6, 1e5));
    let st = ser.stats(t0 + 7000, t0 + 9000);
    assert!(st.current.is_nan(), "the window ends in a gap");
    let st = ser.stats(t0, t0 + 4000);
    assert!(near(st.current, 40e6, 1e5) && near(st.avg, 25e6, 1e5), "{st:?}");
    let empty = ser.stats(t0 + 50_000, t0 + 60_000);
    assert_eq!((empty.points, empty.known), (0, 0));
    assert!(empty.current.is_nan() && empty.avg.is_nan() && empty.peak.is_nan());
}

#[test]
fn memory_is_bounded_and_devices_come_and_go() {
    let mut s = Telemetry::new(5);
    s.ingest_text(0, TESTBED);
    let n = s.node(0).unwrap();
    assert_eq!(n.times().len(), 5);
    assert_eq!(n.records, 14);
    // eth2 vanished at 9 and came back at 12: its column stayed aligned with the times.
    let eth2 = n
        .series(&SeriesKey::net(Device::nic("eth2"), Metric::Tx))
        .unwrap();
    assert_eq!(eth2.v.len(), eth2.t_ms.len());
    let v: Vec<bool> = eth2.v.iter().map(f32::is_finite).collect();
    assert_eq!(
        v,
        [false, false, false, true, true],
        "10, 11 absent; 12 new; 13, 14 known"
    );
    // A device that appears late is back-filled with gaps.
    let mut s = Telemetry::new(100);
    let (_, recs) = parse(TESTBED);
    for r in &recs[..3] {
        let mut r = r.clone();
        r.nics.retain(|n| n.name != "eth1");
        s.ingest(0, &r, 0);
    }
    for r in &recs[3..6] {
        s.ingest(0, r, 0);
    }
    let n = s.node(0).unwrap();
    let e1 = n
        .series(&SeriesKey::net(Device::nic("eth1"), Metric::Tx))
        .unwrap();
    assert_eq!(e1.v.len(), 6);
    assert_eq!(e1.v.iter().filter(|v| v.is_finite()).count(), 2);
    // One that shows nothing for a whole capacity is dropped.
    let mut s = Telemetry::new(4);
    for (i, r) in recs.iter().enumerate() {
        let mut r = r.clone();
        if i >= 2 {
            r.nics.retain(|n| n.name != "lo");
        }
        s.ingest(0, &r, 0);
    }
    let n = s.node(0).unwrap();
    assert!(n.series(&SeriesKey::net(Device::nic("lo"), Metric::Rx)).is_none());
    assert!(n
        .series(&SeriesKey::net(Device::nic("eth0"), Metric::Rx))
        .is_some());
    // Out of order: refused, counted.
    let mut s = Telemetry::new(10);
    s.ingest(0, &recs[3], 0);
    assert!(s.ingest(0, &recs[2], 0).is_none());
    assert_eq!(s.node(0).unwrap().out_of_order, 1);
}

#[test]
fn gpu_series_from_the_h200_recording() {
    let s = store_of(H200, 100);
    let n = s.node(0).unwrap();
    let util = n.series(&SeriesKey::gpu(0, Metric::GpuUtil)).unwrap();
    let st = util.stats(0, u32::MAX);
    assert_eq!(st.peak, 11.0);
    assert!(util.v.get(0).unwrap().is_nan(), "nvidia-smi had not answered yet");
    let power = n.series(&SeriesKey::gpu(0, Metric::GpuPower)).unwrap();
    assert!(near(power.stats(0, u32::MAX).peak, 131.99, 0.01));
    let latest = &n.gpus[&0];
    assert_eq!(latest.info.as_ref().unwrap().name, "NVIDIA H200");
    assert_eq!(latest.reading.as_ref().unwrap().sm_clock_mhz, Some(1980.0));
    let pcie = n.series(&SeriesKey::gpu(0, Metric::PcieRx)).unwrap();
    assert!(near(pcie.stats(0, u32::MAX).peak / 8e6, 14133.0, 0.01));
}

#[test]
fn stale_gpu_figures_are_gaps() {
    let (hello, recs) = parse(H200);
    let mut t = RateTracker::new(hello.unwrap().interval_ms);
    // nvidia-smi hangs after batch 5: the same batch again and again.
    let frozen = recs[5].clone();
    let mut fresh = 0;
    for (i, r) in recs.iter().enumerate().skip(1) {
        let mut r = r.clone();
        if i > 5 {
            r.gpu_batch = frozen.gpu_batch;
            r.gpus = frozen.gpus.clone();
        }
        if !t.update(&r).gpus.is_empty() {
            fresh += 1;
        }
    }
    // Batches 1..5 fresh, then 3 s of the frozen one (within the staleness), then none.
    assert!((7..=9).contains(&fresh), "{fresh}");
}

#[test]
fn fleet_aggregate_sums_nodes() {
    let mut s = Telemetry::new(100);
    s.ingest_text(0, TESTBED);
    s.ingest_text(1, TESTBED);
    let key = SeriesKey::net(Device::nic("eth1"), Metric::Tx);
    let one = s.node(0).unwrap().series(&key).unwrap();
    let (from, to) = (one.t_ms.get(0).unwrap(), one.t_ms.last().unwrap());
    let single = one.downsample(from, to, 7);
    let both = s.aggregate(&[(0, key.clone()), (1, key.clone())], from, to, 7);
    for (a, b) in single.iter().zip(&both) {
        assert!(
            (a.is_nan() && b.is_nan()) || (2.0 * a - b).abs() < 1.0,
            "{single:?} {both:?}"
        );
    }
}

#[test]
fn a_node_sum_adds_known_values_and_keeps_a_missed_sample_a_gap() {
    use crate::telemetry::synth::Synth;
    let mut synth = Synth::new(1, &["eth1", "eth2"], 0, 1000);
    let mut store = Telemetry::new(10);
    synth.fill(
        &mut store,
        20,
        |_, nic, _| (1e9 * (1 + nic) as f64, 0.0),
        |_, _, _| (0.0, 0.0),
        |_, seq| seq == 15,
    );
    let node = store.node(0).unwrap();
    let keys: Vec<SeriesKey> = ["eth1", "eth2", "gone"]
        .into_iter()
        .map(|d| SeriesKey::net(Device::nic(d), Metric::Rx))
        .collect();
    assert!(node.sum_in(&keys[2..], 0, u32::MAX).is_none());
    let now = store.now_ms().unwrap();
    // The ring is full (capacity 10, 19 records): records 10..20 without 15. The window
    // (12 s, 20 s] starts at record 13; record 12 reaches into it, 10 and 11 are NaN.
    let sum = node.sum_in(&keys, now - 8_000, now).unwrap();
    let s = node.series_of(&sum);
    let v: Vec<f32> = s.v.iter().collect();
    assert_eq!(v.len(), 10);
    // Record 16 follows the lost 15: no rates, a gap in the sum too.
    let t: Vec<u32> = s.t_ms.iter().collect();
    let at16 = t.iter().position(|&x| x == now - 4_000).unwrap();
    assert!(v[at16].is_nan(), "{v:?}");
    assert!(v[0].is_nan() && v[1].is_nan(), "{v:?}");
    for (i, x) in v.iter().enumerate().filter(|(i, _)| *i != at16 && *i > 1) {
        assert_eq!(*x, 3e9, "point {i}: {v:?}");
    }
    let st = s.stats(now - 8_000, now);
    assert_eq!((st.current, st.peak, st.known, st.points), (3e9, 3e9, 6, 7));
    let d = s.downsample(now - 8_000, now, 8);
    assert_eq!(d.iter().filter(|x| x.is_nan()).count(), 2, "{d:?}");
}

#[test]
fn a_summary_is_downsample_and_stats_in_one() {
    use crate::telemetry::synth::Synth;
    let mut synth = Synth::new(1, &["eth1"], 0, 1000);
    let mut store = Telemetry::new(50);
    synth.fill(
        &mut store,
        80,
        |_, _, seq| (1e6 * (seq % 7) as f64, 0.0),
        |_, _, _| (0.0, 0.0),
        |_, seq| seq % 13 == 0,
    );
    let node = store.node(0).unwrap();
    let s = node
        .series(&SeriesKey::net(Device::nic("eth1"), Metric::Rx))
        .unwrap();
    let now = store.now_ms().unwrap();
    for (from, to, cols) in [
        (now - 30_000, now, 17),
        (now - 60_000, now, 100),
        (now - 10_500, now - 2_200, 3),
        (0, now, 1),
        (now - 5_000, now, 0),
        (now + 1, now + 10, 4),
    ] {
        let (d, st) = s.summary(from, to, cols);
        let (d0, st0) = (s.downsample(from, to, cols), s.stats(from, to));
        let same = |x: f32, y: f32| x == y || (x.is_nan() && y.is_nan());
        assert!(
            d.iter().zip(&d0).all(|(x, y)| same(*x, *y)) && d.len() == d0.len(),
            "{d:?} {d0:?}"
        );
        let same64 = |x: f64, y: f64| x == y || (x.is_nan() && y.is_nan());
        assert!(
            same64(st.current, st0.current)
                && same64(st.avg, st0.avg)
                && same64(st.peak, st0.peak)
                && (st.known, st.points) == (st0.known, st0.points),
            "{st:?} {st0:?}"
        );
    }
}
