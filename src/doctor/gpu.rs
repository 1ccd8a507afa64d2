//! Readers of `nvidia-smi`'s outputs and of the kernel log's Xid lines. Pure: text in,
//! facts out. The formats are the ones recorded on 2× H200 (tests/fixtures/doctor).

/// The `--query-gpu` fields the doctor asks for, in order (the node script passes them).
pub const QUERY_FIELDS: &str = "index,name,uuid,driver_version,pci.bus_id,persistence_mode,\
ecc.errors.uncorrected.volatile.total,ecc.errors.uncorrected.aggregate.total,retired_pages.pending,\
remapped_rows.pending,remapped_rows.failure,clocks_event_reasons.active,clocks.current.sm,\
clocks.max.sm,temperature.gpu,power.draw,power.limit";

/// The `--query-compute-apps` fields the doctor asks for, in order: the GPU, the process,
/// its GPU memory (`used_memory` is `used_gpu_memory`'s other name in `nvidia-smi
/// --help-query-compute-apps`).
pub const APPS_FIELDS: &str = "gpu_uuid,pid,used_memory";

/// A compute process on a GPU, as the node's `procs` section reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GpuProcess {
    pub gpu_uuid: String,
    pub pid: u32,
    /// GPU memory in MiB, where the driver says (`[N/A]` in some containers).
    pub mem_mib: Option<u64>,
    /// From `ps`: the user, seconds since it started, the command line; `None` when `ps`
    /// did not list it (another PID namespace, or it ended meanwhile).
    pub user: Option<String>,
    pub age_s: Option<u64>,
    pub command: Option<String>,
    /// The flightdeck work it belongs to (`job ID` or `run ID`), by its session or its
    /// environment.
    pub owner: Option<String>,
}

/// The `procs` section: `app UUID, PID, MEM MiB` lines of `--query-compute-apps`, `ps PID
/// SID USER ETIMES ARGS` lines, `env PID FLIGHTDECK_JOB_ID=ID` (or `FLIGHTDECK_RUN_ID=ID`,
/// an NCCL run's rank) and `fd DIR LEADER` lines
/// (flightdeck's detached work still running: `~/.flightdeck/jobs/ID/RANK` or
/// `~/.flightdeck/runs/ID`, its session leader).
pub fn parse_procs(text: &str) -> Vec<GpuProcess> {
    let mut apps: Vec<GpuProcess> = vec![];
    let mut ps: std::collections::BTreeMap<u32, (u32, String, u64, String)> = Default::default();
    let mut env: std::collections::BTreeMap<u32, String> = Default::default();
    let mut sessions: Vec<(u32, String)> = vec![];
    for l in text.lines() {
        let (kind, rest) = l.split_once(' ').unwrap_or((l, ""));
        match kind {
            "app" => {
                let f: Vec<&str> = rest.split(',').map(str::trim).collect();
                let (Some(uuid), Some(Ok(pid))) = (f.first(), f.get(1).map(|p| p.parse::<u32>())) else {
                    continue;
                };
                apps.push(GpuProcess {
                    gpu_uuid: uuid.to_string(),
                    pid,
                    mem_mib: f.get(2).and_then(|m| number(m)).map(|m| m as u64),
                    user: None,
                    age_s: None,
                    command: None,
                    owner: None,
                });
            }
            "ps" => {
                let mut w = rest.split_whitespace();
                let (Some(Ok(pid)), Some(Ok(sid)), Some(user), Some(Ok(age))) = (
                    w.next().map(str::parse::<u32>),
                    w.next().map(str::parse::<u32>),
                    w.next(),
                    w.next().map(str::parse::<u64>),
                ) else {
                    continue;
                };
                let args: Vec<&str> = w.collect();
                ps.insert(pid, (sid, user.to_string(), age, args.join(" ")));
            }
            "env" => {
                if let Some((pid, kv)) = rest.split_once(' ') {
                    let owner = match kv.split_once('=') {
                        Some(("FLIGHTDECK_JOB_ID", id)) => format!("job {id}"),
                        // An NCCL run's rank (src/nccl/runner.rs `launch_command`).
                        Some(("FLIGHTDECK_RUN_ID", id)) => format!("run {id}"),
                        _ => continue,
                    };
                    if let Ok(pid) = pid.parse() {
                        env.entry(pid).or_insert(owner);
                    }
                }
            }
            "fd" => {
                if let Some((dir, leader)) = rest.rsplit_once(' ') {
                    let Ok(leader) = leader.trim().parse() else {
                        continue;
                    };
                    // `.../.flightdeck/jobs/ID/RANK` or `.../.flightdeck/runs/ID`.
                    let parts: Vec<&str> = dir.rsplit('/').collect();
                    let owner = match parts.as_slice() {
                        [_rank, id, "jobs", ..] => format!("job {id}"),
                        [id, "runs", ..] => format!("run {id}"),
                        _ => continue,
                    };
                    sessions.push((leader, owner));
                }
            }
            _ => {}
        }
    }
    for a in &mut apps {
        if let Some((sid, user, age, args)) = ps.get(&a.pid) {
            a.user = Some(user.clone());
            a.age_s = Some(*age);
            a.command = Some(args.clone());
            a.owner = sessions
                .iter()
                .find(|(leader, _)| leader == sid || *leader == a.pid)
                .map(|(_, o)| o.clone());
        }
        if a.owner.is_none() {
            a.owner = env.get(&a.pid).cloned();
        }
    }
    apps
}

