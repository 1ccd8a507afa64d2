//! The streaming parser of the sampler's output (format in [`super::sampler`]): bytes in,
//! as they arrive from the exec channel in any chunking, [`Item`]s out. Pure: no clock,
//! no I/O. Bounded: a line is cut at [`MAX_LINE`] bytes, a record at [`MAX_RECORD_LINES`]
//! lines, and text outside records (a login banner, a noisy `.bashrc`) is skipped.

/// The longest line kept; the rest of a longer line is dropped.
pub const MAX_LINE: usize = 64 * 1024;
/// A record with more lines than this is dropped (a runaway node, not a real one).
pub const MAX_RECORD_LINES: usize = 20_000;

/// The `nvidia-smi --query-gpu` fields of `@gpu` lines when no hello said otherwise.
pub const DEFAULT_GPU_FIELDS: &[&str] = &[
    "index",
    "utilization.gpu",
    "utilization.memory",
    "memory.used",
    "memory.total",
    "power.draw",
    "temperature.gpu",
    "temperature.memory",
    "clocks.sm",
];

/// How a record's time is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockKind {
    /// Unix time (`date +%s%N`, bash's `$EPOCHREALTIME`).
    Unix,
    /// Time since the node booted (/proc/uptime): differences are exact, the origin is
    /// mapped to Unix time once, from the arrival of the first record.
    Uptime,
}

/// What the sampler says once, before its records.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Hello {
    pub version: u32,
    /// The interval in force on the node, in ms.
    pub interval_ms: u32,
    pub clock: ClockKind,
    /// The node's host name, as the node knows it.
    pub host: Option<String>,
    /// The interface of the node's default route.
    pub default_route: Option<String>,
    /// The fields of `@gpu` lines, in order.
    pub gpu_fields: Vec<String>,
    pub gpus: Vec<GpuInfo>,
    /// The node's IPv4 addresses by interface (`@addr NIC IP`), to tell which node a TCP
    /// peer is.
    pub addrs: Vec<(String, String)>,
}

/// The bytes one TCP connection has moved (`@tcp` lines: `LOCAL REMOTE ACKED RECEIVED`,
/// from `ss -ti`), counted since it opened.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TcpFlow {
    pub local: String,
    pub remote: String,
    /// Bytes sent and acknowledged.
    pub sent: u64,
    pub received: u64,
}

/// A GPU's fixed facts, from `@gpuinfo`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GpuInfo {
    pub index: u32,
    pub name: String,
    pub uuid: String,
    pub memory_total_mib: Option<f64>,
    pub power_limit_w: Option<f64>,
}

/// One /proc/net/dev line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NicCounters {
    pub name: String,
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub rx_errs: u64,
    pub rx_drop: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_errs: u64,
    pub tx_drop: u64,
}

/// One RDMA port's counters (`port_*_data` count 4-byte words).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaCounters {
    pub device: String,
    pub port: u32,
    pub xmit_words: Option<u64>,
    pub rcv_words: Option<u64>,
    pub xmit_packets: Option<u64>,
    pub rcv_packets: Option<u64>,
    /// The netdev of the port's PCI function, if any.
    pub netdev: Option<String>,
}

/// One GPU's figures from an `nvidia-smi --query-gpu` line. `None`: not reported
/// (`[N/A]`, `[Not Supported]`, a field this driver lacks).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct GpuReading {
    pub index: u32,
    pub utilization_pct: Option<f32>,
    pub memory_utilization_pct: Option<f32>,
    pub memory_used_mib: Option<f32>,
    pub memory_total_mib: Option<f32>,
    pub power_w: Option<f32>,
    pub temperature_c: Option<f32>,
    pub memory_temperature_c: Option<f32>,
    pub sm_clock_mhz: Option<f32>,
}

/// One GPU's link throughput from `nvidia-smi dmon -s t [--gpm-metrics 60,61]`, in bits
/// per second: PCIe (dmon's MB/s, taken as 10^6 bytes) and NVLink (GPM MiB/s), where the
/// driver reports them.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct LinkReading {
    pub index: u32,
    pub pcie_rx_bps: Option<f64>,
    pub pcie_tx_bps: Option<f64>,
    pub nvlink_rx_bps: Option<f64>,
    pub nvlink_tx_bps: Option<f64>,
}

