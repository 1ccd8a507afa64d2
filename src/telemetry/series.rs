//! Bounded time series of a fleet's telemetry, as ../shared/STYLE.md describes:
//! struct-of-arrays rings of fixed capacity, gaps as NaN, downsampling that keeps the
//! maximum of each bucket, and current/average/peak over a window.
//!
//! One deliberate change from `Series { t_ms: Ring<u32>, v: Ring<f32> }` per key: all
//! series of a node share that node's one time ring (every value of a record has the
//! record's time), so a node is `t_ms` plus one `Ring<f32>` per (device, metric). That
//! halves the memory (4 bytes a point, not 8) and the work at ingest. A device that
//! appears later is back-filled with NaN; one that has shown nothing but NaN for a whole
//! capacity is dropped.
//!
//! Times are `u32` milliseconds from the store's epoch (the first sample's Unix time less
//! one hour, so that nodes whose clocks run behind still fit), good for 49 days.
//! A point at `t` holds the rate over `(previous point's t, t]`.

use super::parse::{GpuInfo, GpuReading, Hello, LinkReading, Record};
use super::rate::{Device, RateTracker, Sample};
use std::collections::{BTreeMap, HashMap};

/// One hour at one second.
pub const DEFAULT_CAPACITY: usize = 3600;

/// How far before the first sample the epoch lies, ms.
const EPOCH_MARGIN_MS: i64 = 3_600_000;

/// A ring buffer of fixed capacity; oldest first. Grows to its capacity, then overwrites.
#[derive(Debug, Clone)]
pub struct Ring<T> {
    buf: Vec<T>,
    /// Where the next value goes once full (the oldest value).
    head: usize,
    cap: usize,
}

impl<T: Copy> Ring<T> {
    pub fn new(cap: usize) -> Ring<T> {
        Ring {
            buf: Vec::new(),
            head: 0,
            cap: cap.max(1),
        }
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// A ring of capacity `cap` holding `values`, oldest first (at most `cap` of them:
    /// the newest are kept).
    pub fn from_oldest(mut values: Vec<T>, cap: usize) -> Ring<T> {
        let cap = cap.max(1);
        if values.len() > cap {
            values.drain(..values.len() - cap);
        }
        Ring {
            buf: values,
            head: 0,
            cap,
        }
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn push(&mut self, v: T) {
        if self.buf.len() < self.cap {
            // Grown by doubling, as a Vec is, but never past the ring's capacity (a Vec's
            // own doubling would leave a ring of 682 holding room for 1024).
            if self.buf.len() == self.buf.capacity() {
                let grow = self.buf.len().max(4).min(self.cap - self.buf.len());
                self.buf.reserve_exact(grow);
            }
            self.buf.push(v);
        } else {
            self.buf[self.head] = v;
            self.head = (self.head + 1) % self.cap;
        }
    }

    /// The `i`th value, 0 the oldest.
    pub fn get(&self, i: usize) -> Option<T> {
        if i >= self.buf.len() {
            return None;
        }
        let j = if self.buf.len() < self.cap {
            i
        } else {
            (self.head + i) % self.cap
        };
        Some(self.buf[j])
    }

    pub fn last(&self) -> Option<T> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    /// The values in order as two slices (oldest first).
    fn slices(&self) -> (&[T], &[T]) {
        if self.buf.len() < self.cap {
            (&self.buf[..], &self.buf[..0])
        } else {
            let (x, y) = self.buf.split_at(self.head);
            (y, x)
        }
    }

    /// Values `a..b` (0 the oldest) as up to two slices, in order.
    fn range_slices(&self, a: usize, b: usize) -> (&[T], &[T]) {
        let (x, y) = self.slices();
        let b = b.min(x.len() + y.len());
        let a = a.min(b);
        if b <= x.len() {
            (&x[a..b], &y[..0])
        } else if a >= x.len() {
            (&y[a - x.len()..b - x.len()], &x[..0])
        } else {
            (&x[a..], &y[..b - x.len()])
        }
    }

    /// Oldest to newest.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = T> + '_ {
        self.iter_from(0)
    }

    /// From the `start`th value (0 the oldest) to the newest, without walking the first.
    pub fn iter_from(&self, start: usize) -> impl DoubleEndedIterator<Item = T> + '_ {
        let (a, b) = self.slices();
        let (a, b) = if start <= a.len() {
            (&a[start..], b)
        } else {
            (&a[..0], &b[(start - a.len()).min(b.len())..])
        };
        a.iter().chain(b.iter()).copied()
    }

