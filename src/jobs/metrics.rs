//! Training metrics read from job logs: step, loss, step time, tokens/s and TFLOPs/s per
//! GPU, MFU. Built-in formats:
//!
//! - `Step: 10 | Time: 14.53s | TFLOPs/s/GPU: 954.4 | Tokens/s/GPU: 2254 | Loss: 0.4395`
//!   (the seed format; any `key: value` list with a step and a loss or a rate);
//! - torchtitan's step lines, colour codes and all:
//!   `step:  1  loss: 12.2541  memory: 42.00GiB(44.21%)  tps: 1,234  tflops: 95.12  mfu: 9.62%`;
//! - Hugging Face Trainer's log dicts: `{'loss': 0.4395, 'grad_norm': 1.2, 'learning_rate':
//!   5e-05, 'epoch': 0.5}` (they carry no step; the n-th dict of a node is its step n);
//!
//! plus a job's own regexes with named groups `step`, `loss`, `step_time` (seconds),
//! `tokens_per_s`, `tflops`, `mfu` (percent). Rates are per GPU, as the formats print them.
//!
//! Per node the samples are kept in a bounded buffer; MFU comes from the printed MFU, or
//! from TFLOPs/s (printed, or tokens/s x FLOPs per token) over the GPU's peak rate.

use regex::Regex;
use std::collections::{BTreeMap, VecDeque};

/// The names a pattern's groups may have.
pub const FIELDS: &[&str] = &["step", "loss", "step_time", "tokens_per_s", "tflops", "mfu"];

/// Samples kept per node.
pub const KEEP: usize = 20_000;

/// Dense BF16 tensor peak per GPU, TFLOP/s, from NVIDIA's datasheets (without sparsity).
pub const PEAKS: &[(&str, f64)] = &[
    ("GB200", 2500.0),
    ("B200", 2250.0),
    ("H200", 989.0),
    ("H100", 989.0),
    ("A100", 312.0),
    ("L4", 121.0),
    ("V100", 125.0),
    ("T4", 65.0),
];

/// The peak rate of a GPU named like `H200`, `nvidia-h200-141gb`, `NVIDIA H100 80GB HBM3`.
pub fn peak_tflops(gpu: &str) -> Option<f64> {
    let g = gpu.to_ascii_uppercase();
    PEAKS.iter().find(|(name, _)| g.contains(name)).map(|p| p.1)
}

/// One metric line.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Sample {
    pub step: Option<u64>,
    pub loss: Option<f64>,
    /// Seconds per step.
    pub step_time: Option<f64>,
    /// Tokens per second per GPU.
    pub tokens_per_s: Option<f64>,
    /// TFLOP/s per GPU.
    pub tflops: Option<f64>,
    /// Model FLOPs utilisation, 0..1.
    pub mfu: Option<f64>,
}

impl Sample {
    fn is_empty(&self) -> bool {
        self.loss.is_none()
            && self.step_time.is_none()
            && self.tokens_per_s.is_none()
            && self.tflops.is_none()
    }
}

/// A job's own metric regex.
#[derive(Debug, Clone)]
pub struct Pattern {
    re: Regex,
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.re.as_str() == other.re.as_str()
    }
}

impl Pattern {
    /// Compile a pattern; it needs at least one named group, all named after [`FIELDS`].
    pub fn new(text: &str) -> Result<Pattern, String> {
        let re =
            Regex::new(text).map_err(|e| format!("not a valid regex: {}", first_line(&e.to_string())))?;
        let names: Vec<&str> = re.capture_names().flatten().collect();
        if names.is_empty() {
            return Err(format!(
                "expected named groups such as (?P<loss>[0-9.]+); known names: {}",
                FIELDS.join(", ")
            ));
        }
        for n in names {
            if !FIELDS.contains(&n) {
                let hint = crate::yaml::did_you_mean(n, FIELDS.iter().copied());
                return Err(format!(
                    "unknown group name `{n}`, expected one of {}{hint}",
                    FIELDS.join(", ")
                ));
            }
        }
        Ok(Pattern { re })
    }

    fn apply(&self, line: &str) -> Option<Sample> {
        let c = self.re.captures(line)?;
        let num = |n: &str| c.name(n).and_then(|m| number(m.as_str()));
        let s = Sample {
            step: c
                .name("step")
                .and_then(|m| m.as_str().replace(',', "").parse().ok()),
            loss: num("loss"),
            step_time: num("step_time"),
            tokens_per_s: num("tokens_per_s"),
            tflops: num("tflops"),
            mfu: num("mfu").map(|p| p / 100.0),
        };
        (!s.is_empty() || s.step.is_some()).then_some(s)
    }
}

fn first_line(s: &str) -> &str {
    s.lines().last().unwrap_or(s).trim()
}