/// `3 h 12 min`, `42 s`: how long a process has run.
pub fn age(s: u64) -> String {
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min", s / 60),
        3600..=86399 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86400, s % 86400 / 3600),
    }
}

/// One GPU as `nvidia-smi --query-gpu=QUERY_FIELDS --format=csv` reports it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Gpu {
    pub index: u32,
    pub name: String,
    pub uuid: String,
    pub driver: String,
    pub bus_id: String,
    pub persistence: Option<bool>,
    /// Uncorrectable ECC errors since the driver loaded, and over the GPU's life.
    pub ecc_volatile: Option<u64>,
    pub ecc_aggregate: Option<u64>,
    /// Pages waiting to be retired (older GPUs) or rows waiting to be remapped (A100+):
    /// both want a GPU reset.
    pub retired_pending: Option<bool>,
    pub remap_pending: Option<bool>,
    pub remap_failure: Option<bool>,
    /// `clocks_event_reasons.active`, the bitmask of NVML's clocks event reasons.
    pub event_reasons: Option<u64>,
    pub sm_mhz: Option<u32>,
    pub sm_max_mhz: Option<u32>,
    pub temperature_c: Option<u32>,
    pub power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    /// The line as printed (evidence).
    pub line: String,
}

/// A number out of `345 MHz`, `78.15 W`, `0`; `None` for `[N/A]`, `[Not Supported]`.
fn number(v: &str) -> Option<f64> {
    v.split_whitespace().next()?.parse().ok()
}

fn yes_no(v: &str) -> Option<bool> {
    match v.trim() {
        "Yes" | "Enabled" => Some(true),
        "No" | "Disabled" => Some(false),
        _ => None,
    }
}

/// The GPUs of a `--query-gpu` CSV (with its header line); lines that do not parse are
/// left out.
pub fn parse_query(csv: &str) -> Vec<Gpu> {
    csv.lines()
        .filter(|l| !l.starts_with("index"))
        .filter_map(|line| {
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            if f.len() < 17 {
                return None;
            }
            Some(Gpu {
                index: f[0].parse().ok()?,
                name: f[1].to_string(),
                uuid: f[2].to_string(),
                driver: f[3].to_string(),
                bus_id: f[4].to_string(),
                persistence: yes_no(f[5]),
                ecc_volatile: number(f[6]).map(|v| v as u64),
                ecc_aggregate: number(f[7]).map(|v| v as u64),
                retired_pending: yes_no(f[8]),
                remap_pending: yes_no(f[9]),
                remap_failure: yes_no(f[10]),
                event_reasons: u64::from_str_radix(f[11].trim_start_matches("0x"), 16).ok(),
                sm_mhz: number(f[12]).map(|v| v as u32),
                sm_max_mhz: number(f[13]).map(|v| v as u32),
                temperature_c: number(f[14]).map(|v| v as u32),
                power_w: number(f[15]),
                power_limit_w: number(f[16]),
                line: line.trim().to_string(),
            })
        })
        .collect()
}

