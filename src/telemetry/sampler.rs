//! The node side: a POSIX sh loop (`sampler.sh`, embedded) that flightdeck runs over one
//! long-lived exec channel per node. Nothing is installed on the node.
//!
//! ## Record format (version 1)
//! Line-oriented text. Lines starting with `@` frame; everything else is content of the
//! section last opened. First a hello, once:
//! ```text
//! @fd 1 ms=1000 clock=ns host=a3-node-0 route=enp0s12 gpus=8 gpufields=index,utilization.gpu,...
//! @gpuinfo 0, NVIDIA H200, GPU-f6590450-37a6-04a6-b615-3fd4f2147dec, 143771, 700.00
//! ```
//! `ms` is the interval in force (100..10000), `clock` how `@s` times are written
//! (`ns`: Unix nanoseconds from `date +%s%N`; `us`: bash's `$EPOCHREALTIME`, Unix seconds
//! with a 6-digit fraction; `uptime`: /proc/uptime seconds with 2 decimals, since boot),
//! `route` the interface of the default route (`-`: none), `gpufields` the
//! `nvidia-smi --query-gpu` fields of the `@gpu` lines (`-`: no GPUs). One `@gpuinfo` line
//! per GPU: index, name, uuid, memory.total (MiB), power.limit (W).
//!
//! Then every interval one record:
//! ```text
//! @s SEQ TIME                      start; SEQ counts records from 1, TIME in `clock` units
//! Inter-|   Receive ...            /proc/net/dev, verbatim (two header lines, one per NIC)
//!   eth0: 228508497 12590 0 0 0 0 0 0 786986 7609 0 0 0 0 0 0
//! @ns POD                          per other network namespace holding a NIC besides lo
//!   eth1: 91230 ...                and eth0 (root only): its /proc/net/dev, the NICs
//!                                  named `POD/eth1` (POD: the namespace's host name)
//! @ib                              one line per RDMA port (possibly none):
//! mlx5_0 1 XMIT_DATA RCV_DATA XMIT_PKTS RCV_PKTS NETDEV
//! @gpu Q                           the latest nvidia-smi batch, Q its batch number
//! 0, 97, 41, 80123, 143771, 689.12, 61, 70, 1980
//! @dmon Q                          the latest `nvidia-smi dmon -s t` batch, if any
//! # gpu  rxpci  txpci      nvlrx      nvltx
//! # Idx   MB/s   MB/s  GPM:MiB/s  GPM:MiB/s
//!     0    118   4211          -          -
//! @e SEQ                           end; a record without its end is dropped
//! ```
//! `XMIT_DATA`/`RCV_DATA` are the sysfs `port_xmit_data`/`port_rcv_data` counters, in
//! 4-byte words; `-` stands for a counter the port lacks; `NETDEV` is the netdev of the
//! port's PCI function (`-`: none). `@gpu` and `@dmon` are absent on nodes without
//! nvidia-smi, and in the first records until nvidia-smi has answered. `@dmon` carries
//! PCIe throughput, and NVLink's where the driver has GPM metrics (Hopper and later;
//! `-` where a GPU has no NVLink peers); its two header lines name the columns and units.
//!
//! ## Cost
//! Under bash (picked where the node has it) a record forks nothing: the time is
//! `$EPOCHREALTIME`, the wait a `read -t` on a private FIFO, the rest builtin `read`s of
//! /proc and /sys. Under dash every record forks `date` and `sleep`. nvidia-smi runs once
//! in its loop mode (`-lms`), so NVML starts once, not every sample (one
//! `nvidia-smi --query-gpu` costs ~25 ms of CPU on an H200 host; the loop ~0.02% of a
//! core at 1 Hz). `nvidia-smi dmon` for the link figures costs ~0.7% of a core, so it
//! runs only when asked for ([`Config::gpu_links`]). `benches/sampler_cpu.py` measures.

use std::fmt;
use std::time::Duration;

/// The sampler script, as it runs on the node.
pub const SCRIPT: &str = include_str!("sampler.sh");

/// Picks bash where the node has it (`$EPOCHREALTIME` and `read -t` save the `date` and
/// `sleep` of every record), else sh. `$1` is the script, `$2` the interval in ms, `$3`
/// whether to sample GPU links, `$4` whether to sample the NICs of pods.
const LAUNCHER: &str = "command -v bash >/dev/null 2>&1 && exec bash -c \"$1\" flightdeck-sampler \"$2\" \"$3\" \"$4\"; exec sh -c \"$1\" flightdeck-sampler \"$2\" \"$3\" \"$4\"";

/// What the sampler is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub interval: Interval,
    /// Also sample the GPUs' PCIe and NVLink throughput (`nvidia-smi dmon`, about 0.7% of a
    /// core by itself on an H200 host; the rest of the sampler costs far less).
    pub gpu_links: bool,
    /// Also sample the NICs in other network namespaces (`@ns`): on a GKE node, a Device
    /// network's NIC sits in the pod that holds it while a job runs. Off elsewhere: an SSH
    /// host's containers are not its NICs.
    pub pod_nics: bool,
}