    /// The first index whose value does not satisfy `pred` (values ordered by it).
    pub fn partition_point(&self, pred: impl Fn(T) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if pred(self.get(mid).expect("in range")) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// What a series measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Received, bits per second.
    Rx,
    /// Sent, bits per second.
    Tx,
    /// GPU utilisation, %.
    GpuUtil,
    /// GPU power draw, W.
    GpuPower,
    /// GPU memory used, MiB.
    GpuMemUsed,
    /// PCIe received by the GPU, bits per second.
    PcieRx,
    /// PCIe sent by the GPU, bits per second.
    PcieTx,
    /// NVLink received by the GPU, bits per second.
    NvlinkRx,
    /// NVLink sent by the GPU, bits per second.
    NvlinkTx,
}

/// What a series is of: a NIC or RDMA port, or a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Net(Device),
    Gpu(u32),
}

/// A series of a node.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesKey {
    pub source: Source,
    pub metric: Metric,
}

impl SeriesKey {
    pub fn net(device: Device, metric: Metric) -> SeriesKey {
        SeriesKey {
            source: Source::Net(device),
            metric,
        }
    }

    pub fn gpu(index: u32, metric: Metric) -> SeriesKey {
        SeriesKey {
            source: Source::Gpu(index),
            metric,
        }
    }
}

#[derive(Debug, Clone)]
struct Column {
    key: SeriesKey,
    v: Ring<f32>,
    /// NaNs pushed in a row; a column with a capacity of them is dropped.
    nan_run: usize,
}

/// A view of one series: the node's times and the series' values, index for index.
#[derive(Debug, Clone, Copy)]
pub struct Series<'a> {
    pub t_ms: &'a Ring<u32>,
    pub v: &'a Ring<f32>,
    /// The node's interval, ms (how far back the first point reaches).
    pub interval_ms: u32,
}

/// Current, average and peak of a series over a window.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct WindowStats {
    /// The last value in the window (NaN: a gap, or nothing).
    pub current: f64,
    /// Time-weighted mean of the known values (bytes moved / time, for a rate).
    pub avg: f64,
    /// The largest known value.
    pub peak: f64,
    /// Points with a known value.
    pub known: usize,
    /// Points in the window, gaps included.
    pub points: usize,
}

impl WindowStats {
    pub const EMPTY: WindowStats = WindowStats {
        current: f64::NAN,
        avg: f64::NAN,
        peak: f64::NAN,
        known: 0,
        points: 0,
    };
}

impl<'a> Series<'a> {
    /// Points with `from_ms < t <= to_ms`, as (index range).
    fn range(&self, from_ms: u32, to_ms: u32) -> (usize, usize) {
        let a = self.t_ms.partition_point(|t| t <= from_ms);
        let b = self.t_ms.partition_point(|t| t <= to_ms);
        (a, b.max(a))
    }