/// One sample of a node.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub seq: u64,
    /// The node's clock at the sample, in ns (Unix time, or since boot: see `clock`).
    pub t_ns: i64,
    pub clock: ClockKind,
    pub nics: Vec<NicCounters>,
    pub rdma: Vec<RdmaCounters>,
    /// The number of the nvidia-smi batch in `gpus` (the same number again: nothing new).
    pub gpu_batch: Option<u64>,
    pub gpus: Vec<GpuReading>,
    /// The number of the dmon batch in `links`.
    pub link_batch: Option<u64>,
    pub links: Vec<LinkReading>,
    /// The node's established TCP connections (when `ss` is there).
    pub tcp: Vec<TcpFlow>,
    /// Content lines that could not be read (kept count of, otherwise ignored).
    pub bad_lines: u32,
}

/// What the parser produces.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Hello(Hello),
    Record(Record),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Net,
    Ib,
    Gpu,
    Dmon,
    Tcp,
    /// A section that is not ours (an `@ns` without a usable name): its lines are bad.
    Skip,
}

/// Streaming parser: feed bytes with [`RecordParser::push`].
#[derive(Debug, Default)]
pub struct RecordParser {
    line: Vec<u8>,
    overlong: bool,
    gpu_fields: Option<Vec<String>>,
    clock: Option<ClockKind>,
    hello: Option<Hello>,
    hello_pending: bool,
    current: Option<(Record, Section, usize)>,
    dmon_columns: Vec<String>,
    dmon_units: Vec<String>,
    /// The network namespace of the open `@ns` section: its NICs are `NAME/NIC`.
    ns: Option<String>,
    dropped: u64,
    ignored_lines: u64,
}

impl RecordParser {
    pub fn new() -> RecordParser {
        RecordParser::default()
    }