fn number(s: &str) -> Option<f64> {
    s.trim()
        .replace(',', "")
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
}

/// Strip ANSI escape sequences (torchtitan colours its step lines).
fn strip_ansi(line: &str) -> std::borrow::Cow<'_, str> {
    if !line.contains('\x1b') {
        return line.into();
    }
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out.into()
}

fn pairs_re() -> &'static Regex {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"'?([A-Za-z][A-Za-z0-9_/ ]*?)'?\s*[:=]\s*([-+]?[0-9][0-9,]*(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)\s*(ms|s|%)?")
            .expect("valid")
    })
}

/// The built-in formats: `key: value` pairs (seed, torchtitan, Hugging Face dicts).
fn builtin(line: &str) -> Option<(Sample, bool)> {
    let line = strip_ansi(line);
    let hf = line.trim_start().starts_with('{') && line.contains("'loss'");
    let mut s = Sample::default();
    let mut found_step = false;
    for c in pairs_re().captures_iter(&line) {
        let key = c[1].trim().to_ascii_lowercase();
        let Some(v) = number(&c[2]) else { continue };
        let unit = c.get(3).map(|m| m.as_str());
        match key.as_str() {
            "step" | "iter" | "iteration" => {
                s.step = c[2].replace(',', "").parse().ok();
                found_step = s.step.is_some();
            }
            "loss" | "train_loss" | "lm loss" => s.loss = Some(v),
            "time" | "step time" | "step_time" | "time/step" => {
                s.step_time = Some(if unit == Some("ms") { v / 1000.0 } else { v })
            }
            "tokens/s/gpu"
            | "tokens/s per gpu"
            | "tps"
            | "tok/s/gpu"
            | "wps"
            | "tokens_per_second_per_gpu" => s.tokens_per_s = Some(v),
            "tflops/s/gpu" | "tflops" | "tflops/gpu" | "tflop/s/gpu" => s.tflops = Some(v),
            "mfu" | "mfu(%)" => s.mfu = Some(v / 100.0),
            _ => {}
        }
    }
    if hf {
        return (s.loss.is_some()).then_some((s, true));
    }
    let rate = s.tokens_per_s.is_some() || s.tflops.is_some() || s.step_time.is_some();
    (found_step && (s.loss.is_some() || rate)).then_some((s, false))
}

/// One node's samples.
#[derive(Debug, Clone, Default)]
pub struct NodeSeries {
    pub samples: VecDeque<Sample>,
    /// Metric lines seen (also those that fell out of the buffer).
    pub seen: u64,
}

/// What a node's step times look like against the others.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Drift {
    pub node: usize,
    /// The node's median step time over its recent steps, seconds.
    pub median_step_time: f64,
    /// The median of the nodes' medians.
    pub fleet_median: f64,
}

/// How many recent steps the drift rule looks at, the least it needs, and how far a node
/// may be from the median of the nodes before it is flagged.
pub const DRIFT_WINDOW: usize = 20;
pub const DRIFT_MIN_STEPS: usize = 3;
pub const DRIFT_RATIO: f64 = 1.15;

/// Metrics of one job, per node.
#[derive(Debug, Clone, Default)]
pub struct JobMetrics {
    pub patterns: Vec<Pattern>,
    pub flops_per_token: Option<f64>,
    pub peak_tflops: Option<f64>,
    pub nodes: BTreeMap<usize, NodeSeries>,
}

/// A summary over the job (all nodes).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Summary {
    pub steps: Option<u64>,
    pub first_loss: Option<f64>,
    pub last_loss: Option<f64>,
    /// Medians over the last [`DRIFT_WINDOW`] samples of the reporting nodes.
    pub step_time: Option<f64>,
    pub tokens_per_s: Option<f64>,
    pub tflops: Option<f64>,
    pub mfu: Option<f64>,
}