impl Config {
    pub fn new(interval: Interval) -> Config {
        Config {
            interval,
            gpu_links: false,
            pod_nics: false,
        }
    }

    fn links_arg(&self) -> &'static str {
        if self.gpu_links {
            "1"
        } else {
            "0"
        }
    }
}

/// The script without its comment lines (less to send and to parse).
pub fn script() -> String {
    SCRIPT
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The command line for a node's channel: the login shell over SSH (sh, bash, zsh,
/// fish), the debug pod's `sh -c`, or a local `sh -c` runs `exec sh -c '...'`, so the
/// sampler runs under a POSIX shell whatever the user's is.
pub fn command(config: Config) -> String {
    let script = script();
    debug_assert!(
        !script.contains('\''),
        "the sampler must not contain a single quote"
    );
    format!(
        "exec sh -c '{LAUNCHER}' flightdeck-sampler '{script}' {} {} {}",
        config.interval.millis(),
        config.links_arg(),
        u8::from(config.pod_nics)
    )
}

/// A sampling interval, 100 ms to 10 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Interval(u32);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntervalError {
    #[error("`{0}` is not a duration (write e.g. 1s, 500ms, 2.5s)")]
    Syntax(String),
    #[error("{0}: the interval must be between 100ms and 10s")]
    Range(String),
}

impl Interval {
    pub const MIN_MS: u32 = 100;
    pub const MAX_MS: u32 = 10_000;
    pub const DEFAULT: Interval = Interval(1000);

    pub fn from_millis(ms: u32) -> Result<Interval, IntervalError> {
        if (Self::MIN_MS..=Self::MAX_MS).contains(&ms) {
            Ok(Interval(ms))
        } else {
            Err(IntervalError::Range(format!("{ms}ms")))
        }
    }