    /// Points `a..b` as (start of its interval, t, value), oldest first.
    fn points(&self, a: usize, b: usize) -> impl Iterator<Item = (u32, u32, f32)> + 'a {
        let iv = self.interval_ms;
        let mut prev = a.checked_sub(1).and_then(|j| self.t_ms.get(j));
        self.t_ms
            .iter_from(a)
            .zip(self.v.iter_from(a))
            .take(b.saturating_sub(a))
            .map(move |(t, v)| {
                let start = prev.unwrap_or(t.saturating_sub(iv));
                prev = Some(t);
                (start, t, v)
            })
    }

    pub fn last(&self) -> Option<(u32, f32)> {
        Some((self.t_ms.last()?, self.v.last()?))
    }

    /// Calls `f(t, v)` for points `a..b`, oldest first, walking both rings' memory in
    /// step (their oldest values need not sit at the same place): the hot loop of the
    /// views, free of iterator adaptors.
    fn for_each(&self, a: usize, b: usize, mut f: impl FnMut(u32, f32)) {
        let (t1, t2) = self.t_ms.range_slices(a, b);
        let (v1, v2) = self.v.range_slices(a, b);
        let (mut ts, mut tn, mut vs, mut vn) = (t1, t2, v1, v2);
        loop {
            if ts.is_empty() {
                if tn.is_empty() {
                    break;
                }
                ts = std::mem::take(&mut tn);
            }
            if vs.is_empty() {
                if vn.is_empty() {
                    break;
                }
                vs = std::mem::take(&mut vn);
            }
            let k = ts.len().min(vs.len());
            for (t, v) in ts[..k].iter().zip(&vs[..k]) {
                f(*t, *v);
            }
            ts = &ts[k..];
            vs = &vs[k..];
        }
    }

    /// The values over `(from_ms, to_ms]` in `columns` buckets of equal time, each the
    /// largest value whose interval touches the bucket; NaN where nothing is known.
    pub fn downsample(&self, from_ms: u32, to_ms: u32, columns: usize) -> Vec<f32> {
        let mut out = vec![f32::NAN; columns];
        if columns == 0 || to_ms <= from_ms {
            return out;
        }
        let span = u64::from(to_ms - from_ms);
        let n = columns as u64;
        // Bucket c holds (from + c*w, from + (c+1)*w] with w = span/n: an interval
        // (start, t] covers the buckets from floor(start'*n/span) to ceil(t'*n/span) - 1
        // (primes: offsets from `from`). Both move only forward as the points do, so two
        // cursors find them with multiplications alone.
        let (mut first, mut last) = (0u64, 0u64);
        // Points whose interval reaches into the window: up to the first past its end.
        let (a, b) = self.range(from_ms, to_ms);
        let end = (b + 1).min(self.t_ms.len());
        for (start, t, v) in self.points(a, end) {
            if !v.is_finite() || t <= from_ms || start >= to_ms {
                continue;
            }
            let s_off = u64::from(start.clamp(from_ms, to_ms) - from_ms) * n;
            let t_off = u64::from(t.clamp(from_ms, to_ms) - from_ms) * n;
            while first + 1 < n && (first + 1) * span <= s_off {
                first += 1;
            }
            last = last.max(first);
            while last + 1 < n && t_off > (last + 1) * span {
                last += 1;
            }
            for c in &mut out[first as usize..=last as usize] {
                if c.is_nan() || v > *c {
                    *c = v;
                }
            }
        }
        out
    }

    /// [`Series::downsample`] and [`Series::stats`] of one window in one pass (what a
    /// chart with its figures needs).
    pub fn summary(&self, from_ms: u32, to_ms: u32, columns: usize) -> (Vec<f32>, WindowStats) {
        let mut out = vec![f32::NAN; columns];
        let (a, b) = self.range(from_ms, to_ms);
        if a == b && (columns == 0 || to_ms <= from_ms) {
            return (out, WindowStats::EMPTY);
        }
        let span = u64::from(to_ms.saturating_sub(from_ms)).max(1);
        let n = columns as u64;
        let (mut first, mut last) = (0u64, 0u64);
        let (mut sum, mut time, mut peak, mut known) = (0.0f64, 0.0f64, f64::NAN, 0usize);
        let mut current = f64::NAN;
        let end = (b + 1).min(self.t_ms.len());
        let mut prev = a.checked_sub(1).and_then(|j| self.t_ms.get(j));
        let iv = self.interval_ms;
        let mut k = a;
        self.for_each(a, end, |t, v| {
            let start = prev.unwrap_or(t.saturating_sub(iv));
            prev = Some(t);
            let in_window = k < b;
            k += 1;
            if !v.is_finite() {
                if in_window {
                    current = f64::NAN;
                }
                return;
            }
            if in_window {
                let x = f64::from(v);
                current = x;
                let dt = f64::from(t - start.max(from_ms).min(t));
                sum += x * dt;
                time += dt;
                known += 1;
                peak = peak.max(x); // max ignores the NaN of "nothing yet"
            }
            if n == 0 || t <= from_ms || start >= to_ms {
                return;
            }
            let s_off = u64::from(start.clamp(from_ms, to_ms) - from_ms) * n;
            let t_off = u64::from(t.clamp(from_ms, to_ms) - from_ms) * n;
            while first + 1 < n && (first + 1) * span <= s_off {
                first += 1;
            }
            last = last.max(first);
            while last + 1 < n && t_off > (last + 1) * span {
                last += 1;
            }
            if first == last {
                let c = &mut out[first as usize];
                *c = c.max(v);
            } else {
                for c in &mut out[first as usize..=last as usize] {
                    *c = c.max(v);
                }
            }
        });
        let stats = if a == b {
            WindowStats::EMPTY
        } else {
            WindowStats {
                current,
                avg: if time > 0.0 { sum / time } else { f64::NAN },
                peak,
                known,
                points: b - a,
            }
        };
        (out, stats)
    }

    /// Current, time-weighted average and peak over `(from_ms, to_ms]`.
    pub fn stats(&self, from_ms: u32, to_ms: u32) -> WindowStats {
        let (a, b) = self.range(from_ms, to_ms);
        if a == b {
            return WindowStats::EMPTY;
        }
        let (mut sum, mut time, mut peak, mut known) = (0.0f64, 0.0f64, f64::NAN, 0usize);
        let mut current = f64::NAN;
        for (start, t, v) in self.points(a, b) {
            let v = f64::from(v);
            current = v;
            if !v.is_finite() {
                continue;
            }
            let dt = f64::from(t - start.max(from_ms).min(t));
            sum += v * dt;
            time += dt;
            known += 1;
            if peak.is_nan() || v > peak {
                peak = v;
            }
        }
        WindowStats {
            current,
            avg: if time > 0.0 { sum / time } else { f64::NAN },
            peak,
            known,
            points: b - a,
        }
    }
}

