//! A streaming parser for nccl-tests output.
//!
//! Feed it byte chunks ([`Parser::push_bytes`], partial lines are kept until their newline)
//! or whole lines ([`Parser::push_line`]); each call returns the [`Event`]s those lines
//! completed, so a view can draw a row the moment nccl-tests prints it. [`Parser::report`]
//! builds the [`Report`] of what has been read so far, at any point.
//!
//! Forms it reads (NVIDIA/nccl-tests `src/common.cu` and `src/util.cu` through history):
//! ```text
//! # nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809      (since Oct 2025)
//! # Collective test starting: all_reduce_perf                            (since Jun 2025)
//! # nThread 1 nGpus 2 minBytes 8 maxBytes 8589934592 step: 2(factor) ... (no `#` before 2019)
//! #  Rank  0 Group  0 Pid   1374 on         vm device  0 [0000:00:06] NVIDIA H200
//! #       size         count      type   redop    root     time   algbw   busbw  #wrong ...
//!            8             2     float     sum      -1    13.34    0.00    0.00       0 ...
//! # Out of bounds values : 0 OK
//! # Avg bus bandwidth    : 112.161
//! ```
//! Older versions name the error column `error` (a max error such as `2e-07`, before 2.13)
//! or `res` (2017), have no `root` column before 2.13 (`bytes N type op` in 2017, whose
//! `time` was in ms: taken as printed), may add `copybw` (2024-25), per-iteration columns
//! (`i_min` ..) or a trailing timestamp (`-S 1`); `#wrong` reads `N/A` where nccl-tests
//! does not check. The column layout comes from the header when there is one, else it is
//! inferred from the row. Launcher prefixes and interleaved NCCL debug lines are handled
//! in `line.rs`; debug lines also feed the [`TransportDetector`].

use super::line::{
    is_digits, is_name_token, is_value_token, split_debug, split_glued, strip_launcher_prefixes, ValueKind,
};
use super::transport::{Transport, TransportDetector};
use serde::{Serialize, Serializer};

/// A partial line longer than this is taken as a line: memory stays bounded on input
/// without newlines.
const MAX_LINE_BYTES: usize = 64 * 1024;

/// One half of a row: the out-of-place or the in-place measurement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measurement {
    /// Microseconds per operation, as printed.
    pub time_us: f64,
    /// Algorithm bandwidth in GB/s, as printed.
    pub algbw: f64,
    /// Bus bandwidth in GB/s, as printed.
    pub busbw: f64,
    /// Elements found wrong (`#wrong`), or the max error of old versions; `None` for `N/A`.
    #[serde(serialize_with = "serialize_wrong")]
    pub wrong: Option<f64>,
}

/// One result row, for one message size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Bytes.
    pub size: u64,
    /// Elements.
    pub count: u64,
    /// Data type, e.g. `float`.
    #[serde(rename = "type")]
    pub dtype: String,
    /// Reduction, e.g. `sum`, or `none`.
    pub redop: String,
    /// Root rank; -1 for rootless collectives; `None` when the format has no root column.
    pub root: Option<i64>,
    /// `None` when only in-place was measured (nccl-tests' trace replay).
    pub out_of_place: Option<Measurement>,
    pub in_place: Option<Measurement>,
}

/// One line of the `Using devices` list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Device {
    pub rank: u32,
    pub host: Option<String>,
    /// CUDA device index on its host.
    pub device: Option<u32>,
    /// PCI address as printed, e.g. `0000:00:06` (or `0x07` in old versions).
    pub pci: Option<String>,
    /// GPU name, e.g. `NVIDIA H200`.
    pub name: Option<String>,
}

/// The `Out of bounds values` footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OutOfBounds {
    pub count: u64,
    /// `OK` printed (not `FAILED`).
    pub ok: bool,
}

/// What is known about one nccl-tests run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Report {
    /// e.g. `all_reduce`, from the banner or the binary's name in a command line.
    pub collective: Option<String>,
    /// e.g. `2.28.9+cuda13.0` from a `NCCL version` line, else decoded from the banner's
    /// `nccl-library=22809` (`2.28.9`).
    pub nccl_version: Option<String>,
    /// nccl-tests' own version, e.g. `2.19.6`.
    pub tests_version: Option<String>,
    /// From the `nThread .. nGpus ..` line.
    pub threads: Option<u32>,
    pub gpus_per_thread: Option<u32>,
    pub devices: Vec<Device>,
    pub rows: Vec<Row>,
    pub out_of_bounds: Option<OutOfBounds>,
    /// The `Avg bus bandwidth` footer, GB/s.
    pub avg_busbw: Option<f64>,
    /// From NCCL debug lines; `None` when there were none.
    pub transport: Option<Transport>,
    /// The column header was seen.
    pub header_seen: bool,
    /// `Collective test concluded` was seen.
    pub concluded: bool,
    /// nccl-tests' banner (`nThread ..`, `nccl-tests version ..`) was seen.
    pub banner_seen: bool,
    /// Where [`Report::collective`] came from: `banner`, `command line`, `NCCL's
    /// collective lines`, or `the table` (inferred: [`infer_collective`]).
    pub collective_from: Option<&'static str>,
    /// Why the table names no one collective, when inferring it left a choice
    /// (`all_gather or alltoall`).
    pub collective_choices: Option<String>,
    /// The hosts the log names: the rank list's and NCCL's debug lines' (sorted).
    pub hosts: Vec<String>,
    /// What the log says went wrong ([`super::cause::CauseFinder::error`]): NCCL's first
    /// WARN that matters, nccl-tests' failure line, PyTorch's NCCL error or timeout.
    pub cause: Option<String>,
    /// PyTorch's lines were seen (ProcessGroupNCCL, torch.distributed, torchrun).
    pub torch: bool,
}