    /// Feed a chunk of output; complete items are appended to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<Item>) {
        let mut rest = bytes;
        while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
            self.take_bytes(&rest[..nl]);
            let line = std::mem::take(&mut self.line);
            self.overlong = false;
            let text = String::from_utf8_lossy(line.strip_suffix(b"\r").unwrap_or(&line));
            self.push_line(&text, out);
            self.line = line;
            self.line.clear();
            rest = &rest[nl + 1..];
        }
        self.take_bytes(rest);
    }

    fn take_bytes(&mut self, b: &[u8]) {
        if self.overlong {
            return;
        }
        let room = MAX_LINE - self.line.len();
        if b.len() > room {
            self.line.extend_from_slice(&b[..room]);
            self.overlong = true;
        } else {
            self.line.extend_from_slice(b);
        }
    }

    /// The end of the stream: a record still open is incomplete and dropped.
    pub fn finish(&mut self, out: &mut Vec<Item>) {
        self.flush_hello(out);
        if self.current.take().is_some() {
            self.dropped += 1;
        }
        self.line.clear();
    }

    /// Records dropped so far (no end, a bad end, too long).
    pub fn dropped_records(&self) -> u64 {
        self.dropped
    }

    /// Lines outside records that were not the sampler's.
    pub fn ignored_lines(&self) -> u64 {
        self.ignored_lines
    }

    /// The hello of this stream, once seen.
    pub fn hello(&self) -> Option<&Hello> {
        self.hello.as_ref()
    }

    /// Feed one line (without its newline).
    pub fn push_line(&mut self, line: &str, out: &mut Vec<Item>) {
        if let Some(frame) = line.strip_prefix('@') {
            self.frame(frame, out);
            return;
        }
        let Some((rec, section, lines)) = self.current.as_mut() else {
            if !line.trim().is_empty() {
                self.ignored_lines += 1;
            }
            return;
        };
        *lines += 1;
        if *lines > MAX_RECORD_LINES {
            self.current = None;
            self.dropped += 1;
            return;
        }
        let ok = match section {
            Section::Net => parse_net_dev_line(line)
                .map(|n| {
                    let n = match (n, &self.ns) {
                        // Another namespace's loopback is nobody's traffic.
                        (Some(n), Some(_)) if n.name == "lo" => None,
                        (Some(mut n), Some(ns)) => {
                            n.name = format!("{ns}/{}", n.name);
                            Some(n)
                        }
                        (n, _) => n,
                    };
                    n.map(|n| rec.nics.push(n))
                })
                .is_some(),
            Section::Ib => parse_ib_line(line).map(|r| rec.rdma.push(r)).is_some(),
            Section::Gpu => {
                let fields = self.gpu_fields.as_deref();
                match fields {
                    Some(f) => parse_gpu_line(line, f),
                    None => parse_gpu_line(line, &default_fields()),
                }
                .map(|g| rec.gpus.push(g))
                .is_some()
            }
            Section::Tcp => parse_tcp_line(line).map(|t| rec.tcp.push(t)).is_some(),
            Section::Skip => false,
            Section::Dmon => {
                if let Some(h) = line.trim_start().strip_prefix('#') {
                    let words = h.split_whitespace().map(str::to_string).collect();
                    if self.dmon_columns.is_empty() {
                        self.dmon_columns = words;
                    } else {
                        self.dmon_units = words;
                    }
                    true
                } else {
                    parse_dmon_line(line, &self.dmon_columns, &self.dmon_units)
                        .map(|p| rec.links.push(p))
                        .is_some()
                }
            }
        };
        if !ok && !line.trim().is_empty() {
            rec.bad_lines += 1;
        }
    }

    /// The hello is complete once its `@gpuinfo` lines are over.
    fn flush_hello(&mut self, out: &mut Vec<Item>) {
        if std::mem::take(&mut self.hello_pending) {
            if let Some(h) = &self.hello {
                out.push(Item::Hello(h.clone()));
            }
        }
    }

    fn frame(&mut self, frame: &str, out: &mut Vec<Item>) {
        let mut words = frame.split_whitespace();
        let tag = words.next().unwrap_or("");
        if tag != "gpuinfo" && tag != "addr" && tag != "fd" {
            self.flush_hello(out);
        }
        self.ns = None;
        match tag {
            "fd" => {
                if self.current.take().is_some() {
                    self.dropped += 1;
                }
                self.flush_hello(out);
                let hello = parse_hello(frame);
                self.gpu_fields = Some(hello.gpu_fields.clone()).filter(|f| !f.is_empty());
                self.clock = Some(hello.clock);
                self.hello = Some(hello);
                self.hello_pending = true;
            }
            "gpuinfo" => {
                let rest = frame["gpuinfo".len()..].trim();
                match (parse_gpu_info(rest), self.hello.as_mut()) {
                    (Some(info), Some(h)) if self.hello_pending => {
                        h.gpus.retain(|g| g.index != info.index);
                        h.gpus.push(info);
                    }
                    _ => self.ignored_lines += 1,
                }
            }
            "addr" => match (words.next(), words.next(), self.hello.as_mut()) {
                (Some(nic), Some(ip), Some(h)) if self.hello_pending && h.addrs.len() < 256 => {
                    h.addrs.push((nic.to_string(), ip.to_string()));
                }
                _ => self.ignored_lines += 1,
            },
            "s" => {
                if self.current.take().is_some() {
                    self.dropped += 1;
                }
                let seq = words.next().and_then(|w| w.parse::<u64>().ok());
                let time = words.next().and_then(|w| parse_time(w, self.clock));
                match (seq, time) {
                    (Some(seq), Some((t_ns, clock))) => {
                        self.current = Some((
                            Record {
                                seq,
                                t_ns,
                                clock,
                                nics: Vec::new(),
                                rdma: Vec::new(),
                                gpu_batch: None,
                                gpus: Vec::new(),
                                link_batch: None,
                                links: Vec::new(),
                                tcp: Vec::new(),
                                bad_lines: 0,
                            },
                            Section::Net,
                            0,
                        ))
                    }
                    _ => self.dropped += 1,
                }
            }
            "ns" => {
                // NICs of another network namespace (a pod's: see sampler.rs), named
                // `NAME/NIC`; a name with a `/` or nothing is not ours.
                let Some((_, section, _)) = self.current.as_mut() else {
                    self.ignored_lines += 1;
                    return;
                };
                match words.next().filter(|n| !n.contains('/') && n.len() <= 253) {
                    Some(name) => {
                        *section = Section::Net;
                        self.ns = Some(name.to_string());
                    }
                    None => *section = Section::Skip,
                }
            }
            "ib" | "gpu" | "dmon" | "tcp" => {
                let Some((rec, section, _)) = self.current.as_mut() else {
                    self.ignored_lines += 1;
                    return;
                };
                let batch = words.next().and_then(|w| w.parse::<u64>().ok());
                *section = match tag {
                    "ib" => Section::Ib,
                    "tcp" => Section::Tcp,
                    "gpu" => {
                        rec.gpu_batch = batch;
                        Section::Gpu
                    }
                    _ => {
                        rec.link_batch = batch;
                        self.dmon_columns.clear();
                        self.dmon_units.clear();
                        Section::Dmon
                    }
                };
            }
            "e" => {
                let seq = words.next().and_then(|w| w.parse::<u64>().ok());
                match self.current.take() {
                    Some((rec, _, _)) if Some(rec.seq) == seq => out.push(Item::Record(rec)),
                    Some(_) => self.dropped += 1,
                    None => self.ignored_lines += 1,
                }
            }
            _ => {
                // Not a frame of ours: content of the open section, or noise.
                if let Some((rec, _, _)) = self.current.as_mut() {
                    rec.bad_lines += 1;
                } else {
                    self.ignored_lines += 1;
                }
            }
        }
    }
}

