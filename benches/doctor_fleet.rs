//! `flightdeck doctor` on a testbed fleet of N nodes (default 64; sshd in network
//! namespaces behind one bastion, each node a machine with the nvidia-smi double and two
//! data NICs): the wall time of a whole examination (the node script on every node, the
//! comparisons, the pairs of the rounds of disjoint pairs probed at once and the second look at any suspect),
//! three runs, median. Every run must have every node answer and every pair of the
//! schedule probed both ways on both NICs, so a doctor that skips work cannot pass for a
//! fast one; what it found is reported (a healthy fleet: nothing).
//!
//! Needs root (network namespaces); run: `cargo bench --bench doctor_fleet -- 16 64 256`
//! (node counts, one testbed after the other; also `DOCTOR_BENCH_NODES`, default "16").

#[path = "../tests/support/mod.rs"]
mod support;
use support::testbed::Testbed;

use std::time::{Duration, Instant};

fn main() {
    let mut sizes: Vec<usize> = std::env::args().skip(1).filter_map(|v| v.parse().ok()).collect();
    if sizes.is_empty() {
        sizes = std::env::var("DOCTOR_BENCH_NODES")
            .unwrap_or_else(|_| "16".into())
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
    }
    for n in sizes {
        bench(n);
    }
}

fn bench(n: usize) {
    // Each node with a home for root of its own, as machines have: without one, every
    // login's shell reads the bench machine's own ~/.bashrc (on the 2-core dev machine a
    // pyenv init: some 30 processes a login), which is that machine's cost, not a node's.
    let Some(tb) = Testbed::new_machines_with_homes(n, 2) else {
        eprintln!("doctor_fleet: no testbed (needs root); nothing measured");
        return;
    };
    for node in &tb.nodes {
        node.add_gpu_double();
    }
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    // The same fleet's logins alone, for comparison: `exec -- echo ok` on every node (a
    // login and a shell each, the path the doctor's node script takes), and on one node.
    for (what, args) in [
        ("every node", vec!["--no-mux", "exec", "lab", "--", "echo", "ok"]),
        (
            "one node",
            vec!["--no-mux", "exec", "lab", "--nodes", "0", "--", "echo", "ok"],
        ),
    ] {
        let start = Instant::now();
        let out = support::flightdeck(home.path(), &args);
        let ok = String::from_utf8_lossy(&out.stdout).matches(" ok").count();
        eprintln!(
            "{n} nodes: exec echo ok on {what}: {:.2} s ({ok} answered)",
            start.elapsed().as_secs_f64()
        );
    }
    let mut times = vec![];
    let mut found = String::new();
    for run in 0..3 {
        let start = Instant::now();
        let cpu0 = children_cpu();
        let busy0 = machine_busy();
        let out = support::flightdeck(home.path(), &["doctor", "lab", "--json"]);
        let took = start.elapsed();
        let cpu = children_cpu() - cpu0;
        let busy = machine_busy() - busy0;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
        });
        eprintln!(
            "{n} nodes, run {run}: {:.1} s (flightdeck's own CPU {:.1} s; the machine's, every process, {:.1} s)",
            took.as_secs_f64(),
            cpu,
            busy
        );
        // Where the time went, as the doctor logged it (node phase, probe sessions, probes),
        // the node script's sections summed up over the nodes.
        let lines = phases(home.path());
        for line in lines.iter().filter(|l| !l.starts_with("doctor: script on ")) {
            eprintln!("    {line}");
        }
        for line in script_summary(&lines) {
            eprintln!("    {line}");
        }
        let findings = v["findings"].as_array().unwrap();
        let gpus = findings
            .iter()
            .filter(|f| f["check"] == "gpus" && f["outcome"] == "pass")
            .count();
        assert_eq!(gpus, n, "every node answered");
        // Every pair of the schedule probed both ways on both NICs.
        let pairs: usize = flightdeck::doctor::net::rounds(n).iter().map(Vec::len).sum();
        let probes: u64 = findings
            .iter()
            .filter(|f| f["check"] == "reach" && f["outcome"] == "pass")
            .filter_map(|f| f["what"].as_str()?.split(' ').nth(1)?.parse::<u64>().ok())
            .sum();
        let bad: Vec<String> = findings
            .iter()
            .filter(|f| f["outcome"] == "fail" || f["outcome"] == "warn")
            .filter(|f| f["check"] != "sysctl")
            .map(|f| {
                format!(
                    "{} {}: {}",
                    f["node"].as_str().unwrap_or("fleet"),
                    f["check"],
                    f["what"]
                )
            })
            .collect();
        assert!(
            probes == 2 * 2 * pairs as u64 || bad.iter().any(|b| b.contains("reach")),
            "every pair probed: {probes} probes, {bad:#?}"
        );
        let mut by_check: std::collections::BTreeMap<String, usize> = Default::default();
        for f in findings
            .iter()
            .filter(|f| f["outcome"] == "fail" || f["outcome"] == "warn")
            .filter(|f| f["check"] != "sysctl")
        {
            *by_check
                .entry(f["check"].as_str().unwrap_or("?").to_string())
                .or_default() += 1;
        }
        eprintln!(
            "    {} findings, {} problems besides the TCP buffers {by_check:?}{}",
            findings.len(),
            bad.len(),
            bad.first().map(|b| format!(", e.g. {b}")).unwrap_or_default()
        );
        found = if bad.is_empty() {
            "no problem".to_string()
        } else {
            format!("{} problems, e.g. {}", bad.len(), bad[0])
        };
        times.push(took);
    }
    // The first phase alone (every check but the matrix): the node script on every node
    // and the comparisons.
    let only: Vec<&str> = flightdeck::doctor::CHECKS
        .iter()
        .map(|c| c.id)
        .filter(|c| *c != "reach")
        .collect();
    let only = only.join(",");
    let start = Instant::now();
    let busy0 = machine_busy();
    let out = support::flightdeck(home.path(), &["doctor", "lab", "--json", "--only", &only]);
    let nodes_phase = start.elapsed();
    let busy = machine_busy() - busy0;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gpus = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "gpus")
        .count();
    assert_eq!(gpus, n, "every node answered");
    println!(
        "doctor on {n} testbed nodes, every check but the matrix: {:.1} s (the machine's CPU, every process, {:.1} s)",
        nodes_phase.as_secs_f64(),
        busy
    );
    times.sort();
    let median: Duration = times[1];
    println!(
        "doctor on {n} testbed nodes (2 data NICs each, behind one bastion): median {:.1} s of 3 runs (min {:.1} s, max {:.1} s); last run: {found}",
        median.as_secs_f64(),
        times[0].as_secs_f64(),
        times[2].as_secs_f64()
    );
}