impl Report {
    /// Ranks: the distinct ranks of the device list or the communicator size NCCL
    /// printed in its debug lines, the larger (a log cut inside the rank list, or one
    /// rank's list of several, lists fewer than NCCL counted).
    pub fn ranks(&self) -> Option<u32> {
        let listed = (!self.devices.is_empty()).then(|| {
            let mut ranks: Vec<u32> = self.devices.iter().map(|d| d.rank).collect();
            ranks.sort_unstable();
            ranks.dedup();
            u32::try_from(ranks.len()).unwrap_or(u32::MAX)
        });
        let nccl = self.transport.as_ref().and_then(|t| t.nranks);
        listed.max(nccl)
    }

    /// Whether the run finished: nccl-tests printed its footer (`Avg bus bandwidth`) or
    /// `Collective test concluded`.
    pub fn finished(&self) -> bool {
        self.avg_busbw.is_some() || self.concluded
    }

    /// What kind of log this is, for a person: `nccl-tests`, `PyTorch`, `NCCL`.
    pub fn kind(&self) -> &'static str {
        if self.is_nccl_tests() {
            "nccl-tests"
        } else if self.torch {
            "PyTorch"
        } else {
            "NCCL"
        }
    }

    /// [`Report::kind`] with its article: `an nccl-tests`, `a PyTorch`, `an NCCL`.
    pub fn kind_with_article(&self) -> String {
        match self.kind() {
            "PyTorch" => "a PyTorch".into(),
            k => format!("an {k}"),
        }
    }

    /// Whether the log says anything about NCCL: nccl-tests' output, NCCL's debug lines,
    /// or PyTorch's NCCL errors.
    pub fn says_anything(&self) -> bool {
        self.is_nccl_tests()
            || self.transport.is_some()
            || self.cause.is_some()
            || self.nccl_version.is_some()
            || self.collective.is_some()
    }

    /// How the run ended, in a sentence, for a run that did not finish: `None` for a
    /// finished one.
    pub fn unfinished(&self) -> Option<String> {
        if self.finished() {
            return None;
        }
        let rows = crate::words::plural(self.rows.len(), "row");
        let what = if !self.is_nccl_tests() {
            format!("not an nccl-tests table: {} log", self.kind_with_article())
        } else if self.rows.is_empty() {
            "the run did not finish: it stopped before its first row".to_string()
        } else {
            let last = self
                .rows
                .last()
                .map(|r| super::human_size(r.size))
                .unwrap_or_default();
            format!("the run did not finish: it stopped after {rows} (the last at {last})")
        };
        Some(match &self.cause {
            Some(c) => format!("{what}; cause: {c}"),
            None if self.is_nccl_tests() => {
                format!("{what}; the log names no cause (cut off, killed, or hung)")
            }
            None => what,
        })
    }

    /// The row with the highest out-of-place busbw.
    pub fn peak_row(&self) -> Option<&Row> {
        self.rows
            .iter()
            .filter(|r| r.out_of_place.as_ref().is_some_and(|m| m.busbw.is_finite()))
            .max_by(|a, b| oop_busbw(a).total_cmp(&oop_busbw(b)))
    }

    /// The highest out-of-place busbw, GB/s.
    pub fn peak_busbw(&self) -> Option<f64> {
        self.peak_row().map(oop_busbw)
    }

    /// The transport summary, e.g. `NVLink P2P`.
    pub fn transport_summary(&self) -> Option<String> {
        self.transport.as_ref().and_then(Transport::summary)
    }

    /// Whether anything showed this is nccl-tests output: a row, a column header, its
    /// banner or its rank list.
    pub fn is_nccl_tests(&self) -> bool {
        !self.rows.is_empty() || self.header_seen || self.banner_seen || !self.devices.is_empty()
    }

    /// Whether nothing at all was read into this report.
    fn is_blank(&self) -> bool {
        self.rows.is_empty()
            && !self.header_seen
            && self.devices.is_empty()
            && self.collective.is_none()
            && self.tests_version.is_none()
            && self.threads.is_none()
    }

    /// The `nccl parse --json` document of DESIGN.md.
    pub fn document(&self) -> Document<'_> {
        Document {
            collective: self.collective.as_deref(),
            nccl_version: self.nccl_version.as_deref(),
            ranks: self.ranks(),
            rows: &self.rows,
            avg_busbw: self.avg_busbw,
            peak_busbw: self.peak_busbw(),
            transport: self.transport_summary(),
            kind: self.kind(),
            tests_version: self.tests_version.as_deref(),
            collective_from: self.collective_from,
            collective_choices: self.collective_choices.as_deref(),
            hosts: self.hosts.len(),
            finished: self.finished(),
            cause: self.cause.as_deref(),
            net: self.transport.as_ref().map(|t| NetFacts {
                plugin: t.plugin.as_deref(),
                plugin_lib: t.plugin_lib.as_deref(),
                no_plugin_found: t.no_plugin_found.as_deref(),
                net_error: t.net_error.as_deref(),
                selected: t.selected_net.as_ref().map(ToString::to_string),
                gdr: t.gdr,
            }),
        }
    }
}

fn oop_busbw(r: &Row) -> f64 {
    r.out_of_place.as_ref().map_or(f64::NAN, |m| m.busbw)
}

