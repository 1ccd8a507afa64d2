//! `flightdeck exec FLEET -- true` against `pdsh -R ssh -w HOSTS true` on the same 32
//! testbed nodes behind one bastion, side by side in one run; then the stream
//! throughput of `cat` of 200 MB through one exec channel.
//!
//! Needs root (network namespaces); run: `cargo bench --bench exec_fanout`.
//! pdsh is driven the way an operator would: OpenSSH with ProxyJump through the bastion
//! from ~/.ssh/config, known_hosts checked, fanout 32.

#[path = "../tests/support/mod.rs"]
mod support;
use support::testbed;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time(mut cmd: Command) -> Duration {
    let start = Instant::now();
    let out = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run");
    let d = start.elapsed();
    assert!(
        out.status.success(),
        "{:?} failed: {}",
        cmd,
        String::from_utf8_lossy(&out.stderr)
    );
    d
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let nodes = 32;
    let Some(tb) = testbed::Testbed::new(nodes, 0) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let ssh = home.path().join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::copy(&tb.known_hosts, ssh.join("known_hosts")).unwrap();
    let key = tb.user_key.display().to_string();
    std::fs::write(
        ssh.join("config"),
        format!(
            "Host 10.88.0.*\n  User root\n  IdentityFile {key}\n  ProxyJump root@{b}\nHost {b}\n  User root\n  IdentityFile {key}\n",
            b = tb.bastion.addr
        ),
    )
    .unwrap();
    let fleet = home.path().join("tb.yaml");
    std::fs::write(&fleet, tb.fleet_yaml("tb")).unwrap();
    let bin = env!("CARGO_BIN_EXE_flightdeck");
    let fd = |args: &[&str]| {
        let mut c = Command::new(bin);
        c.args(args)
            .env("HOME", home.path())
            .env_remove("SSH_AUTH_SOCK")
            .env("FLIGHTDECK_HOME", home.path().join("fd"));
        c
    };
    let applied = fd(&["fleet", "apply", fleet.to_str().unwrap(), "--yes"])
        .output()
        .unwrap();
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    let hosts: Vec<String> = tb.nodes.iter().map(|n| n.addr.clone()).collect();
    let hosts = hosts.join(",");
    let pdsh = || {
        let mut c = Command::new("pdsh");
        c.args(["-R", "ssh", "-f", "32", "-w", &hosts, "true"])
            .env("HOME", home.path())
            .env_remove("SSH_AUTH_SOCK");
        c
    };
    let runs = 7;
    let (mut ours, mut theirs) = (vec![], vec![]);
    // Warm both once, then alternate so load affects both alike.
    time(fd(&["exec", "tb", "--", "true"]));
    time(pdsh());
    for _ in 0..runs {
        ours.push(time(fd(&["exec", "tb", "--", "true"])));
        theirs.push(time(pdsh()));
    }
    let (o, t) = (median(ours), median(theirs));
    println!("exec `true` on {nodes} nodes behind a bastion, median of {runs}:");
    println!("  flightdeck exec        {:>8.1} ms", o.as_secs_f64() * 1e3);
    println!("  pdsh -R ssh (OpenSSH)  {:>8.1} ms", t.as_secs_f64() * 1e3);
    println!(
        "  ratio flightdeck/pdsh  {:>8.2}",
        o.as_secs_f64() / t.as_secs_f64()
    );

    // Throughput: 200 MB of output through one exec channel (node 0, through the bastion).
    let mb = 200;
    let cmd = format!("head -c {}000000 /dev/zero", mb);
    let mut samples = vec![];
    for _ in 0..3 {
        samples.push(time(fd(&["exec", "tb", "--nodes", "0", "--json", "--", &cmd])));
    }
    let d = median(samples);
    println!(
        "cat of {mb} MB through one exec channel (JSON, buffered): {:.0} MB/s ({:.2} s)",
        mb as f64 / d.as_secs_f64(),
        d.as_secs_f64()
    );
    let mut raw = vec![];
    for _ in 0..3 {
        raw.push(time(fd(&["exec", "tb", "--nodes", "0", "--", &cmd])));
    }
    let d = median(raw);
    println!(
        "cat of {mb} MB through one exec channel (line-prefixed stream): {:.0} MB/s ({:.2} s)",
        mb as f64 / d.as_secs_f64(),
        d.as_secs_f64()
    );
}