    /// `1s`, `500ms`, `2.5s`, `0.1s`; a bare number is seconds.
    pub fn parse(text: &str) -> Result<Interval, IntervalError> {
        let t = text.trim();
        let syntax = || IntervalError::Syntax(text.to_string());
        let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
            (n, 1.0)
        } else if let Some(n) = t.strip_suffix('s') {
            (n, 1000.0)
        } else {
            (t, 1000.0)
        };
        let num = num.trim();
        if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit() || c == '.') {
            return Err(syntax());
        }
        let v: f64 = num.parse().map_err(|_| syntax())?;
        let ms = (v * scale).round();
        if !(f64::from(Self::MIN_MS)..=f64::from(Self::MAX_MS)).contains(&ms) {
            return Err(IntervalError::Range(t.to_string()));
        }
        Ok(Interval(ms as u32))
    }

    pub fn millis(self) -> u32 {
        self.0
    }

    pub fn duration(self) -> Duration {
        Duration::from_millis(u64::from(self.0))
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_multiple_of(1000) {
            write!(f, "{}s", self.0 / 1000)
        } else {
            write!(f, "{}ms", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_parse_in_range_only() {
        let ok: &[(&str, u32)] = &[
            ("1s", 1000),
            ("500ms", 500),
            ("2.5s", 2500),
            ("0.1s", 100),
            ("10s", 10_000),
            ("3", 3000),
            (" 250ms ", 250),
        ];
        for (t, ms) in ok {
            assert_eq!(Interval::parse(t).map(Interval::millis), Ok(*ms), "{t}");
        }
        for bad in ["99ms", "0.05s", "11s", "0"] {
            assert!(
                matches!(Interval::parse(bad), Err(IntervalError::Range(_))),
                "{bad}"
            );
        }
        for bad in ["", "s", "fast", "-1s", "1m", "1e3ms"] {
            assert!(
                matches!(Interval::parse(bad), Err(IntervalError::Syntax(_))),
                "{bad}"
            );
        }
        assert_eq!(Interval::parse("1500ms").unwrap().to_string(), "1500ms");
        assert_eq!(Interval::DEFAULT.to_string(), "1s");
    }

    #[test]
    fn the_script_survives_single_quoting() {
        assert!(!SCRIPT.contains('\''));
        assert!(!LAUNCHER.contains('\''));
        let cmd = command(Config::new(Interval::DEFAULT));
        assert!(
            cmd.starts_with("exec sh -c '") && cmd.ends_with("' 1000 0 0"),
            "{cmd}"
        );
        assert!(!script().lines().any(|l| l.trim_start().starts_with('#')));
    }

    /// The launcher runs the sampler under bash where there is one (its clock is then
    /// `$EPOCHREALTIME`'s), else under sh.
    #[test]
    fn the_launcher_prefers_bash() {
        let cmd = command(Config::new(Interval::from_millis(100).unwrap()));
        let out = std::process::Command::new("timeout")
            .args(["0.5", "sh", "-c", &cmd])
            .output()
            .expect("run the launcher");
        let text = String::from_utf8_lossy(&out.stdout);
        let hello = text.lines().next().unwrap_or_default();
        let bash = std::process::Command::new("sh")
            .args(["-c", "command -v bash"])
            .status()
            .is_ok_and(|s| s.success());
        let clock = if bash { "clock=us" } else { "clock=" };
        assert!(
            hello.starts_with("@fd 1 ms=100 ") && hello.contains(clock),
            "{hello}"
        );
        assert!(text.contains("\n@e 1\n"), "{text}");
    }

    /// Gke review H6: with root, a NIC that sits in another process's network namespace
    /// (as a GKE Device network's NIC sits in the job pod's) is sampled from there, named
    /// after that namespace's host name; namespaces with only lo and eth0 are left out.
    #[test]
    fn nics_in_other_namespaces_are_sampled_as_root() {
        let root = std::process::Command::new("id")
            .arg("-u")
            .output()
            .map(|o| o.stdout == b"0\n");
        if !matches!(root, Ok(true)) {
            eprintln!("skipped: needs root (network namespaces)");
            return;
        }
        let ns = format!("fdsampler{}", std::process::id());
        let sh = |c: &str| {
            let o = std::process::Command::new("sh").args(["-c", c]).output().unwrap();
            assert!(o.status.success(), "{c}: {}", String::from_utf8_lossy(&o.stderr));
        };
        sh(&format!(
            "ip netns add {ns} && ip -n {ns} link add fdpod1 type veth peer name fdpod2 && ip -n {ns} link set fdpod1 up"
        ));
        let mut holder = std::process::Command::new("ip")
            .args(["netns", "exec", &ns, "sleep", "30"])
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let run = |pods: &str| {
            std::process::Command::new("timeout")
                .args([
                    "1.5",
                    "sh",
                    "-c",
                    &script(),
                    "flightdeck-sampler",
                    "300",
                    "0",
                    pods,
                ])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (on, off) = (run("1"), run("0"));
        let (out, off) = (on.wait_with_output(), off.wait_with_output().unwrap());
        let _ = holder.kill();
        let _ = holder.wait();
        sh(&format!("ip netns del {ns}"));
        let text = String::from_utf8_lossy(&out.unwrap().stdout).to_string();
        let mut p = crate::telemetry::parse::RecordParser::new();
        let mut items = Vec::new();
        p.push(text.as_bytes(), &mut items);
        let names: Vec<String> = items
            .iter()
            .find_map(|i| match i {
                crate::telemetry::parse::Item::Record(r) => {
                    Some(r.nics.iter().map(|n| n.name.clone()).collect())
                }
                _ => None,
            })
            .expect("a record");
        assert!(names.iter().any(|n| n.ends_with("/fdpod1")), "{names:?}\n{text}");
        assert!(!names.iter().any(|n| n.ends_with("/lo")), "{names:?}");
        let off = String::from_utf8_lossy(&off.stdout);
        assert!(off.contains("@e 1") && !off.contains("@ns "), "{off}");
    }

    /// The sampler under every shell this machine has: a hello, then records that are
    /// framed and numbered, at about the interval asked for.
    #[test]
    fn the_script_runs_under_dash_and_bash() {
        let shells: Vec<(&str, std::process::Child)> = ["sh", "dash", "bash"]
            .into_iter()
            .filter(|shell| {
                std::process::Command::new("sh")
                    .args(["-c", &format!("command -v {shell}")])
                    .output()
                    .map(|o| o.status.success())
                    .unwrap_or(false)
            })
            .map(|shell| {
                let child = std::process::Command::new("timeout")
                    .args(["1.5", shell, "-c", &script(), "flightdeck-sampler", "200"])
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .expect("run the sampler");
                (shell, child)
            })
            .collect();
        for (shell, child) in shells {
            let out = child.wait_with_output().expect("sampler output");
            let text = String::from_utf8_lossy(&out.stdout);
            let hello = text.lines().next().unwrap_or_default();
            assert!(hello.starts_with("@fd 1 ms=200 clock="), "{shell}: {hello}");
            let starts = text.lines().filter(|l| l.starts_with("@s ")).count();
            let ends: Vec<&str> = text.lines().filter(|l| l.starts_with("@e ")).collect();
            assert!(
                (4..=9).contains(&ends.len()),
                "{shell}: {} records in 1.5 s at 200 ms",
                ends.len()
            );
            assert!(starts >= ends.len());
            assert_eq!(ends[0], "@e 1");
            assert!(text.contains("\n@ib\n"), "{shell}");
            assert!(
                text.lines().any(|l| l.trim_start().starts_with("lo:")),
                "{shell}: {text}"
            );
        }
    }
}