/// The `flightdeck nccl parse --json` document (DESIGN.md); keys in this order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Document<'a> {
    pub collective: Option<&'a str>,
    pub nccl_version: Option<&'a str>,
    pub ranks: Option<u32>,
    pub rows: &'a [Row],
    pub avg_busbw: Option<f64>,
    pub peak_busbw: Option<f64>,
    pub transport: Option<String>,
    /// `nccl-tests`, `PyTorch` or `NCCL` ([`Report::kind`]).
    pub kind: &'static str,
    pub tests_version: Option<&'a str>,
    pub collective_from: Option<&'static str>,
    /// The collectives an unnamed table fits, when it fits more than one.
    pub collective_choices: Option<&'a str>,
    /// Distinct hosts named.
    pub hosts: usize,
    /// The footer or `Collective test concluded` was printed.
    pub finished: bool,
    pub cause: Option<&'a str>,
    /// What NCCL said of its net plugin and networks; `null` without debug lines.
    pub net: Option<NetFacts<'a>>,
}

/// The net plugin facts of [`Document::net`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetFacts<'a> {
    /// The plugin NCCL loaded, by the name it gives itself (`gIB`, `AWS Libfabric`).
    pub plugin: Option<&'a str>,
    pub plugin_lib: Option<&'a str>,
    /// The libraries NCCL said it could not find or load.
    pub no_plugin_found: Option<&'a str>,
    /// NCCL's warning that it had no network.
    pub net_error: Option<&'a str>,
    /// `Using network X`.
    pub selected: Option<String>,
    /// A network channel used GPUDirect RDMA.
    pub gdr: bool,
}

/// `#wrong` is a count: print whole numbers as integers (`0`, not `0.0`).
fn serialize_wrong<S: Serializer>(wrong: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match *wrong {
        None => s.serialize_none(),
        Some(v) if v.fract() == 0.0 && v.abs() < 9.0e15 => s.serialize_some(&(v as i64)),
        Some(v) => s.serialize_some(&v),
    }
}

/// What a line completed.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A second test began in the same stream; the previous one is in [`Parser::reports`].
    TestStarted,
    /// nccl-tests' version from the banner.
    TestsVersion(String),
    NcclVersion(String),
    Collective(String),
    /// `nThread N nGpus M`.
    Config {
        threads: u32,
        gpus: u32,
    },
    Device(Device),
    /// The column header: rows follow.
    Header,
    Row(Row),
    OutOfBounds(OutOfBounds),
    AvgBusBw(f64),
    /// `Collective test concluded`.
    Concluded,
    /// The transport summary changed (NCCL debug lines).
    Transport(String),
}

/// Column of one half (out-of-place or in-place) of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Col {
    Time,
    AlgBw,
    BusBw,
    Wrong,
    Other,
}

/// Columns of a row's halves, from the header. Which key columns a row has (`redop`,
/// `root`) is read from the row itself: nccl-tests printed them per collective and
/// version (a blank `redop` under a `redop` header for alltoall before 2.13.4, `root`
/// without `redop` for broadcast before 2.13: tests/fixtures/nccl/layouts/README.md).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Layout {
    group: Vec<Col>,
}

impl Layout {
    /// Read a column header line (without its `#`); `None` for any other line.
    fn from_header(body: &str) -> Option<Layout> {
        let t: Vec<&str> = body.split_whitespace().collect();
        if !matches!(t.first(), Some(&"size") | Some(&"bytes")) || !t.contains(&"busbw") {
            return None;
        }
        let is_time = |s: &&str| matches!(*s, "time" | "cputime");
        let first = t.iter().position(is_time)?;
        let end = t[first + 1..]
            .iter()
            .position(is_time)
            .map_or(t.len(), |i| first + 1 + i);
        let group: Vec<Col> = t[first..end]
            .iter()
            .filter(|s| **s != "timestamp")
            .map(|s| match *s {
                "time" | "cputime" => Col::Time,
                "algbw" => Col::AlgBw,
                "busbw" => Col::BusBw,
                "#wrong" | "wrong" | "error" | "#error" | "errors" | "res" => Col::Wrong,
                _ => Col::Other,
            })
            .collect();
        let has = |c| group.contains(&c);
        (has(Col::AlgBw) && has(Col::BusBw)).then_some(Layout { group })
    }

    /// The layout of the 2.19 format without its header.
    fn classic() -> Layout {
        Layout {
            group: vec![Col::Time, Col::AlgBw, Col::BusBw, Col::Wrong],
        }
    }

    /// The figures after the key columns: a root when one more than whole groups, then
    /// out-of-place and in-place (or one group: in-place only).
    fn row(&self, t: &[&str]) -> Option<Row> {
        let g = self.group.len();
        let (root, values) = if t.len() == 2 * g + 1 || t.len() == g + 1 {
            let (r, v) = t.split_first()?;
            (Some(parse_int(r)?), v)
        } else {
            (None, t)
        };
        let (oop, ip) = if values.len() == 2 * g {
            (
                Some(self.measurement(&values[..g])?),
                self.measurement(&values[g..])?,
            )
        } else if values.len() == g {
            (None, self.measurement(values)?)
        } else {
            return None;
        };
        Some(Row {
            size: 0,
            count: 0,
            dtype: String::new(),
            redop: String::new(),
            root,
            out_of_place: oop,
            in_place: Some(ip),
        })
    }

    fn measurement(&self, v: &[&str]) -> Option<Measurement> {
        let mut m = Measurement {
            time_us: f64::NAN,
            algbw: f64::NAN,
            busbw: f64::NAN,
            wrong: None,
        };
        for (col, tok) in self.group.iter().zip(v) {
            match col {
                Col::Time => m.time_us = parse_number(tok)?,
                Col::AlgBw => m.algbw = parse_number(tok)?,
                Col::BusBw => m.busbw = parse_number(tok)?,
                Col::Wrong => {
                    m.wrong = if *tok == "N/A" {
                        None
                    } else {
                        Some(parse_number(tok)?)
                    }
                }
                Col::Other => {}
            }
        }
        Some(m)
    }
}