/// NVML's clocks event reasons (`nvmlClocksEventReason*`), bit and words.
pub const EVENT_REASONS: [(u64, &str); 9] = [
    (0x1, "idle"),
    (0x2, "applications clocks setting"),
    (0x4, "SW power cap"),
    (0x8, "HW slowdown"),
    (0x10, "sync boost"),
    (0x20, "SW thermal slowdown"),
    (0x40, "HW thermal slowdown"),
    (0x80, "HW power brake slowdown"),
    (0x100, "display clock setting"),
];

/// The reasons a bitmask holds, in words.
pub fn reasons(mask: u64) -> Vec<&'static str> {
    EVENT_REASONS
        .iter()
        .filter(|(bit, _)| mask & bit != 0)
        .map(|(_, w)| *w)
        .collect()
}

/// Reasons that mean the GPU is held down by its board: HW slowdown, HW thermal, HW power
/// brake (a fault to look at).
pub const HARD_THROTTLE: u64 = 0x8 | 0x40 | 0x80;

/// Reasons worth a look but not a fault: applications clocks setting (a lock or an
/// application clock below the maximum), SW thermal slowdown (seen at 33 C on a busy
/// H200 with clocks locked, tests/fixtures/doctor/h200x1). SW power cap (at the power
/// limit under load) is how a busy GPU runs, not a problem.
pub const SOFT_THROTTLE: u64 = 0x2 | 0x20;

/// A GPU at work (not idle) at under half its maximum SM clock with no event reason: its
/// clocks are locked (`nvidia-smi -lgc`), which no reason reports.
pub fn locked_low(g: &Gpu) -> bool {
    match (g.event_reasons, g.sm_mhz, g.sm_max_mhz) {
        (Some(r), Some(now), Some(max)) => {
            r & 0x1 == 0 && r & (HARD_THROTTLE | SOFT_THROTTLE | 0x4) == 0 && now * 2 < max
        }
        _ => false,
    }
}

/// The driver's and the CUDA version of `nvidia-smi`'s banner.
pub fn banner_versions(smi: &str) -> (Option<String>, Option<String>) {
    let after = |key: &str| {
        smi.lines().find_map(|l| {
            let i = l.find(key)?;
            l[i + key.len()..].split_whitespace().next().map(str::to_string)
        })
    };
    (after("Driver Version:"), after("CUDA Version:"))
}

/// `nvidia-smi topo -m`: the GPUs' rows, each with its links to the other GPUs (`NV18`,
/// `SYS`, ...) and its NUMA affinity.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Topo {
    pub gpus: Vec<String>,
    /// `links[i][j]`: the connection from GPU i to GPU j as printed (`X` on the diagonal).
    pub links: Vec<Vec<String>>,
    /// Each GPU's NUMA node, when printed.
    pub numa: Vec<Option<u32>>,
    /// The NICs the matrix lists (`NIC0`..), with the names of its legend.
    pub nics: Vec<(String, String)>,
}

/// Strip ANSI control sequences (`topo -m` underlines its header on a terminal-like run).
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