/// The node script's time per section over the nodes (the doctor's `doctor: script on
/// NODE: first line A ms, done B ms after the start; on the node C ms: SECTION MS, ...`
/// lines): median and max of each, in the order the sections ran.
fn script_summary(lines: &[String]) -> Vec<String> {
    let mut order: Vec<String> = vec![];
    let mut by: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    let mut add = |name: &str, v: u64| {
        if !by.contains_key(name) {
            order.push(name.to_string());
        }
        by.entry(name.to_string()).or_default().push(v);
    };
    let num = |t: &str| t.trim().split(' ').next()?.parse::<u64>().ok();
    for l in lines {
        let Some(rest) = l.strip_prefix("doctor: script on ") else {
            continue;
        };
        let Some((_, rest)) = rest.split_once(": first line ") else {
            continue;
        };
        let Some((first, rest)) = rest.split_once(", done ") else {
            continue;
        };
        let Some((done, rest)) = rest.split_once(" after the start; on the node ") else {
            continue;
        };
        let Some((whole, sections)) = rest.split_once(" ms: ") else {
            continue;
        };
        for (name, v) in [("first line", first), ("done", done), ("on the node", whole)] {
            if let Some(v) = num(v) {
                add(name, v);
            }
        }
        for sec in sections.split(", ") {
            if let Some((name, v)) = sec.rsplit_once(' ') {
                if let Ok(v) = v.parse() {
                    add(name, v);
                }
            }
        }
    }
    if order.is_empty() {
        return vec![];
    }
    let mut out = vec![format!(
        "node script over {} nodes, ms (median/max): ",
        by.get("done").map_or(0, Vec::len)
    )];
    let cells: Vec<String> = order
        .iter()
        .map(|name| {
            let v = by.get_mut(name).unwrap();
            v.sort();
            format!("{name} {}/{}", v[v.len() / 2], v[v.len() - 1])
        })
        .collect();
    out[0].push_str(&cells.join(", "));
    out
}

/// The doctor's lines about its phases in the state dir's log, since the last call (the
/// log is emptied after reading).
fn phases(home: &std::path::Path) -> Vec<String> {
    let mut out = vec![];
    let mut stack = vec![home.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "flightdeck.log") {
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                out.extend(
                    text.lines()
                        .filter_map(|l| l.find("doctor: ").map(|i| l[i..].to_string())),
                );
                let _ = std::fs::write(&p, "");
            }
        }
    }
    out
}

/// CPU seconds (user + system) of the children this process has waited for: the
/// flightdeck processes it ran.
/// The CPU time this machine spent (every process: the testbed's nodes, sshd, the pings,
/// flightdeck), in seconds, from /proc/stat's first line (user, nice, system, irq,
/// softirq, steal; not idle or iowait).
fn machine_busy() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    [0, 1, 2, 5, 6, 7]
        .iter()
        .filter_map(|&i| ticks.get(i))
        .sum::<u64>() as f64
        / hz
}

fn children_cpu() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(u.ru_utime) + secs(u.ru_stime)
}