fn default_fields() -> Vec<String> {
    DEFAULT_GPU_FIELDS.iter().map(|s| s.to_string()).collect()
}

/// `fd 1 ms=1000 clock=ns host=h route=eth0 gpus=0 gpufields=-` (the `@` stripped).
fn parse_hello(frame: &str) -> Hello {
    let mut words = frame.split_whitespace().skip(1);
    let version = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
    let mut h = Hello {
        version,
        interval_ms: 1000,
        clock: ClockKind::Unix,
        host: None,
        default_route: None,
        gpu_fields: Vec::new(),
        gpus: Vec::new(),
        addrs: Vec::new(),
    };
    let opt = |v: &str| (v != "-" && !v.is_empty()).then(|| v.to_string());
    for w in words {
        let Some((k, v)) = w.split_once('=') else { continue };
        match k {
            "ms" => h.interval_ms = v.parse().unwrap_or(1000),
            "clock" => {
                h.clock = if v == "uptime" {
                    ClockKind::Uptime
                } else {
                    ClockKind::Unix
                }
            }
            "host" => h.host = opt(v),
            "route" => h.default_route = opt(v),
            "gpufields" if v != "-" => h.gpu_fields = v.split(',').map(str::to_string).collect(),
            _ => {}
        }
    }
    h
}

/// `0, NVIDIA H200, GPU-..., 143771, 700.00`
fn parse_gpu_info(line: &str) -> Option<GpuInfo> {
    let f: Vec<&str> = line.split(',').map(str::trim).collect();
    if f.len() < 3 {
        return None;
    }
    Some(GpuInfo {
        index: f[0].parse().ok()?,
        name: f[1].to_string(),
        uuid: f[2].to_string(),
        memory_total_mib: f.get(3).and_then(|v| number(v)),
        power_limit_w: f.get(4).and_then(|v| number(v)),
    })
}

/// A record time: `1795314398974710372` (ns), `1795314398.974710` or with a comma (Unix
/// seconds, bash's `$EPOCHREALTIME` in a comma locale), `2475.87` (uptime seconds). The
/// clock of the hello wins; without one, a value under 10^9 s is taken as uptime.
pub fn parse_time(w: &str, clock: Option<ClockKind>) -> Option<(i64, ClockKind)> {
    let (int, frac) = match w.find(['.', ',']) {
        Some(i) => (&w[..i], Some(&w[i + 1..])),
        None => (w, None),
    };
    if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let int: i64 = int.parse().ok()?;
    let ns = match frac {
        None => {
            // Nanoseconds: only `date +%s%N` writes a bare integer.
            int
        }
        Some(f) => {
            if f.is_empty() || f.len() > 9 || !f.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let scale = 10i64.pow(9 - f.len() as u32);
            int.checked_mul(1_000_000_000)?
                .checked_add(f.parse::<i64>().ok()? * scale)?
        }
    };
    let clock = clock.unwrap_or(if frac.is_some() && int < 1_000_000_000 {
        ClockKind::Uptime
    } else {
        ClockKind::Unix
    });
    Some((ns, clock))
}

/// One line of /proc/net/dev: `Some(None)` for its header lines, `None` for a line that
/// is not /proc/net/dev.
pub fn parse_net_dev_line(line: &str) -> Option<Option<NicCounters>> {
    if line.contains('|') {
        return Some(None);
    }
    let (name, rest) = line.split_once(':')?;
    let name = name.trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return None;
    }
    let mut v = [0u64; 16];
    let mut n = 0;
    for w in rest.split_whitespace() {
        if n == 16 {
            return None;
        }
        v[n] = w.parse().ok()?;
        n += 1;
    }
    if n != 16 {
        return None;
    }
    Some(Some(NicCounters {
        name: name.to_string(),
        rx_bytes: v[0],
        rx_packets: v[1],
        rx_errs: v[2],
        rx_drop: v[3],
        tx_bytes: v[8],
        tx_packets: v[9],
        tx_errs: v[10],
        tx_drop: v[11],
    }))
}

/// All NICs of a whole /proc/net/dev text.
pub fn parse_net_dev(text: &str) -> Vec<NicCounters> {
    text.lines()
        .filter_map(|l| parse_net_dev_line(l).flatten())
        .collect()
}

/// An address as `ss` prints it, without brackets or the IPv4-mapped prefix.
fn plain_ip(a: &str) -> &str {
    let a = a.trim_start_matches('[').trim_end_matches(']');
    a.strip_prefix("::ffff:").unwrap_or(a)
}

