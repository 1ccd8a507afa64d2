//! `flightdeck doctor` on a testbed fleet of N nodes (default 64; sshd in network
//! namespaces behind one bastion, each node a machine with the nvidia-smi double and two
//! data NICs): the wall time of a whole examination (the node script on every node, the
//! comparisons, the reachability matrix of N-1 rounds), three runs, median. Every run
//! must find no failure on the healthy fleet, so a doctor that skips work cannot pass
//! for a fast one.
//!
//! Needs root (network namespaces); run: `cargo bench --bench doctor_fleet`.
//! Environment: `DOCTOR_BENCH_NODES` (default 64).

#[path = "../tests/support/mod.rs"]
mod support;
use support::testbed::Testbed;

use std::time::{Duration, Instant};

fn main() {
    let n: usize = std::env::var("DOCTOR_BENCH_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let Some(tb) = Testbed::new_machines(n, 2) else {
        eprintln!("doctor_fleet: no testbed (needs root); nothing measured");
        return;
    };
    for node in &tb.nodes {
        node.add_gpu_double();
    }
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    let mut times = vec![];
    for run in 0..3 {
        let start = Instant::now();
        let out = support::flightdeck(home.path(), &["doctor", "lab", "--json"]);
        let took = start.elapsed();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
        });
        let findings = v["findings"].as_array().unwrap();
        let fails: Vec<&serde_json::Value> = findings.iter().filter(|f| f["outcome"] == "fail").collect();
        assert!(fails.is_empty(), "a healthy fleet: {fails:#?}");
        let probes: u64 = findings
            .iter()
            .filter(|f| f["check"] == "reach" && f["outcome"] == "pass")
            .filter_map(|f| {
                // "eth1: 4032 probes, 80640/80640 answered, median ..."
                f["what"].as_str()?.split(' ').nth(1)?.parse::<u64>().ok()
            })
            .sum();
        eprintln!(
            "run {run}: {:.1} s, {} findings, {probes} probe pairs",
            took.as_secs_f64(),
            findings.len()
        );
        times.push(took);
    }
    times.sort();
    let median: Duration = times[1];
    println!(
        "doctor on {n} testbed nodes (2 data NICs each, behind one bastion): median {:.1} s of 3 runs (min {:.1} s, max {:.1} s)",
        median.as_secs_f64(),
        times[0].as_secs_f64(),
        times[2].as_secs_f64()
    );
}