impl Summary {
    /// The summary as labelled figures (`-` where unknown), in one order for every
    /// place that shows it; `None` before the first metric line.
    pub fn parts(&self) -> Option<Vec<String>> {
        let f = |v: Option<f64>, d: usize| v.map_or("-".to_string(), |x| format!("{x:.d$}"));
        self.steps?;
        Some(vec![
            format!("step {}", self.steps.map_or("-".into(), |v| v.to_string())),
            format!("loss {} → {}", f(self.first_loss, 4), f(self.last_loss, 4)),
            format!("{} s/step", f(self.step_time, 3)),
            format!("{} tok/s/GPU", f(self.tokens_per_s, 0)),
            format!("{} TFLOPs/s/GPU", f(self.tflops, 1)),
            format!(
                "MFU {}",
                self.mfu.map_or("-".into(), |v| format!("{:.1}%", v * 100.0))
            ),
        ])
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

impl JobMetrics {
    pub fn new(patterns: Vec<Pattern>, flops_per_token: Option<f64>, peak_tflops: Option<f64>) -> JobMetrics {
        JobMetrics {
            patterns,
            flops_per_token,
            peak_tflops,
            nodes: BTreeMap::new(),
        }
    }

    /// Read one log line of `node`; the sample it held, if any.
    pub fn push_line(&mut self, node: usize, line: &str) -> Option<Sample> {
        let found = self
            .patterns
            .iter()
            .find_map(|p| p.apply(line).map(|s| (s, false)))
            .or_else(|| builtin(line));
        let (mut s, numbered_by_count) = found?;
        let series = self.nodes.entry(node).or_default();
        series.seen += 1;
        if numbered_by_count || s.step.is_none() {
            s.step = Some(series.seen);
        }
        if s.tflops.is_none() {
            if let (Some(t), Some(f)) = (s.tokens_per_s, self.flops_per_token) {
                s.tflops = Some(t * f / 1e12);
            }
        }
        if s.mfu.is_none() {
            if let (Some(t), Some(p)) = (s.tflops, self.peak_tflops) {
                s.mfu = Some(t / p);
            }
        }
        if series.samples.len() == KEEP {
            series.samples.pop_front();
        }
        series.samples.push_back(s);
        Some(s)
    }

    /// The node whose samples describe the job: the lowest-numbered node that has any
    /// (rank 0 prints in most frameworks).
    pub fn head(&self) -> Option<(&usize, &NodeSeries)> {
        self.nodes.iter().find(|(_, s)| !s.samples.is_empty())
    }

    pub fn summary(&self) -> Summary {
        let Some((_, head)) = self.head() else {
            return Summary::default();
        };
        let recent = |f: fn(&Sample) -> Option<f64>| {
            let v: Vec<f64> = self
                .nodes
                .values()
                .flat_map(|n| n.samples.iter().rev().take(DRIFT_WINDOW).filter_map(f))
                .collect();
            median(v)
        };
        Summary {
            steps: head.samples.iter().filter_map(|s| s.step).max(),
            first_loss: head.samples.iter().find_map(|s| s.loss),
            last_loss: head.samples.iter().rev().find_map(|s| s.loss),
            step_time: recent(|s| s.step_time),
            tokens_per_s: recent(|s| s.tokens_per_s),
            tflops: recent(|s| s.tflops),
            mfu: recent(|s| s.mfu),
        }
    }

    /// Nodes whose median step time over their last [`DRIFT_WINDOW`] steps is more than
    /// [`DRIFT_RATIO`] times the median of all nodes' medians (at least two nodes with
    /// [`DRIFT_MIN_STEPS`] timed steps each).
    pub fn drift(&self) -> Vec<Drift> {
        let medians: Vec<(usize, f64)> = self
            .nodes
            .iter()
            .filter_map(|(n, s)| {
                let t: Vec<f64> = s
                    .samples
                    .iter()
                    .rev()
                    .take(DRIFT_WINDOW)
                    .filter_map(|x| x.step_time)
                    .collect();
                (t.len() >= DRIFT_MIN_STEPS).then(|| median(t).map(|m| (*n, m)))?
            })
            .collect();
        if medians.len() < 2 {
            return vec![];
        }
        let fleet = median(medians.iter().map(|m| m.1).collect()).unwrap_or(0.0);
        medians
            .into_iter()
            .filter(|(_, m)| fleet > 0.0 && *m > fleet * DRIFT_RATIO)
            .map(|(node, m)| Drift {
                node,
                median_step_time: m,
                fleet_median: fleet,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> Option<Sample> {
        JobMetrics::default().push_line(0, line)
    }

    #[test]
    fn the_seed_format() {
        let s =
            one("Step: 12 | Time: 14.53s | TFLOPs/s/GPU: 954.4 | Tokens/s/GPU: 2254 | Loss: 0.4395").unwrap();
        assert_eq!(s.step, Some(12));
        assert_eq!(s.step_time, Some(14.53));
        assert_eq!(s.tflops, Some(954.4));
        assert_eq!(s.tokens_per_s, Some(2254.0));
        assert_eq!(s.loss, Some(0.4395));
        // With a launcher's prefix.
        let s = one("[rank0]: Step: 3 | Time: 250ms | Loss: 7.1").unwrap();
        assert_eq!((s.step, s.step_time, s.loss), (Some(3), Some(0.25), Some(7.1)));
    }

    #[test]
    fn torchtitan_lines_with_colours() {
        let line = "[titan] 2025-06-01 10:00:00,123 - root - INFO - \x1b[31mstep:  5  \x1b[32mloss:  9.8765  \x1b[33mmemory: 42.00GiB(44.21%)  \x1b[34mtps: 1,234  \x1b[36mtflops: 95.12  \x1b[35mmfu: 9.62%\x1b[39m";
        let s = one(line).unwrap();
        assert_eq!(s.step, Some(5));
        assert_eq!(s.loss, Some(9.8765));
        assert_eq!(s.tokens_per_s, Some(1234.0));
        assert_eq!(s.tflops, Some(95.12));
        assert!((s.mfu.unwrap() - 0.0962).abs() < 1e-12);
    }

    #[test]
    fn hugging_face_dicts_count_steps() {
        let mut m = JobMetrics::default();
        let a = m
            .push_line(
                1,
                "{'loss': 2.5, 'grad_norm': 1.25, 'learning_rate': 5e-05, 'epoch': 0.1}",
            )
            .unwrap();
        let b = m
            .push_line(1, "{'loss': 2.25, 'learning_rate': 4e-05, 'epoch': 0.2}")
            .unwrap();
        assert_eq!((a.step, a.loss), (Some(1), Some(2.5)));
        assert_eq!((b.step, b.loss), (Some(2), Some(2.25)));
        // The closing dict has no loss key of its own: not a step.
        assert!(m
            .push_line(1, "{'train_runtime': 12.5, 'train_loss': 2.3, 'epoch': 1.0}")
            .is_none());
    }

    #[test]
    fn ordinary_lines_are_not_metrics() {
        for line in [
            "Time: 3s",
            "step 4 done",
            "Loading checkpoint shards: 100%",
            "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM",
            "epoch: 1",
            "",
        ] {
            assert_eq!(one(line), None, "{line}");
        }
    }

    #[test]
    fn job_patterns_come_first() {
        let p =
            Pattern::new(r"it (?P<step>\d+) took (?P<step_time>[0-9.]+) s, (?P<tokens_per_s>[0-9,]+) tok/s")
                .unwrap();
        let mut m = JobMetrics::new(vec![p], Some(1e9), Some(989.0));
        let s = m.push_line(0, "it 7 took 0.5 s, 2,000 tok/s").unwrap();
        assert_eq!(
            (s.step, s.step_time, s.tokens_per_s),
            (Some(7), Some(0.5), Some(2000.0))
        );
        // TFLOPs from tokens/s x FLOPs per token, MFU from the H200's peak.
        assert_eq!(s.tflops, Some(2.0));
        assert!((s.mfu.unwrap() - 2.0 / 989.0).abs() < 1e-12);
        assert!(Pattern::new("no groups")
            .unwrap_err()
            .starts_with("expected named groups"));
        assert!(Pattern::new("(?P<loss>[")
            .unwrap_err()
            .starts_with("not a valid regex"));
    }

    #[test]
    fn peaks_by_any_name() {
        assert_eq!(peak_tflops("H200"), Some(989.0));
        assert_eq!(peak_tflops("nvidia-h200-141gb"), Some(989.0));
        assert_eq!(peak_tflops("NVIDIA B200"), Some(2250.0));
        assert_eq!(peak_tflops("NVIDIA GB200"), Some(2500.0));
        assert_eq!(peak_tflops("MI300X"), None);
    }

    #[test]
    fn summary_and_drift() {
        let mut m = JobMetrics::new(vec![], None, Some(1000.0));
        for step in 1..=10u64 {
            for node in 0..4usize {
                let t = if node == 2 { 1.5 } else { 1.0 + node as f64 * 0.01 };
                let loss = 5.0 - step as f64 * 0.3;
                m.push_line(
                    node,
                    &format!(
                        "Step: {step} | Time: {t}s | TFLOPs/s/GPU: 400 | Tokens/s/GPU: 2000 | Loss: {loss}"
                    ),
                );
            }
        }
        let s = m.summary();
        assert_eq!(s.steps, Some(10));
        assert_eq!(s.first_loss, Some(4.7));
        assert!((s.last_loss.unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(s.tokens_per_s, Some(2000.0));
        assert_eq!(s.mfu, Some(0.4));
        let d = m.drift();
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].node, 2);
        assert_eq!(d[0].median_step_time, 1.5);
        // Too few steps, or one node: no verdict.
        let mut m = JobMetrics::default();
        m.push_line(0, "Step: 1 | Time: 1s | Loss: 1");
        m.push_line(1, "Step: 1 | Time: 9s | Loss: 1");
        assert!(m.drift().is_empty());
    }

    #[test]
    fn buffers_are_bounded() {
        let mut m = JobMetrics::default();
        for i in 0..(KEEP as u64 + 5) {
            m.push_line(0, &format!("Step: {i} | Loss: 1.0"));
        }
        assert_eq!(m.nodes[&0].samples.len(), KEEP);
        assert_eq!(m.nodes[&0].seen, KEEP as u64 + 5);
    }
}