/// `10.88.1.1 10.88.1.2 123456 789` (ports already cut off by the sampler).
pub fn parse_tcp_line(line: &str) -> Option<TcpFlow> {
    let mut w = line.split_whitespace();
    let (local, remote) = (w.next()?, w.next()?);
    let sent = w.next()?.parse().ok()?;
    let received = w.next()?.parse().ok()?;
    Some(TcpFlow {
        local: plain_ip(local).to_string(),
        remote: plain_ip(remote).to_string(),
        sent,
        received,
    })
}

/// `mlx5_0 1 XMIT_DATA RCV_DATA XMIT_PKTS RCV_PKTS NETDEV`, `-` for a missing value.
pub fn parse_ib_line(line: &str) -> Option<RdmaCounters> {
    let w: Vec<&str> = line.split_whitespace().collect();
    if w.len() < 4 {
        return None;
    }
    let counter = |i: usize| -> Result<Option<u64>, ()> {
        match w.get(i).copied() {
            None | Some("-") => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| ()),
        }
    };
    Some(RdmaCounters {
        device: w[0].to_string(),
        port: w[1].parse().ok()?,
        xmit_words: counter(2).ok()?,
        rcv_words: counter(3).ok()?,
        xmit_packets: counter(4).ok()?,
        rcv_packets: counter(5).ok()?,
        netdev: w.get(6).filter(|n| **n != "-").map(|n| n.to_string()),
    })
}

/// A value of nvidia-smi's csv (`nounits`): a number, or none for `[N/A]`,
/// `[Not Supported]`, `N/A` and the like.
fn number(v: &str) -> Option<f64> {
    v.trim().parse::<f64>().ok().filter(|x| x.is_finite())
}

/// One `nvidia-smi --query-gpu=FIELDS --format=csv,noheader,nounits` line.
pub fn parse_gpu_line<S: AsRef<str>>(line: &str, fields: &[S]) -> Option<GpuReading> {
    let values: Vec<&str> = line.split(',').map(str::trim).collect();
    if values.len() != fields.len() {
        return None;
    }
    let mut g = GpuReading::default();
    let mut have_index = false;
    for (f, v) in fields.iter().zip(values) {
        let x = number(v).map(|x| x as f32);
        match f.as_ref() {
            "index" => {
                g.index = v.parse().ok()?;
                have_index = true;
            }
            "utilization.gpu" => g.utilization_pct = x,
            "utilization.memory" => g.memory_utilization_pct = x,
            "memory.used" => g.memory_used_mib = x,
            "memory.total" => g.memory_total_mib = x,
            "power.draw" | "power.draw.instant" | "power.draw.average" => g.power_w = x,
            "temperature.gpu" => g.temperature_c = x,
            "temperature.memory" => g.memory_temperature_c = x,
            "clocks.sm" | "clocks.current.sm" => g.sm_clock_mhz = x,
            _ => {}
        }
    }
    have_index.then_some(g)
}

/// Bytes per second in one of dmon's units (`MB/s`, `GPM:MiB/s`, ...).
fn unit_bytes(unit: Option<&String>) -> f64 {
    match unit.map(|u| u.rsplit(':').next().unwrap_or(u)) {
        Some("MiB/s") => 1024.0 * 1024.0,
        Some("KB/s") => 1e3,
        Some("KiB/s") => 1024.0,
        Some("GB/s") => 1e9,
        _ => 1e6,
    }
}

/// One data line of `nvidia-smi dmon -s t [--gpm-metrics 60,61]`, under its two header
/// lines (`# gpu rxpci txpci nvlrx nvltx`, `# Idx MB/s MB/s GPM:MiB/s GPM:MiB/s`).
pub fn parse_dmon_line(line: &str, columns: &[String], units: &[String]) -> Option<LinkReading> {
    let values: Vec<&str> = line.split_whitespace().collect();
    if columns.is_empty() || values.len() != columns.len() {
        return None;
    }
    let mut p = LinkReading::default();
    let mut have_index = false;
    for (i, (c, v)) in columns.iter().zip(values).enumerate() {
        let bps = || number(v).map(|x| x * unit_bytes(units.get(i)) * 8.0);
        match c.as_str() {
            "gpu" | "Idx" => {
                p.index = v.parse().ok()?;
                have_index = true;
            }
            "rxpci" => p.pcie_rx_bps = bps(),
            "txpci" => p.pcie_tx_bps = bps(),
            "nvlrx" => p.nvlink_rx_bps = bps(),
            "nvltx" => p.nvlink_tx_bps = bps(),
            _ => {}
        }
    }
    have_index.then_some(p)
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