fn parse_number(t: &str) -> Option<f64> {
    match t {
        "N/A" => None,
        "-nan" | "nan" => Some(f64::NAN),
        _ => t.parse().ok(),
    }
}

fn parse_int(t: &str) -> Option<i64> {
    t.parse().ok()
}

/// Parse a result row with `layout` (from the header), falling back to the 2.19 layout.
/// The key columns are `size count type`, then a reduction when one is printed (none
/// for all_gather, broadcast and sendrecv before 2.13, a blank one for alltoall and
/// hypercube: `none` is recorded), then a root when the figures are one more than whole
/// groups.
fn parse_row(line: &str, layout: Option<&Layout>) -> Option<Row> {
    let mut t: Vec<&str> = line.split_whitespace().collect();
    if t.len() < 7 || !is_digits(t[0]) || !is_digits(t[1]) || !is_name_token(t[2]) {
        return None;
    }
    // A trailing timestamp (`-S 1`: `2026-01-02 03:04:05`) is not a figure.
    for _ in 0..3 {
        if t.last().is_some_and(|l| !is_value_token(l)) {
            t.pop();
        }
    }
    let (redop, rest) = if t.len() > 3 && is_name_token(t[3]) {
        (t[3], &t[4..])
    } else {
        ("none", &t[3..])
    };
    if rest.len() < 3 || !rest.iter().all(|s| is_value_token(s)) {
        return None;
    }
    let row = layout
        .and_then(|l| l.row(rest))
        .or_else(|| Layout::classic().row(rest))?;
    Some(Row {
        size: t[0].parse().ok()?,
        count: t[1].parse().ok()?,
        dtype: t[2].to_string(),
        redop: redop.to_string(),
        ..row
    })
}

/// The nccl-tests binaries (`<name>_perf`).
const COLLECTIVES: [&str; 12] = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "alltoallv",
    "broadcast",
    "reduce",
    "sendrecv",
    "gather",
    "scatter",
    "hypercube",
    "all_reduce_group",
];

/// `all_reduce` from `all_reduce_perf`, `/opt/nccl-tests/build/all_gather_perf_mpi`.
/// `known_only`: accept only nccl-tests' own binaries (for words of a command line).
fn collective_from_program(program: &str, known_only: bool) -> Option<String> {
    let base = program.rsplit('/').next().unwrap_or(program);
    let (name, suffix) = base.split_once("_perf")?;
    let suffix_ok = suffix.is_empty()
        || suffix
            .strip_prefix('_')
            .is_some_and(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric()));
    let name_ok = if known_only {
        COLLECTIVES.contains(&name)
    } else {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit())
    };
    (suffix_ok && name_ok).then(|| name.to_string())
}

/// `2.28.9` from NCCL_VERSION_CODE 22809 (`2.7.8` from 2708 before 2.9).
fn decode_version_code(code: u32) -> Option<String> {
    match code {
        0 => None,
        c if c >= 10000 => Some(format!("{}.{}.{}", c / 10000, (c % 10000) / 100, c % 100)),
        c => Some(format!("{}.{}.{}", c / 1000, (c % 1000) / 100, c % 100)),
    }
}

/// The most rows a test keeps (a sweep has a few dozen sizes; a log that goes on beyond
/// this repeats itself, and its rows still stream out as events).
pub const MAX_ROWS: usize = 4096;
/// The most devices a test keeps (ranks listed in its header).
pub const MAX_DEVICES: usize = 16_384;
/// The most finished tests kept; later ones still stream out as events.
pub const MAX_REPORTS: usize = 1024;

/// The streaming parser. See the module docs.
#[derive(Debug, Default)]
pub struct Parser {
    partial: Vec<u8>,
    /// The start of a row that a NCCL debug line interrupted.
    fragment: String,
    layout: Option<Layout>,
    in_table: bool,
    current: Report,
    finished: Vec<Report>,
    detector: TransportDetector,
    /// The NCCL version came from a `NCCL version` line (not the banner's code).
    version_explicit: bool,
    /// The error lines of the test being read.
    cause: super::cause::CauseFinder,
    /// The hosts of NCCL's debug lines (`host:pid:tid`), bounded by [`MAX_HOSTS`].
    debug_hosts: std::collections::BTreeSet<String>,
}

/// The most distinct hosts a test keeps.
pub const MAX_HOSTS: usize = 16_384;

