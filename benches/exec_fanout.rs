//! `flightdeck exec FLEET -- CMD` against `pdsh -R ssh -w HOSTS CMD` on the same testbed
//! nodes behind one bastion, side by side in one run; then the stream throughput of 200 MB
//! through one exec channel, side by side with OpenSSH's `ssh` through the same bastion.
//!
//! Needs root (network namespaces); run: `cargo bench --bench exec_fanout`.
//! pdsh is driven the way an operator would: OpenSSH with ProxyJump through the bastion
//! from an ssh config, known_hosts checked strictly, fanout 32. Every run's output is
//! checked (one `ok` per node, nothing on stderr), so a tool that fails fast or times
//! out cannot pass for a fast one.
//!
//! The fan-out is measured on two paths: through the bastion (from this machine), and
//! direct (every client run inside the bastion's namespace, which reaches the nodes
//! without a jump). On each: pdsh; flightdeck connecting itself (`--no-mux`); and
//! flightdeck through the connection holder (`flightdeck mux serve`), its first exec
//! (the holder connecting every node; three fresh holders, median) and its repeats.
//!
//! Environment: `EXEC_BENCH_NODES` (default 32; up to 1012); `EXEC_BENCH_RUNS` (default 7);
//! `EXEC_BENCH_THROUGHPUT=0` skips the throughput part; `EXEC_BENCH_HOLD=FILE` sets the
//! testbed up, writes shell exports (HOME, FLIGHTDECK_HOME, the first node, the bastion,
//! the ssh config) to FILE and keeps it up for three hours, for profiling by hand.