/// The latest figures of a GPU.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct GpuLatest {
    pub info: Option<GpuInfo>,
    pub reading: Option<GpuReading>,
    pub links: Option<LinkReading>,
    /// When `reading` was taken (store time, ms).
    pub t_ms: Option<u32>,
}

/// Everything known about one node.
#[derive(Debug, Clone)]
pub struct NodeSeries {
    pub hello: Option<Hello>,
    rates: RateTracker,
    /// Node uptime clock to Unix time, ns (set at the first record of an uptime clock).
    uptime_offset_ns: Option<i64>,
    t_ms: Ring<u32>,
    cols: Vec<Column>,
    index: HashMap<SeriesKey, usize>,
    /// The (rx, tx) columns of each NIC: found without building a key.
    net_cols: HashMap<Device, (usize, usize)>,
    /// Netdevs that belong to RDMA ports (their RDMA traffic shows on the port).
    pub rdma_netdevs: BTreeMap<String, Device>,
    pub gpus: BTreeMap<u32, GpuLatest>,
    /// Records taken in, samples marked missed, records dropped as out of order.
    pub records: u64,
    pub missed: u64,
    pub out_of_order: u64,
    /// The last sample's rates.
    pub last_sample: Option<Sample>,
    /// The TCP connections of the last [`TCP_KEEP`] records, with their store times: who
    /// this node sends to and receives from.
    pub tcp: std::collections::VecDeque<(u32, Vec<super::parse::TcpFlow>)>,
}