pub fn parse_topo(text: &str) -> Option<Topo> {
    let text = strip_ansi(text);
    let mut lines = text.lines();
    let header = lines.find(|l| l.trim_start().starts_with("GPU0"))?;
    let cols: Vec<&str> = header
        .split('\t')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    let gpu_cols = cols
        .iter()
        .take_while(|c| c.starts_with("GPU") && c[3..].parse::<u32>().is_ok())
        .count();
    let numa_col = cols.iter().position(|c| *c == "NUMA Affinity");
    let mut topo = Topo {
        gpus: vec![],
        links: vec![],
        numa: vec![],
        nics: vec![],
    };
    for l in lines.by_ref() {
        let f: Vec<&str> = l.split('\t').map(str::trim).collect();
        let Some(first) = f.first() else { continue };
        if first.starts_with("GPU") && first[3..].parse::<u32>().is_ok() {
            // A row: its name, one column per GPU, then the NICs' columns and affinities;
            // empty fields between tabs are padding.
            let vals: Vec<&str> = f[1..].iter().copied().filter(|v| !v.is_empty()).collect();
            topo.gpus.push(first.to_string());
            topo.links
                .push(vals.iter().take(gpu_cols).map(|v| v.to_string()).collect());
            let numa = numa_col.and_then(|c| vals.get(c)).and_then(|v| v.parse().ok());
            topo.numa.push(numa);
        } else if first.trim().starts_with("NIC") && first.contains(':') {
            // The legend: `  NIC0: mlx5_0`.
            let (k, v) = first.trim().split_once(':')?;
            topo.nics.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    (!topo.gpus.is_empty()).then_some(topo)
}

/// Links in `NV18` form.
pub fn nvlinks(v: &str) -> Option<u32> {
    v.strip_prefix("NV")?.parse().ok()
}

/// A GPU's NVLinks: its name, and each link's number and speed in GB/s (`None`: inactive).
pub type GpuLinks = (String, Vec<(u32, Option<f64>)>);

/// `nvidia-smi nvlink -s`: per GPU, each link's speed in GB/s, `None` when inactive.
pub fn parse_nvlink(text: &str) -> Vec<GpuLinks> {
    let mut out: Vec<GpuLinks> = vec![];
    for l in text.lines() {
        let t = l.trim();
        if t.starts_with("GPU ") {
            let name = t.split(':').next().unwrap_or(t).to_string();
            out.push((name, vec![]));
        } else if let Some(rest) = t.strip_prefix("Link ") {
            let Some((n, v)) = rest.split_once(':') else {
                continue;
            };
            let Ok(n) = n.trim().parse() else { continue };
            let speed = v.split_whitespace().next().and_then(|s| s.parse().ok());
            if let Some(g) = out.last_mut() {
                g.1.push((n, speed));
            }
        }
    }
    out
}

/// An Xid event of the kernel log.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Xid {
    pub code: u32,
    /// The PCI address the driver names (`PCI:0000:3b:00`).
    pub pci: String,
    pub line: String,
}

/// Xid lines of a kernel log (`NVRM: Xid (PCI:0000:3b:00): 79, pid=...`).
pub fn parse_xids(log: &str) -> Vec<Xid> {
    log.lines()
        .filter_map(|l| {
            let i = l.find("NVRM: Xid (")?;
            let rest = &l[i + "NVRM: Xid (".len()..];
            let (pci, rest) = rest.split_once("):")?;
            let code = rest
                .trim_start()
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()?;
            Some(Xid {
                code,
                pci: pci.to_string(),
                line: l.trim().to_string(),
            })
        })
        .collect()
}

/// What an Xid means and whether it is a hardware fault (NVIDIA's Xid catalogue).
pub fn xid_meaning(code: u32) -> (&'static str, bool) {
    match code {
        13 => ("graphics engine exception (often the application)", false),
        31 => ("GPU memory page fault (often the application)", false),
        43 => ("GPU stopped processing (the application was killed)", false),
        45 => ("preemptive cleanup after an earlier error", false),
        48 => ("double-bit ECC error: reset the GPU", true),
        61 | 62 => ("internal micro-controller error", true),
        63 => ("ECC page retirement or row remapping recorded", true),
        64 => ("ECC page retirement or row remapping failed", true),
        68 => ("video processor exception", false),
        74 => ("NVLink error", true),
        79 => ("GPU has fallen off the bus", true),
        92 => ("high single-bit ECC error rate", true),
        94 => ("contained ECC error: the application must restart", true),
        95 => ("uncontained ECC error: reset the GPU", true),
        109 => ("context switch timeout", false),
        119 | 120 => ("GSP firmware error", true),
        121 => ("C2C link error", true),
        140 => ("ECC unrecovered error", true),
        144..=150 => ("NVLink or fabric error", true),
        _ => ("see NVIDIA's Xid catalogue", false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/doctor/h200x2/");

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!("{DIR}{name}")).unwrap()
    }

    #[test]
    fn the_recorded_query_of_two_h200s() {
        let gpus = parse_query(&fixture("query-gpu.csv"));
        assert_eq!(gpus.len(), 2);
        let g = &gpus[0];
        assert_eq!(g.name, "NVIDIA H200");
        assert_eq!(g.driver, "580.159.04");
        assert_eq!(g.persistence, Some(true));
        assert_eq!((g.ecc_volatile, g.ecc_aggregate), (Some(0), Some(0)));
        assert_eq!(g.retired_pending, None, "[N/A] on H200, which remaps rows");
        assert_eq!((g.remap_pending, g.remap_failure), (Some(false), Some(false)));
        assert_eq!(g.event_reasons, Some(1));
        assert_eq!(reasons(1), vec!["idle"]);
        assert_eq!((g.sm_mhz, g.sm_max_mhz), (Some(345), Some(1980)));
        assert_eq!(g.power_limit_w, Some(700.0));
    }

    #[test]
    fn the_recorded_banner_topology_and_links() {
        let (driver, cuda) = banner_versions(&fixture("nvidia-smi.txt"));
        assert_eq!(driver.as_deref(), Some("580.159.04"));
        assert_eq!(cuda.as_deref(), Some("13.0"));
        let t = parse_topo(&fixture("topo-m.txt")).unwrap();
        assert_eq!(t.gpus, vec!["GPU0", "GPU1"]);
        assert_eq!(t.links, vec![vec!["X", "NV18"], vec!["NV18", "X"]]);
        assert_eq!(t.numa, vec![Some(0), Some(0)]);
        assert_eq!(nvlinks("NV18"), Some(18));
        let l = parse_nvlink(&fixture("nvlink-s.txt"));
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].1.len(), 18);
        assert!(l
            .iter()
            .all(|(_, links)| links.iter().all(|(_, s)| *s == Some(26.562))));
        assert!(
            parse_xids(&fixture("dmesg-xid.txt")).is_empty(),
            "no Xid on a healthy machine"
        );
        // A busy H200 with clocks locked at 300: 345 MHz and no reason at all.
        let busy = std::fs::read_to_string(format!("{DIR}../h200x1/query-gpu-busy-lgc300.csv")).unwrap();
        let g = &parse_query(&busy)[0];
        assert_eq!((g.event_reasons, g.sm_mhz), (Some(0), Some(345)));
        assert!(locked_low(g));
        let idle = std::fs::read_to_string(format!("{DIR}../h200x1/query-gpu-idle-lgc300.csv")).unwrap();
        assert!(
            !locked_low(&parse_query(&idle)[0]),
            "idle clocks are low by design"
        );
        // Right after the reset: SW power cap and SW thermal slowdown, no HW reason.
        let after = std::fs::read_to_string(format!("{DIR}../h200x1/query-gpu-after-rgc.csv")).unwrap();
        let g = &parse_query(&after)[0];
        assert_eq!(g.event_reasons, Some(0x24));
        assert!(!locked_low(g));
        assert_eq!(reasons(0x24), vec!["SW power cap", "SW thermal slowdown"]);
        assert_eq!((0x24 & HARD_THROTTLE, 0x24 & SOFT_THROTTLE), (0, 0x20));
    }

    #[test]
    fn xid_lines_and_inactive_links() {
        let log =
            "[ 1234.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n\
                   [ 1240.0] NVRM: GPU at PCI:0000:3b:00: GPU-abc\n";
        let x = parse_xids(log);
        assert_eq!(x.len(), 1);
        assert_eq!((x[0].code, x[0].pci.as_str()), (79, "PCI:0000:3b:00"));
        assert_eq!(xid_meaning(79), ("GPU has fallen off the bus", true));
        let l = parse_nvlink(
            "GPU 0: NVIDIA H100 80GB HBM3 (UUID: x)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n",
        );
        assert_eq!(l[0].1, vec![(0, Some(26.562)), (1, None)]);
    }
}
