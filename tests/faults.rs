//! Fault-matrix cases on the testbed (sshd in network namespaces) that cross commands: a
//! node that vanishes mid-run, and flightdeck killed at each step of a job launch and
//! then run again. Each asserts that the other nodes go on, nothing runs twice or
//! unknown, and the state store stays consistent.

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::testbed::Testbed;
use support::{flightdeck as fd, text};

/// SSH keepalives every second, two missed ones end a connection (OpenSSH's
/// ServerAliveInterval / ServerAliveCountMax, read from the operator's ssh config).
fn quick_keepalives(home: &Path) {
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(
        home.join(".ssh/config"),
        "Host *\n  ServerAliveInterval 1\n  ServerAliveCountMax 2\n",
    )
    .unwrap();
}

#[test]
fn a_node_whose_namespace_vanishes_mid_exec_is_reported_and_the_others_finish() {
    let Some(mut tb) = Testbed::new(3, 0) else { return };
    let home = tempfile::tempdir().unwrap();
    quick_keepalives(home.path());
    tb.apply_fleet(home.path(), "tb");
    let child = Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args([
            "exec",
            "tb",
            "--",
            "for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.5; done",
        ])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    tb.remove_node(1);
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    for n in [0, 2] {
        assert!(
            stdout.contains(&format!("tb-{n}: tick 6")),
            "tb-{n} finished:\n{stdout}\n{stderr}"
        );
    }
    assert!(!stdout.contains("tb-1: tick 6"), "{stdout}");
    let all = format!("{stdout}\n{stderr}");
    assert!(all.contains("tb-1"), "the vanished node is named: {all}");
    // Found by the keepalives (two missed), not by waiting on TCP's own timeouts.
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}: {all}",
        started.elapsed()
    );
    // The fleet is unchanged; the others still answer.
    let again = fd(
        home.path(),
        &["exec", "tb", "--nodes", "tb-0,tb-2", "--", "echo", "ok"],
    );
    assert!(again.status.success(), "{}", text(&again.stderr));
}

fn job_file(dir: &Path, name: &str) -> std::path::PathBuf {
    // A payload big enough that uploading it takes a moment (a kill lands mid-way).
    let payload = dir.join("payload.bin");
    if !payload.exists() {
        let chunk: Vec<u8> = (0..1024 * 1024).map(|i| (i * 7 % 251) as u8).collect();
        let mut all = Vec::with_capacity(24 * chunk.len());
        for _ in 0..24 {
            all.extend_from_slice(&chunk);
        }
        std::fs::write(&payload, all).unwrap();
    }
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &file,
        format!(
            "type: task\nname: {name}\nfleet: tb\nfiles: [payload.bin]\ncommands:\n  - echo \"rank $NODE_RANK up\"\n  - sleep 4\n  - echo \"rank $NODE_RANK done\"\n"
        ),
    )
    .unwrap();
    file
}

/// Start `job run FILE --detach` and kill it (SIGKILL) once its stderr shows `at`.
fn run_killed_at(home: &Path, file: &Path, at: &str) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(["job", "run", file.to_str().unwrap(), "--detach"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let mut seen = vec![];
    for line in BufReader::new(err).lines().map_while(Result::ok) {
        let hit = line.contains(at);
        seen.push(line);
        if hit {
            child.kill().unwrap();
            break;
        }
    }
    let status = child.wait().unwrap();
    assert!(
        seen.iter().any(|l| l.contains(at)),
        "`{at}` never came ({status}):\n{}",
        seen.join("\n")
    );
}

/// The job processes running on the testbed's nodes (each node's wrapper shell, which
/// runs `sh ./run.sh`). The nodes share this machine's process table (network namespaces
/// only), as do jobs other tests run on a local fleet: only the processes in the nodes'
/// namespaces count.
fn job_processes(tb: &Testbed) -> usize {
    tb.nodes
        .iter()
        .map(|n| {
            let out = Command::new("ip")
                .args(["netns", "pids", &n.ns])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .filter(|pid| {
                    std::fs::read(format!("/proc/{pid}/cmdline"))
                        .map(|c| {
                            let args = String::from_utf8_lossy(&c).replace('\0', " ");
                            args.starts_with("sh -c") && args.contains("then bash ./run.sh;")
                        })
                        .unwrap_or(false)
                })
                .count()
        })
        .sum()
}

fn jobs(home: &Path) -> Vec<serde_json::Value> {
    let out = fd(home, &["job", "list", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn flightdeck_killed_at_each_step_of_a_job_launch_then_run_again() {
    let Some(tb) = Testbed::new(2, 0) else { return };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "tb");
    // The progress lines a launch prints, in order: recorded, uploading, starting, started.
    let steps = ["nodes of `tb`", "uploading", "starting on", "started;"];
    for (i, at) in steps.iter().enumerate() {
        let name = format!("step{i}");
        let file = job_file(home.path(), &name);
        run_killed_at(home.path(), &file, at);
        // However far it got: the job is in the state, and a second launch of the same
        // name runs only once the first is known not to run.
        let list = jobs(home.path());
        let first: Vec<&serde_json::Value> = list.iter().filter(|j| j["name"] == name.as_str()).collect();
        assert_eq!(first.len(), 1, "recorded once: {list:?}");
        let again = fd(home.path(), &["job", "run", file.to_str().unwrap(), "--detach"]);
        let err = text(&again.stderr);
        eprintln!("killed at `{at}`: the first launch is {}", first[0]["state"]);
        if first[0]["state"] == "running" {
            // It started on the nodes before the kill (or is still starting): refused,
            // named, with what to do.
            assert!(!again.status.success(), "{at}: a second launch ran: {err}");
            let id = first[0]["id"].as_str().unwrap();
            assert!(
                err.contains(&format!("job {id} (`{name}`) is still running")),
                "{at}: {err}"
            );
            assert!(err.contains(&format!("flightdeck job stop {id}")), "{at}: {err}");
            let stop = fd(home.path(), &["job", "stop", id]);
            assert!(stop.status.success(), "{at}: {}", text(&stop.stderr));
            let again = fd(home.path(), &["job", "run", file.to_str().unwrap(), "--detach"]);
            assert!(again.status.success(), "{at}: {}", text(&again.stderr));
        } else {
            // Killed before any node started: recorded as never started.
            assert!(again.status.success(), "{at}: {err}");
            assert_eq!(first[0]["state"], "failed", "{at}: {:?}", first[0]);
        }
        // Exactly one run of the job on each of the two nodes now.
        assert_eq!(job_processes(&tb), 2, "{at}: the job runs once per node");
        let out = fd(home.path(), &["job", "logs", &name, "--follow"]);
        assert!(out.status.success(), "{at}: {}", text(&out.stderr));
        let logs = text(&out.stdout);
        assert!(
            logs.contains("tb-0: rank 0 done") && logs.contains("tb-1: rank 1 done"),
            "{at}: {logs}"
        );
    }
    // Nothing left running; every job in the state has ended.
    assert_eq!(job_processes(&tb), 0, "no orphan");
    for j in jobs(home.path()) {
        assert_ne!(j["state"], "running", "{j}");
        assert_ne!(j["state"], "partial", "{j}");
    }
}