/// Records of TCP connections kept per node (a few windows of the imbalance rule).
pub const TCP_KEEP: usize = 16;

impl NodeSeries {
    fn new(cap: usize) -> NodeSeries {
        NodeSeries {
            hello: None,
            rates: RateTracker::new(1000),
            uptime_offset_ns: None,
            t_ms: Ring::new(cap),
            cols: Vec::new(),
            index: HashMap::new(),
            net_cols: HashMap::new(),
            rdma_netdevs: BTreeMap::new(),
            gpus: BTreeMap::new(),
            records: 0,
            missed: 0,
            out_of_order: 0,
            last_sample: None,
            tcp: std::collections::VecDeque::new(),
        }
    }

    /// The bytes this node sent to and received from each peer address over
    /// `from..=to` (store ms), by (local address, peer address): the newest record of the
    /// window less the oldest, per connection still open in both.
    pub fn tcp_bytes(&self, from: u32, to: u32) -> BTreeMap<(String, String), (u64, u64)> {
        let mut out: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
        let inside: Vec<&(u32, Vec<super::parse::TcpFlow>)> =
            self.tcp.iter().filter(|(t, _)| *t >= from && *t <= to).collect();
        let (Some(first), Some(last)) = (inside.first(), inside.last()) else {
            return out;
        };
        if first.0 == last.0 {
            return out;
        }
        // Connections are told apart by their endpoints and their counts only going up;
        // several to one peer add up.
        let sum = |flows: &[super::parse::TcpFlow]| {
            let mut m: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
            for f in flows {
                let e = m.entry((f.local.clone(), f.remote.clone())).or_default();
                e.0 += f.sent;
                e.1 += f.received;
            }
            m
        };
        let (a, b) = (sum(&first.1), sum(&last.1));
        for (k, (s1, r1)) in b {
            let (s0, r0) = a.get(&k).copied().unwrap_or((0, 0));
            out.insert(k, (s1.saturating_sub(s0), r1.saturating_sub(r0)));
        }
        out
    }

    pub fn interval_ms(&self) -> u32 {
        self.hello.as_ref().map(|h| h.interval_ms).unwrap_or(1000)
    }

    /// The node's sample times.
    pub fn times(&self) -> &Ring<u32> {
        &self.t_ms
    }