impl Parser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed a chunk of bytes; lines may be split anywhere, even inside a UTF-8 character.
    pub fn push_bytes(&mut self, chunk: &[u8]) -> Vec<Event> {
        let mut events = Vec::new();
        let mut rest = chunk;
        while let Some(pos) = rest.iter().position(|&b| b == b'\n') {
            self.partial.extend_from_slice(&rest[..pos]);
            let line = std::mem::take(&mut self.partial);
            events.extend(self.push_line(&String::from_utf8_lossy(&line)));
            rest = &rest[pos + 1..];
        }
        self.partial.extend_from_slice(rest);
        if self.partial.len() > MAX_LINE_BYTES {
            let line = std::mem::take(&mut self.partial);
            events.extend(self.push_line(&String::from_utf8_lossy(&line)));
        }
        events
    }

    /// Feed a chunk of text; lines may be split anywhere.
    pub fn push_str(&mut self, chunk: &str) -> Vec<Event> {
        self.push_bytes(chunk.as_bytes())
    }

    /// The input ended: read a last line that had no newline.
    pub fn finish(&mut self) -> Vec<Event> {
        let line = std::mem::take(&mut self.partial);
        let events = if line.is_empty() {
            Vec::new()
        } else {
            self.push_line(&String::from_utf8_lossy(&line))
        };
        self.fragment.clear();
        events
    }

    /// Feed one whole line (without its newline).
    pub fn push_line(&mut self, raw: &str) -> Vec<Event> {
        let mut events = Vec::new();
        let line = strip_launcher_prefixes(raw.trim_end_matches(['\r', '\n']));
        let debug = split_debug(line);
        self.cause.push_stripped(line, debug.as_ref());
        if !self.current.torch && is_torch_line(raw) {
            self.current.torch = true;
        }
        // PyTorch's error names the version it ran: `..., internal error, NCCL version 2.14.3`.
        if !self.version_explicit {
            if let Some(at) = line.find(", NCCL version ") {
                self.explicit_version(&line[at + ", NCCL version ".len()..], &mut events);
            }
        }
        // Open MPI's own reports (a signal, a backtrace): `[host:pid] *** Process received
        // signal ***`; nccl-tests' failure lines: `host: Test CUDA failure ...`.
        if let Some(host) = ompi_report_host(line).or_else(|| test_failure_host(raw)) {
            self.note_host(host);
        }
        if let Some(d) = debug {
            if d.before.trim().is_empty() && !d.glued.is_empty() {
                self.note_host(d.glued);
            }
            if self.in_table {
                if let Some(frag) = self.row_fragment(d.before, d.glued) {
                    self.fragment = frag;
                    if self.fragment.len() > MAX_LINE_BYTES {
                        self.fragment.clear();
                    }
                }
            }
            self.debug_message(d.message, &mut events);
            return events;
        }
        if !self.fragment.is_empty() {
            let joined = std::mem::take(&mut self.fragment) + line;
            if let Some(row) = parse_row(&joined, self.layout.as_ref()) {
                self.add_row(row, &mut events);
                return events;
            }
        }
        self.plain_line(line, &mut events);
        events
    }

    /// A host the log names (bounded by [`MAX_HOSTS`]).
    fn note_host(&mut self, host: &str) {
        if self.debug_hosts.len() < MAX_HOSTS && !self.debug_hosts.contains(host) {
            self.debug_hosts.insert(host.to_string());
        }
    }

    /// The report of the test being read (or the last one), with what is known so far.
    pub fn report(&self) -> Report {
        let mut r = self.current.clone();
        // The rank list names every rank's host; without one, NCCL's debug lines do.
        let hosts: std::collections::BTreeSet<&str> = if r.devices.is_empty() {
            self.debug_hosts.iter().map(String::as_str).collect()
        } else {
            r.devices.iter().filter_map(|d| d.host.as_deref()).collect()
        };
        r.hosts = hosts.into_iter().take(MAX_HOSTS).map(str::to_string).collect();
        let nodes = nodes_of_devices(&r.devices)
            .or_else(|| (r.hosts.len() > 1).then(|| u32::try_from(r.hosts.len()).unwrap_or(u32::MAX)));
        r.transport = self.transport().map(|mut t| {
            // Ranks on several nodes, whatever NCCL printed of its own count: its `Using
            // network X` is then the inter-node network even where SHM channels were
            // printed; on one node it carries nothing.
            if t.nodes.is_none() {
                t.nodes = nodes;
            }
            t
        });
        r.cause = self.cause.error();
        if r.collective.is_none() {
            match infer_collective(&r) {
                Ok(Some(c)) => {
                    r.collective = Some(c.to_string());
                    r.collective_from = Some("the table");
                }
                Ok(None) => {}
                Err(choices) => r.collective_choices = Some(choices),
            }
        }
        r
    }

    /// Every test read so far, in order (most logs hold one).
    pub fn reports(&self) -> Vec<Report> {
        let mut all = self.finished.clone();
        if all.is_empty() || !self.current.is_blank() {
            all.push(self.report());
        }
        all
    }

    /// The transport so far; `None` when no NCCL debug line was read.
    pub fn transport(&self) -> Option<Transport> {
        self.detector.saw_debug_lines().then(|| self.detector.transport())
    }

    /// The row fragment pending after a debug line that interrupted a row: what was
    /// pending, the text before `host:pid:tid`, and the value glued to the host name.
    fn row_fragment(&self, before: &str, glued: &str) -> Option<String> {
        // A WARN line's `[2026-01-02 03:04:05] ` timestamp can come between the two.
        let (before, glued) = match before.trim_end().strip_suffix(']') {
            Some(head) => (&head[..head.rfind('[')?], ""),
            None => (before, glued),
        };
        let text = format!("{}{before}", self.fragment);
        let tokens: Vec<&str> = text.split_whitespace().collect();
        if tokens.is_empty() || !tokens.iter().enumerate().all(|(k, t)| self.fits(k, t)) {
            return None;
        }
        if glued.is_empty() {
            // The fragment ends where the timestamp began: its last token is complete.
            return (!text.ends_with(char::is_whitespace)).then_some(text);
        }
        let kind = self.kind_at(tokens.len());
        let value = split_glued(glued, kind).or_else(|| {
            (kind == ValueKind::Redop)
                .then(|| split_glued(glued, ValueKind::Number))
                .flatten()
        });
        match value {
            Some(value) => Some(text + value),
            // Printed pieces end with a value, but a launcher may flush on a blank.
            None if text.ends_with(char::is_whitespace) => Some(text),
            None => None,
        }
    }

    fn kind_at(&self, k: usize) -> ValueKind {
        match k {
            0 | 1 => ValueKind::Int,
            2 => ValueKind::Type,
            3 => ValueKind::Redop,
            _ => ValueKind::Number,
        }
    }

    /// Whether token `k` of a row fragment can be what a row has there (the fourth is a
    /// reduction, or the root or first figure of a row without one).
    fn fits(&self, k: usize, t: &str) -> bool {
        match self.kind_at(k) {
            ValueKind::Int => parse_int(t).is_some(),
            ValueKind::Type => is_name_token(t),
            ValueKind::Redop => is_name_token(t) || is_value_token(t),
            ValueKind::Number => is_value_token(t),
        }
    }

    fn debug_message(&mut self, message: &str, events: &mut Vec<Event>) {
        if let Some(rest) = message.strip_prefix("NCCL version ") {
            self.explicit_version(rest, events);
        }
        // NCCL_DEBUG_SUBSYS=COLL: `AllReduce: opCount 0 sendbuff ...` names the collective.
        if self.current.collective.is_none() {
            if let Some((op, _)) = message.split_once(": opCount ") {
                if let Some(name) = collective_of_nccl_op(op) {
                    self.set_collective(name.to_string(), "NCCL's collective lines", events);
                }
            }
        }
        let before = self.detector.transport().summary();
        if self.detector.feed(message) {
            let after = self.detector.transport().summary();
            if after != before {
                if let Some(s) = after {
                    events.push(Event::Transport(s));
                }
            }
        }
    }

    fn explicit_version(&mut self, rest: &str, events: &mut Vec<Event>) {
        let Some(v) = rest.split_whitespace().next() else {
            return;
        };
        if self.version_explicit || !v.starts_with(|c: char| c.is_ascii_digit()) {
            return;
        }
        self.version_explicit = true;
        self.current.nccl_version = Some(v.to_string());
        events.push(Event::NcclVersion(v.to_string()));
    }

    /// A test's banner or header arrived after rows: the next test begins.
    fn maybe_new_test(&mut self, events: &mut Vec<Event>) {
        if self.current.rows.is_empty() {
            return;
        }
        let done = self.report();
        let next = Report {
            nccl_version: done.nccl_version.clone(),
            ..Report::default()
        };
        if self.finished.len() < MAX_REPORTS {
            self.finished.push(done);
        }
        self.current = next;
        self.layout = None;
        self.in_table = false;
        self.fragment.clear();
        self.cause = Default::default();
        events.push(Event::TestStarted);
    }

    fn add_row(&mut self, row: Row, events: &mut Vec<Event>) {
        self.in_table = true;
        if self.current.rows.len() < MAX_ROWS {
            self.current.rows.push(row.clone());
        }
        events.push(Event::Row(row));
    }

    fn plain_line(&mut self, line: &str, events: &mut Vec<Event>) {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            return;
        }
        let hashed = trimmed.starts_with('#');
        let body = trimmed.trim_start_matches('#').trim_start();

        if let Some(rest) = body.strip_prefix("nccl-tests version ") {
            self.maybe_new_test(events);
            self.current.banner_seen = true;
            let mut words = rest.split_whitespace();
            if let Some(v) = words.next() {
                self.current.tests_version = Some(v.to_string());
                events.push(Event::TestsVersion(v.to_string()));
            }
            let code = words
                .find_map(|w| w.strip_prefix("nccl-library="))
                .and_then(|c| c.parse().ok())
                .and_then(decode_version_code);
            if let (Some(v), false, None) = (code, self.version_explicit, &self.current.nccl_version) {
                self.current.nccl_version = Some(v.clone());
                events.push(Event::NcclVersion(v));
            }
        } else if let Some(name) = body.strip_prefix("Collective test starting:") {
            self.maybe_new_test(events);
            self.current.banner_seen = true;
            if let Some(name) = banner_collective(name.trim()) {
                self.set_collective(name, "banner", events);
            }
        } else if let Some(name) = body.strip_prefix("Collective test concluded:") {
            if let Some(name) = banner_collective(name.trim()) {
                self.set_collective(name, "banner", events);
            }
            self.current.concluded = true;
            self.in_table = false;
            events.push(Event::Concluded);
        } else if body.starts_with("nThread ") {
            self.maybe_new_test(events);
            self.current.banner_seen = true;
            let threads = word_after(body, "nThread");
            let gpus = word_after(body, "nGpus");
            self.current.threads = threads;
            self.current.gpus_per_thread = gpus;
            if let (Some(threads), Some(gpus)) = (threads, gpus) {
                events.push(Event::Config { threads, gpus });
            }
        } else if let Some(rest) = body.strip_prefix("NCCL version ") {
            self.explicit_version(rest, events);
        } else if let Some(rest) = body.strip_prefix("NCCL Tests compiled with NCCL ") {
            // nccl-tests 1.x's banner: the NCCL it was built against.
            self.current.banner_seen = true;
            if self.current.nccl_version.is_none() {
                if let Some(v) = rest.split_whitespace().next() {
                    self.current.nccl_version = Some(v.to_string());
                    events.push(Event::NcclVersion(v.to_string()));
                }
            }
        } else if hashed && body == "Using devices" {
            self.current.banner_seen = true;
        } else if let Some(device) = parse_device(body) {
            if self.current.devices.len() < MAX_DEVICES {
                self.current.devices.push(device.clone());
            }
            events.push(Event::Device(device));
        } else if let Some(rest) = body.strip_prefix("Out of bounds values") {
            let mut words = rest.trim_start_matches([' ', ':']).split_whitespace();
            if let Some(count) = words.next().and_then(|c| c.parse().ok()) {
                let oob = OutOfBounds {
                    count,
                    ok: words.next() != Some("FAILED"),
                };
                self.current.out_of_bounds = Some(oob);
                self.in_table = false;
                events.push(Event::OutOfBounds(oob));
            }
        } else if let Some(rest) = body.strip_prefix("Avg bus bandwidth") {
            let value = rest.trim_start_matches([' ', ':']).split_whitespace().next();
            if let Some(bw) = value.and_then(parse_number) {
                self.current.avg_busbw = Some(bw);
                self.in_table = false;
                events.push(Event::AvgBusBw(bw));
            }
        } else if let Some(layout) = Layout::from_header(body) {
            self.maybe_new_test(events);
            self.layout = Some(layout);
            self.in_table = true;
            self.current.header_seen = true;
            events.push(Event::Header);
        } else if !hashed {
            if let Some(row) = parse_row(trimmed, self.layout.as_ref()) {
                self.add_row(row, events);
            } else if self.current.collective.is_none() {
                // A command line echoed into the log: `mpirun ... /opt/nccl-tests/build/all_gather_perf -b 8`.
                let mut words = trimmed.split_whitespace();
                if let Some(name) = words.find_map(|w| collective_from_program(w, true)) {
                    self.set_collective(name, "command line", events);
                }
            }
        }
    }

    /// Record the collective; one from the banner replaces one found elsewhere.
    fn set_collective(&mut self, name: String, from: &'static str, events: &mut Vec<Event>) {
        if self.current.collective.as_deref() != Some(&name)
            && (from == "banner" || self.current.collective.is_none())
        {
            self.current.collective = Some(name.clone());
            self.current.collective_from = Some(from);
            events.push(Event::Collective(name));
        }
    }
}