#[path = "../tests/support/mod.rs"]
mod support;
use support::testbed;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Run `cmd`, check it succeeded, and return how long it took and its stdout and stderr.
fn run(mut cmd: Command, keep_stdout: bool) -> (Duration, Vec<u8>, String) {
    cmd.stdout(if keep_stdout {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stderr(Stdio::piped());
    let start = Instant::now();
    let out = cmd.output().expect("run");
    let d = start.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{cmd:?} failed: {stderr}");
    (d, out.stdout, stderr)
}

/// Time a fan-out of `echo ok` and check every node answered and nothing went wrong.
fn fanout(cmd: Command, nodes: usize, ignore_stderr: Option<&str>) -> Duration {
    let what = format!("{cmd:?}");
    let (d, stdout, stderr) = run(cmd, true);
    let oks = String::from_utf8_lossy(&stdout)
        .lines()
        .filter(|l| l.ends_with(": ok"))
        .count();
    let bad: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.is_empty() && !ignore_stderr.is_some_and(|p| l.starts_with(p)))
        .collect();
    assert!(
        oks == nodes && bad.is_empty(),
        "{what}: {oks} of {nodes} nodes answered; stderr: {bad:?}"
    );
    d
}

fn mb_per_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let nodes: usize = std::env::var("EXEC_BENCH_NODES")
        .map(|n| n.parse().expect("EXEC_BENCH_NODES: a number"))
        .unwrap_or(32);
    // Private homes: each node has its own /root, as separate machines do (and this
    // machine's own login scripts stay out of the figures).
    let Some(tb) = testbed::Testbed::new_private_homes(nodes, 0) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let ssh = home.path().join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    let known_hosts = ssh.join("known_hosts");
    std::fs::copy(&tb.known_hosts, &known_hosts).unwrap();
    let key = tb.user_key.display().to_string();
    let config = ssh.join("config");
    // OpenSSH reads ~ from the password database, not $HOME: the config names its files
    // itself and is passed with -F (which ssh hands on to the ProxyJump hop).
    std::fs::write(
        &config,
        format!(
            "Host {b}\n  User root\n  IdentityFile {key}\n  ProxyJump none\n\
             Host 10.88.*\n  User root\n  IdentityFile {key}\n  ProxyJump root@{b}\n\
             Host *\n  UserKnownHostsFile {kh}\n  StrictHostKeyChecking yes\n  BatchMode yes\n",
            b = tb.bastion.addr,
            kh = known_hosts.display()
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
    run(fd(&["fleet", "apply", fleet.to_str().unwrap(), "--yes"]), false);
    if let Ok(file) = std::env::var("EXEC_BENCH_HOLD") {
        std::fs::write(
            &file,
            format!(
                "export HOME={} FLIGHTDECK_HOME={} NODE={} BASTION={} SSH_CONFIG={}\n",
                home.path().display(),
                home.path().join("fd").display(),
                tb.nodes[0].addr,
                tb.bastion.addr,
                config.display()
            ),
        )
        .unwrap();
        eprintln!("testbed up, exports in {file}; kill this process to tear it down");
        std::thread::sleep(Duration::from_secs(3 * 3600));
        return;
    }

    let hosts: Vec<String> = tb.nodes.iter().map(|n| n.addr.clone()).collect();
    let hosts = hosts.join(",");
    let runs: usize = std::env::var("EXEC_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(7);
    // The direct path: a fleet without the jump, an ssh config without ProxyJump, every
    // client (and the holder) inside the bastion's namespace.
    let direct_config = ssh.join("config.direct");
    std::fs::write(
        &direct_config,
        format!(
            "Host *\n  User root\n  IdentityFile {key}\n  UserKnownHostsFile {kh}\n  StrictHostKeyChecking yes\n  BatchMode yes\n",
            kh = known_hosts.display()
        ),
    )
    .unwrap();
    let direct_fleet = home.path().join("tbd.yaml");
    let direct_hosts: String = tb.nodes.iter().map(|n| format!("    - {}\n", n.addr)).collect();
    std::fs::write(
        &direct_fleet,
        format!("type: fleet\nname: tb\nssh_config:\n  user: root\n  identity_file: {key}\n  hosts:\n{direct_hosts}"),
    )
    .unwrap();
    let ns = tb.bastion.ns.clone();
    let fd_in = |fd_home: &str, direct: bool, args: &[&str]| {
        let mut c = if direct {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", &ns, bin]);
            c
        } else {
            Command::new(bin)
        };
        c.args(args)
            .env("HOME", home.path())
            .env_remove("SSH_AUTH_SOCK")
            .env("FLIGHTDECK_HOME", home.path().join(fd_home));
        c
    };
    run(
        fd_in(
            "fd-direct",
            true,
            &["fleet", "apply", direct_fleet.to_str().unwrap(), "--yes"],
        ),
        false,
    );
    let summary = format!("{nodes} nodes: ");
    for (path, fd_home, direct, cfg) in [
        ("behind a bastion", "fd", false, &config),
        ("direct", "fd-direct", true, &direct_config),
    ] {
        let pdsh = || {
            let mut c = if direct {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &ns, "pdsh"]);
                c
            } else {
                Command::new("pdsh")
            };
            c.args(["-R", "ssh", "-f", "32", "-w", &hosts, "echo ok"])
                .env("HOME", home.path())
                .env("PDSH_SSH_ARGS_APPEND", format!("-F {}", cfg.display()))
                .env_remove("SSH_AUTH_SOCK");
            c
        };
        let ours = || fd_in(fd_home, direct, &["exec", "tb", "--no-mux", "--", "echo", "ok"]);
        let held = || fd_in(fd_home, direct, &["exec", "tb", "--", "echo", "ok"]);
        let start_holder = || {
            let mut c = fd_in(fd_home, direct, &["mux", "serve", "--persist", "0"]);
            let child = c
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start the holder");
            let sock = home.path().join(fd_home).join("state/mux.sock");
            let t = Instant::now();
            while std::os::unix::net::UnixStream::connect(&sock).is_err() {
                assert!(t.elapsed() < Duration::from_secs(10), "the holder did not start");
                std::thread::sleep(Duration::from_millis(20));
            }
            child
        };
        let stop_holder = |mut child: std::process::Child| {
            run(fd_in(fd_home, direct, &["mux", "stop"]), false);
            let _ = child.wait();
        };
        // Warm each once, then alternate so load affects all alike.
        fanout(ours(), nodes, Some(&summary));
        fanout(pdsh(), nodes, None);
        let mut firsts = vec![];
        for _ in 0..3 {
            let h = start_holder();
            firsts.push(fanout(held(), nodes, Some(&summary)));
            stop_holder(h);
        }
        let h = start_holder();
        fanout(held(), nodes, Some(&summary));
        let (mut a, mut b, mut c) = (vec![], vec![], vec![]);
        for _ in 0..runs {
            a.push(fanout(ours(), nodes, Some(&summary)));
            b.push(fanout(pdsh(), nodes, None));
            c.push(fanout(held(), nodes, Some(&summary)));
        }
        stop_holder(h);
        let (o, t, f, r) = (median(a), median(b), median(firsts), median(c));
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "exec `echo ok` on {nodes} nodes {path}, median of {runs} (first through a fresh holder: of 3):"
        );
        println!("  pdsh -R ssh (OpenSSH)          {:>8.1} ms", ms(t));
        println!(
            "  flightdeck exec --no-mux       {:>8.1} ms  ({:.2} of pdsh)",
            ms(o),
            ms(o) / ms(t)
        );
        println!(
            "  flightdeck exec, holder, first {:>8.1} ms  ({:.2} of pdsh)",
            ms(f),
            ms(f) / ms(t)
        );
        println!(
            "  flightdeck exec, holder, again {:>8.1} ms  ({:.3} of pdsh)",
            ms(r),
            ms(r) / ms(t)
        );
    }
    if std::env::var("EXEC_BENCH_THROUGHPUT").as_deref() == Ok("0") {
        return;
    }

    // Throughput: 200 MB through one channel to node 0, through the bastion: zeros (cut
    // into 64 KiB pieces, the least work per byte) and text of ~90-byte lines (a log).
    let bytes: u64 = 200_000_000;
    let lines = home.path().join("lines.txt");
    write_lines(&lines, bytes);
    let node = tb.nodes[0].addr.clone();
    for (what, cmd) in [
        ("zeros", format!("head -c {bytes} /dev/zero")),
        ("text lines", format!("cat {}", lines.display())),
    ] {
        let openssh = || {
            let mut c = Command::new("ssh");
            c.args(["-F", &config.display().to_string(), &node, &cmd])
                .env_remove("SSH_AUTH_SOCK");
            c
        };
        let (mut a, mut b, mut c) = (vec![], vec![], vec![]);
        for _ in 0..3 {
            a.push(run(fd(&["exec", "tb", "--nodes", "0", "--", &cmd]), false).0);
            b.push(run(openssh(), false).0);
            c.push(run(fd(&["exec", "tb", "--nodes", "0", "--json", "--", &cmd]), false).0);
        }
        let (a, b, c) = (median(a), median(b), median(c));
        println!("200 MB of {what} through one channel, median of 3:");
        println!(
            "  flightdeck exec (line-prefixed)  {:>6.0} MB/s",
            mb_per_s(bytes, a)
        );
        println!(
            "  ssh with ProxyJump (raw bytes)   {:>6.0} MB/s",
            mb_per_s(bytes, b)
        );
        println!(
            "  flightdeck exec --json           {:>6.0} MB/s",
            mb_per_s(bytes, c)
        );
    }
}

/// A log-like text file of `bytes` bytes: lines of key=value pairs, ~90 bytes each.
fn write_lines(path: &Path, bytes: u64) {
    use std::io::Write;
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let (mut written, mut i) = (0u64, 0u64);
    while written < bytes {
        let line = format!(
            "step={i} loss={:.4} tokens/s={} mfu={:.3} grad_norm={:.5} rank={}\n",
            10.0 / (1.0 + i as f64 / 1000.0),
            90_000 + (i * 7919) % 4000,
            0.5 + ((i * 31) % 100) as f64 / 1000.0,
            ((i * 13) % 1000) as f64 / 997.0,
            i % 16
        );
        let line = &line.as_bytes()[..line.len().min((bytes - written) as usize)];
        w.write_all(line).unwrap();
        written += line.len() as u64;
        i += 1;
    }
    w.flush().unwrap();
}