    pub fn series(&self, key: &SeriesKey) -> Option<Series<'_>> {
        let i = *self.index.get(key)?;
        Some(Series {
            t_ms: &self.t_ms,
            v: &self.cols[i].v,
            interval_ms: self.interval_ms(),
        })
    }

    /// The sum of `keys` point by point over `(from_ms, to_ms]` (and the point just
    /// before and after, which reach into it), as values aligned with [`Self::times`]:
    /// the known values added, NaN where none of them is known (a sample missed by the
    /// node is NaN for all its series). NaN outside the window. `None` when none of the
    /// keys has a series. View it with [`Self::series_of`].
    pub fn sum_in(&self, keys: &[SeriesKey], from_ms: u32, to_ms: u32) -> Option<Ring<f32>> {
        let cols: Vec<&Column> = keys
            .iter()
            .filter_map(|k| self.index.get(k).map(|&i| &self.cols[i]))
            .collect();
        if cols.is_empty() {
            return None;
        }
        let len = self.t_ms.len();
        let a = self.t_ms.partition_point(|t| t <= from_ms).saturating_sub(1);
        let b = (self.t_ms.partition_point(|t| t <= to_ms) + 1).min(len);
        let mut acc = vec![f32::NAN; len];
        for c in cols {
            for (o, v) in acc[a..b.max(a)].iter_mut().zip(c.v.iter_from(a)) {
                if v.is_finite() {
                    *o = if o.is_nan() { v } else { *o + v };
                }
            }
        }
        Some(Ring::from_oldest(acc, self.t_ms.capacity()))
    }

    /// A series of this node's times with `values` (from [`Self::sum_in`]).
    pub fn series_of<'a>(&'a self, values: &'a Ring<f32>) -> Series<'a> {
        Series {
            t_ms: &self.t_ms,
            v: values,
            interval_ms: self.interval_ms(),
        }
    }

    /// Every series key of the node, sorted.
    pub fn keys(&self) -> Vec<&SeriesKey> {
        let mut k: Vec<&SeriesKey> = self.cols.iter().map(|c| &c.key).collect();
        k.sort();
        k
    }

    /// The NICs and RDMA ports with series, sorted.
    pub fn devices(&self) -> Vec<&Device> {
        let mut d: Vec<&Device> = self
            .cols
            .iter()
            .filter_map(|c| match (&c.key.source, c.key.metric) {
                (Source::Net(d), Metric::Rx) => Some(d),
                _ => None,
            })
            .collect();
        d.sort();
        d
    }

    fn column(&mut self, key: SeriesKey) -> usize {
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let mut v = Ring::new(self.t_ms.capacity());
        // Back-fill to the node's time ring (the newest time is pushed already).
        for _ in 1..self.t_ms.len() {
            v.push(f32::NAN);
        }
        self.cols.push(Column {
            key: key.clone(),
            v,
            nan_run: 0,
        });
        self.index.insert(key, self.cols.len() - 1);
        self.cols.len() - 1
    }

    fn net_columns(&mut self, d: &Device) -> (usize, usize) {
        if let Some(&c) = self.net_cols.get(d) {
            return c;
        }
        let rx = self.column(SeriesKey::net(d.clone(), Metric::Rx));
        let tx = self.column(SeriesKey::net(d.clone(), Metric::Tx));
        self.net_cols.insert(d.clone(), (rx, tx));
        (rx, tx)
    }

    fn put(&mut self, key: SeriesKey, v: f64, filled: &mut Vec<bool>) {
        let i = self.column(key);
        self.put_at(i, v, filled);
    }

    fn put_at(&mut self, i: usize, v: f64, filled: &mut Vec<bool>) {
        if i >= filled.len() {
            filled.resize(i + 1, false);
        }
        if filled[i] {
            return; // the same series twice in one record: the first one stands
        }
        let c = &mut self.cols[i];
        c.v.push(v as f32);
        c.nan_run = if v.is_finite() { 0 } else { c.nan_run + 1 };
        filled[i] = true;
    }
}

/// The points per series for a fleet of `nodes` (see [`Telemetry::for_fleet`]).
pub fn capacity_for(nodes: usize) -> usize {
    (POINT_BUDGET / (nodes.max(1) * SERIES_PER_NODE)).clamp(MIN_CAPACITY, DEFAULT_CAPACITY)
}

/// The telemetry of a fleet: per node, the series and the latest figures.
#[derive(Debug, Clone)]
pub struct Telemetry {
    cap: usize,
    epoch_unix_ms: Option<i64>,
    nodes: Vec<NodeSeries>,
    scratch: Vec<bool>,
}

impl Default for Telemetry {
    fn default() -> Self {
        Telemetry::new(DEFAULT_CAPACITY)
    }
}

/// The points a fleet's series may hold together, 4 bytes each: 128 MiB. An hour at 1 Hz
/// (3600 points) for every series up to ~180 nodes of 10 NICs and 8 GPUs; a shorter
/// history for larger fleets (1024 nodes: 11 minutes), so the cockpit stays near 200 MB.
pub const POINT_BUDGET: usize = 32 * 1024 * 1024;
/// Series a node of 10 NICs and 8 GPUs has (rx/tx per NIC, 4 metrics per GPU, the
/// time), which [`Telemetry::for_fleet`] plans for.
pub const SERIES_PER_NODE: usize = 10 * 2 + 8 * 3 + 4;
/// The shortest history a fleet is given: 5 minutes at 1 Hz.
pub const MIN_CAPACITY: usize = 300;