/// The collective of a banner's program name: `all_reduce_perf` gives `all_reduce`; a
/// binary of another name is taken as it is.
fn banner_collective(program: &str) -> Option<String> {
    collective_from_program(program, false).or_else(|| {
        let p = program.rsplit('/').next().unwrap_or(program);
        is_name_token(p).then(|| p.to_string())
    })
}

fn word_after(body: &str, key: &str) -> Option<u32> {
    let mut words = body.split_whitespace();
    words.find(|w| *w == key)?;
    words.next()?.parse().ok()
}

/// `Rank  0 Group  0 Pid   1374 on         vm device  0 [0000:00:06] NVIDIA H200`, and the
/// older `Rank  0 Pid 123 on host device  0 [0x07] Tesla V100` and `Rank  0 on host ...`.
fn parse_device(body: &str) -> Option<Device> {
    let rest = body.strip_prefix("Rank ")?;
    let mut words = rest.split_whitespace();
    let rank = words.next()?.parse().ok()?;
    let next = words.next()?;
    if !matches!(next, "Group" | "Pid" | "on") {
        return None;
    }
    let word_after = |key: &str| {
        let mut w = rest.split_whitespace();
        w.find(|x| *x == key)?;
        w.next().map(str::to_string)
    };
    let (pci, name) = match (rest.find(" ["), rest.find("] ")) {
        (Some(open), Some(close)) if open < close => (
            Some(rest[open + 2..close].to_string()),
            Some(rest[close + 2..].trim().to_string()).filter(|n| !n.is_empty()),
        ),
        _ => (None, None),
    };
    Some(Device {
        rank,
        host: word_after("on"),
        device: word_after("device").and_then(|d| d.parse().ok()),
        pci,
        name,
    })
}

/// The host of nccl-tests' failure lines: `host: Test NCCL failure ...`, ` .. host pid N:
/// Test failure ...`, and a row's key columns glued before one (`-1node1: Test ...`).
fn test_failure_host(line: &str) -> Option<&str> {
    let at = line.find(": Test ")?;
    let mut words = line[..at].split_whitespace().rev();
    let last = words.next()?;
    let host = if is_digits(last) && words.next() == Some("pid") {
        words.next()?
    } else {
        last.trim_start_matches(|c: char| c.is_ascii_digit() || c == '-' || c == '.')
    };
    (!host.is_empty() && !host.contains(['[', ']', '(', ')', '"', '\''])).then_some(host)
}

/// The host of Open MPI's `[host:pid] ...` report lines.
fn ompi_report_host(line: &str) -> Option<&str> {
    let (inner, _) = line.strip_prefix('[')?.split_once("] ")?;
    let (host, pid) = inner.rsplit_once(':')?;
    (is_digits(pid) && is_name_token(&host.replace(['-', '.'], "_"))).then_some(host)
}

/// The GPUs a node of nccl-tests' rank list has, per node: nodes that share a host name
/// (containers all called `localhost`, pods of one name) are told apart by a CUDA device
/// index that appears twice under one name. `None` without a rank list.
pub fn gpus_per_listed_node(devices: &[Device]) -> Option<Vec<usize>> {
    if devices.is_empty() {
        return None;
    }
    let mut by_host: std::collections::BTreeMap<&str, Vec<Option<u32>>> = Default::default();
    for d in devices {
        by_host
            .entry(d.host.as_deref().unwrap_or(""))
            .or_default()
            .push(d.device);
    }
    let mut per_node = vec![];
    for devs in by_host.values() {
        let mut seen: std::collections::BTreeMap<Option<u32>, usize> = Default::default();
        for d in devs {
            *seen.entry(*d).or_default() += 1;
        }
        // A device index listed k times under one name: k nodes of that name.
        let nodes = if seen.keys().any(Option::is_none) {
            1
        } else {
            seen.values().copied().max().unwrap_or(1)
        };
        for _ in 0..nodes {
            per_node.push(devs.len() / nodes);
        }
    }
    Some(per_node)
}