impl Telemetry {
    /// A store for a fleet of `nodes`: an hour at 1 Hz while the fleet's series fit in
    /// [`POINT_BUDGET`], fewer points (never under [`MIN_CAPACITY`]) past it.
    pub fn for_fleet(nodes: usize) -> Telemetry {
        Telemetry::new(capacity_for(nodes))
    }

    /// Series of `capacity` points each (an hour at 1 s: 3600).
    pub fn new(capacity: usize) -> Telemetry {
        Telemetry {
            cap: capacity.max(2),
            epoch_unix_ms: None,
            nodes: Vec::new(),
            scratch: Vec::new(),
        }
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    fn node_mut(&mut self, node: usize) -> &mut NodeSeries {
        while self.nodes.len() <= node {
            self.nodes.push(NodeSeries::new(self.cap));
        }
        &mut self.nodes[node]
    }

    pub fn node(&self, node: usize) -> Option<&NodeSeries> {
        self.nodes.get(node)
    }

    /// Node indices with anything recorded.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// A (new) stream of `node` said hello: its next record starts counting afresh.
    pub fn hello(&mut self, node: usize, hello: Hello) {
        let n = self.node_mut(node);
        n.rates.restart(hello.interval_ms);
        for g in &hello.gpus {
            n.gpus.entry(g.index).or_default().info = Some(g.clone());
        }
        n.hello = Some(hello);
    }

    /// The store time of a Unix time (ms), if it is after the epoch.
    pub fn store_ms(&self, unix_ms: i64) -> Option<u32> {
        let e = self.epoch_unix_ms?;
        u32::try_from(unix_ms - e).ok()
    }

    /// The Unix time (ms) of a store time.
    pub fn unix_ms(&self, t_ms: u32) -> Option<i64> {
        Some(self.epoch_unix_ms? + i64::from(t_ms))
    }

    /// The newest sample time over all nodes.
    pub fn now_ms(&self) -> Option<u32> {
        self.nodes.iter().filter_map(|n| n.t_ms.last()).max()
    }

    /// Take in a record of `node`. `arrived_unix_ns` is used only to place a node whose
    /// clock counts from boot on the time axis, once. Returns the sample's rates, or
    /// `None` when the record is out of order (not after the node's last one).
    pub fn ingest(&mut self, node: usize, rec: &Record, arrived_unix_ns: i64) -> Option<&Sample> {
        let cap = self.cap;
        let n = self.node_mut(node);
        let unix_ns = match rec.clock {
            super::parse::ClockKind::Unix => rec.t_ns,
            super::parse::ClockKind::Uptime => {
                let off = *n.uptime_offset_ns.get_or_insert(arrived_unix_ns - rec.t_ns);
                rec.t_ns + off
            }
        };
        let sample = n.rates.update(rec);
        let epoch = *self
            .epoch_unix_ms
            .get_or_insert(unix_ns.div_euclid(1_000_000) - EPOCH_MARGIN_MS);
        let n = &mut self.nodes[node];
        let t = match u32::try_from(unix_ns.div_euclid(1_000_000) - epoch) {
            Ok(t) if n.t_ms.last().is_none_or(|l| t > l) => t,
            _ => {
                n.out_of_order += 1;
                return None;
            }
        };
        n.records += 1;
        if !rec.tcp.is_empty() {
            if n.tcp.len() >= TCP_KEEP {
                n.tcp.pop_front();
            }
            n.tcp.push_back((t, rec.tcp.clone()));
        }
        if sample.missed {
            n.missed += 1;
        }
        n.t_ms.push(t);
        self.scratch.clear();
        self.scratch.resize(n.cols.len(), false);
        let filled = &mut self.scratch;
        for d in &sample.devices {
            if let (Device::Rdma { .. }, Some(nd)) = (&d.device, &d.netdev) {
                n.rdma_netdevs.insert(nd.clone(), d.device.clone());
            }
            let (rx, tx) = n.net_columns(&d.device);
            n.put_at(rx, d.rx_bps, filled);
            n.put_at(tx, d.tx_bps, filled);
        }
        for g in &sample.gpus {
            let f = |x: Option<f32>| x.map(f64::from).unwrap_or(f64::NAN);
            n.put(
                SeriesKey::gpu(g.index, Metric::GpuUtil),
                f(g.utilization_pct),
                filled,
            );
            n.put(SeriesKey::gpu(g.index, Metric::GpuPower), f(g.power_w), filled);
            n.put(
                SeriesKey::gpu(g.index, Metric::GpuMemUsed),
                f(g.memory_used_mib),
                filled,
            );
            let latest = n.gpus.entry(g.index).or_default();
            latest.reading = Some(g.clone());
            latest.t_ms = Some(t);
        }
        for l in &sample.links {
            let f = |x: Option<f64>| x.unwrap_or(f64::NAN);
            n.put(SeriesKey::gpu(l.index, Metric::PcieRx), f(l.pcie_rx_bps), filled);
            n.put(SeriesKey::gpu(l.index, Metric::PcieTx), f(l.pcie_tx_bps), filled);
            if l.nvlink_rx_bps.is_some() || l.nvlink_tx_bps.is_some() {
                n.put(
                    SeriesKey::gpu(l.index, Metric::NvlinkRx),
                    f(l.nvlink_rx_bps),
                    filled,
                );
                n.put(
                    SeriesKey::gpu(l.index, Metric::NvlinkTx),
                    f(l.nvlink_tx_bps),
                    filled,
                );
            }
            n.gpus.entry(l.index).or_default().links = Some(l.clone());
        }
        // Columns this record said nothing of: a gap.
        for (i, done) in filled.iter().enumerate() {
            if !done {
                let c = &mut n.cols[i];
                c.v.push(f32::NAN);
                c.nan_run += 1;
            }
        }
        if n.cols.iter().any(|c| c.nan_run >= cap) {
            n.cols.retain(|c| c.nan_run < cap);
            n.index = n
                .cols
                .iter()
                .enumerate()
                .map(|(i, c)| (c.key.clone(), i))
                .collect();
            n.net_cols.clear();
        }
        n.last_sample = Some(sample);
        n.last_sample.as_ref()
    }

    /// The sum over `nodes` of one series each, bucket by bucket (each node's maximum in
    /// the bucket, as [`Series::downsample`]): the fleet aggregate of a chart. A bucket is
    /// NaN only where no node knows anything.
    pub fn aggregate(
        &self,
        keys: &[(usize, SeriesKey)],
        from_ms: u32,
        to_ms: u32,
        columns: usize,
    ) -> Vec<f32> {
        let mut out = vec![f32::NAN; columns];
        for (node, key) in keys {
            let Some(s) = self.node(*node).and_then(|n| n.series(key)) else {
                continue;
            };
            for (o, v) in out.iter_mut().zip(s.downsample(from_ms, to_ms, columns)) {
                if v.is_finite() {
                    *o = if o.is_nan() { v } else { *o + v };
                }
            }
        }
        out
    }

    /// Take in what the sampler printed, whole (tests, benchmarks, replays).
    pub fn ingest_text(&mut self, node: usize, text: &str) -> usize {
        let mut p = super::parse::RecordParser::new();
        let mut items = Vec::new();
        p.push(text.as_bytes(), &mut items);
        p.finish(&mut items);
        let mut n = 0;
        for it in items {
            match it {
                super::parse::Item::Hello(h) => self.hello(node, h),
                super::parse::Item::Record(r) => {
                    if self.ingest(node, &r, r.t_ns).is_some() {
                        n += 1;
                    }
                }
            }
        }
        n
    }
}

#[cfg(test)]
#[path = "series_tests.rs"]
mod tests;