/// The nodes nccl-tests' rank list spans ([`gpus_per_listed_node`]).
pub fn nodes_of_devices(devices: &[Device]) -> Option<u32> {
    gpus_per_listed_node(devices).map(|v| u32::try_from(v.len()).unwrap_or(u32::MAX))
}

/// Whether a raw line is PyTorch's: its process group, its launcher's rank tags, its
/// distributed errors.
fn is_torch_line(raw: &str) -> bool {
    raw.contains("ProcessGroupNCCL")
        || raw.contains("torch.distributed")
        || raw.contains("torch/distributed")
        || raw.contains("DistBackendError")
        || raw.contains("torchrun")
        || raw.contains("[rank0]:")
}

/// The nccl-tests collective of NCCL's own op name in its COLL lines.
fn collective_of_nccl_op(op: &str) -> Option<&'static str> {
    Some(match op.rsplit(' ').next()? {
        "AllReduce" => "all_reduce",
        "AllGather" => "all_gather",
        "ReduceScatter" => "reduce_scatter",
        "Broadcast" => "broadcast",
        "Reduce" => "reduce",
        _ => return None,
    })
}

/// Bytes of one element of an nccl-tests data type.
fn type_size(t: &str) -> Option<u64> {
    Some(match t {
        "int8" | "uint8" | "char" | "f8e4m3" | "f8e5m2" => 1,
        "half" | "bfloat16" => 2,
        "float" | "int32" | "uint32" | "int" => 4,
        "double" | "int64" | "uint64" => 8,
        _ => return None,
    })
}

/// The collective of a table that does not name it, read as an expert reads it
/// (nccl-tests' `src/*.cu` `GetBw` and `GetCollByteCount`): a root (not -1) with a
/// reduction is `reduce`, without one `broadcast` (count = size / type) or `gather`/
/// `scatter` (count = size / type / ranks); rootless, a reduction with count = size /
/// type is `all_reduce` (busbw = algbw x 2(n-1)/n) or `sendrecv` (busbw = algbw, which
/// prints its `-o` op from 2.13), with count = size / type / ranks `reduce_scatter`;
/// without one, count = size / type / ranks is `all_gather` or `alltoall` (the same
/// figures: left open), count = size / type `sendrecv`. `Ok(None)`: nothing to read;
/// `Err(choices)`: the figures fit more than one.
pub fn infer_collective(r: &Report) -> Result<Option<&'static str>, String> {
    let Some(row) = r
        .rows
        .iter()
        .rev()
        .find(|row| row.size > 0 && row.count > 0 && type_size(&row.dtype).is_some())
    else {
        return Ok(None);
    };
    let elems = row.size / type_size(&row.dtype).unwrap_or(1);
    let per_rank = row.count != elems;
    let reduces = row.redop != "none";
    let n = r.ranks().map(f64::from);
    let ratio = row
        .out_of_place
        .as_ref()
        .or(row.in_place.as_ref())
        .filter(|m| m.algbw > 0.0 && m.busbw.is_finite())
        .map(|m| m.busbw / m.algbw);
    let near = |want: f64| ratio.is_some_and(|x| (x - want).abs() <= 0.02 * want.max(1.0));
    // The in-place check tells the rest apart: from 2.13.1 nccl-tests prints `N/A` there
    // for alltoall and sendrecv and checks all_gather's and all_reduce's; before 2.13
    // (no root column) alltoall's in-place error is an unchecked delta, often 1e+00.
    let ip_na = r.rows.iter().any(|row| {
        row.in_place.as_ref().is_some_and(|m| m.wrong.is_none())
            && row.out_of_place.as_ref().is_some_and(|m| m.wrong.is_some())
    });
    let ip_checked = r
        .rows
        .iter()
        .any(|row| row.root.is_some() && row.in_place.as_ref().is_some_and(|m| m.wrong.is_some()));
    let ip_delta = r.rows.iter().any(|row| {
        row.root.is_none()
            && row
                .in_place
                .as_ref()
                .is_some_and(|m| m.wrong.is_some_and(|w| w > 0.0))
            && row.out_of_place.as_ref().is_some_and(|m| m.wrong == Some(0.0))
    });
    match row.root {
        Some(root) if root >= 0 => Ok(Some(match (reduces, per_rank) {
            (true, _) => "reduce",
            (false, false) => "broadcast",
            (false, true) => return Err("gather or scatter".into()),
        })),
        _ => {
            if reduces && !per_rank {
                let more_than_one = ratio.is_some_and(|x| x > 1.02);
                if more_than_one && n.is_none_or(|n| near(2.0 * (n - 1.0) / n)) {
                    Ok(Some("all_reduce"))
                } else if ip_na {
                    Ok(Some("sendrecv"))
                } else if ip_checked {
                    Ok(Some("all_reduce"))
                } else if near(1.0) && n.is_some_and(|n| n > 2.0) {
                    Ok(Some("sendrecv"))
                } else {
                    Err("all_reduce or sendrecv".into())
                }
            } else if reduces {
                Ok(Some("reduce_scatter"))
            } else if per_rank {
                if ip_na || ip_delta {
                    Ok(Some("alltoall"))
                } else if ip_checked {
                    Ok(Some("all_gather"))
                } else {
                    Err("all_gather or alltoall".into())
                }
            } else {
                Ok(Some("sendrecv"))
            }
        }
    }
}

/// Parse a whole text: every test it holds (one, usually).
pub fn parse_text(text: &str) -> Vec<Report> {
    let mut p = Parser::new();
    p.push_str(text);
    p.finish();
    p.reports()
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
