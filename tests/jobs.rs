//! `flightdeck job` end to end: on this machine (local backend) and on testbed nodes over
//! SSH through a bastion. No torch in CI: the job's command is a small Python script
//! (tests/fixtures/jobs/rendezvous.py) that does a real TCP rendezvous between the nodes
//! on MASTER_ADDR:MASTER_PORT and prints step lines in the seed format. Everything else
//! is real: uploads, the detached launch, following, re-attaching, metrics, stop.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::testbed::Testbed;
use support::{flightdeck as fd, text};

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)))
}

fn spawn(home: &Path, args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Read `child`'s stdout until `done` holds for the lines so far. When its stdout ends
/// first (the follower exited), or 60 s pass (it is killed then), the failure shows the
/// lines so far, its exit status and its stderr.
fn read_until(child: &mut std::process::Child, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    use std::sync::mpsc::RecvTimeoutError;
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Reads to the end, also after the test stopped listening: the follower must not
        // see its stdout closed.
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let mut lines = vec![];
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done(&lines) {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(l) => lines.push(l),
            Err(e) => {
                let why = match e {
                    RecvTimeoutError::Timeout => {
                        let _ = child.kill();
                        "gave up waiting (the follower is killed)"
                    }
                    RecvTimeoutError::Disconnected => "the follower's stdout closed",
                };
                let status = child.wait().map_or_else(|e| e.to_string(), |s| s.to_string());
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                panic!(
                    "{why}; it ended with {status}\nits stdout so far:\n{}\nits stderr:\n{err}",
                    lines.join("\n")
                );
            }
        }
    }
    lines
}

fn job_file(dir: &Path, name: &str, fleet: &str, env: &[&str], extra: &str) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jobs/rendezvous.py");
    std::fs::copy(&script, dir.join("rendezvous.py")).unwrap();
    let env: String = env.iter().map(|e| format!("  - {e}\n")).collect();
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &file,
        format!(
            "type: task\nname: {name}\nfleet: {fleet}\nfiles: [rendezvous.py]\nenv:\n{env}commands:\n  - echo \"node $NODE_RANK of $NNODES\"\n  - python3 rendezvous.py\n{extra}"
        ),
    )
    .unwrap();
    file
}

fn job<'a>(list: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == name)
        .unwrap_or_else(|| panic!("no job {name} in {list}"))
}

fn codes(j: &serde_json::Value) -> Vec<i64> {
    j["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["exit_code"].as_i64().unwrap_or(-1))
        .collect()
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_local_job_runs_is_judged_and_stopped() {
    let home = tempfile::tempdir().unwrap();
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("fleets/local.yaml");
    assert!(
        fd(home.path(), &["fleet", "apply", local.to_str().unwrap(), "--yes"])
            .status
            .success()
    );
    let file = job_file(
        home.path(),
        "quick",
        "local",
        &["STEPS=5", "PACE=0.01", "TOKEN=s3cret-value"],
        "gpu: H200\n",
    );
    let out = fd(home.path(), &["job", "run", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("node 0 of 1\n"), "{stdout}");
    assert!(
        stdout.contains("rendezvous: rank 0 of 1 ready (world 1, dstack rank 0, skypilot ips ['localhost'])")
    );
    assert_eq!(stdout.matches("Step: ").count(), 5);
    assert!(
        text(&out.stderr).contains("step 5 · loss 7.2000 → 4.7239 · "),
        "{}",
        text(&out.stderr)
    );

    let show = json(&fd(home.path(), &["job", "show", "quick", "--json"]));
    assert_eq!(show["state"], "succeeded");
    assert_eq!(show["metrics"]["steps"], 5);
    assert_eq!(show["metrics"]["first_loss"], 7.2);
    // MFU from the printed TFLOPs/s over the H200's peak.
    let mfu = show["metrics"]["mfu"].as_f64().unwrap();
    let tflops = show["metrics"]["tflops"].as_f64().unwrap();
    assert!((mfu - tflops / 989.0).abs() < 1e-9, "{show}");

    // The job's environment is on the node, never in flightdeck's files.
    for f in ["state/flightdeck/state.json", "state/flightdeck/flightdeck.log"] {
        let p = home.path().join(".local").join(f);
        if let Ok(t) = std::fs::read_to_string(&p) {
            assert!(!t.contains("s3cret-value"), "{} holds the secret", p.display());
        }
    }

    // A long one, detached, then stopped: TERM reaches the Python process.
    let file = job_file(home.path(), "long", "local", &["STEPS=100000", "PACE=0.05"], "");
    let out = fd(home.path(), &["job", "run", file.to_str().unwrap(), "--detach"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let list = json(&fd(home.path(), &["job", "list", "--json"]));
    assert_eq!(job(&list, "long")["state"], "running");
    let out = fd(home.path(), &["job", "stop", "long", "--grace", "5"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "local-0: exited 143\n");
    let list = json(&fd(home.path(), &["job", "list", "--json"]));
    let long = job(&list, "long");
    assert_eq!(long["state"], "stopped");
    assert_eq!(codes(long), [143]);
    assert_eq!(job(&list, "quick")["state"], "succeeded");

    // Jobs that end while nobody follows them: `job list` asks their nodes and records
    // the exit codes; a node without the job's directory is named, its code not made up.
    let mut ids = vec![];
    for (name, port) in [("unwatched", "29421"), ("erased", "29422")] {
        let env = ["STEPS=2", "PACE=0.01", &format!("MASTER_PORT={port}")];
        let file = job_file(home.path(), name, "local", &env, "");
        let out = fd(home.path(), &["job", "run", file.to_str().unwrap(), "--detach"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        ids.push(text(&out.stdout).trim().to_string());
    }
    let dir = |id: &str| home.path().join(".flightdeck/jobs").join(id);
    wait_for("both jobs' exit codes", || {
        ids.iter().all(|id| dir(id).join("0/exit_code").exists())
    });
    std::fs::remove_dir_all(dir(&ids[1])).unwrap();
    let out = fd(home.path(), &["job", "list", "--json"]);
    let list = json(&out);
    assert_eq!(job(&list, "unwatched")["state"], "succeeded", "{list}");
    assert_eq!(codes(job(&list, "unwatched")), [0]);
    assert_eq!(job(&list, "erased")["state"], "running", "{list}");
    assert_eq!(codes(job(&list, "erased")), [-1]);
    assert!(
        text(&out.stderr).contains(&format!("job {}: local-0: no such job on the node", ids[1])),
        "{}",
        text(&out.stderr)
    );

    // A node directory without a pid (the job being uploaded or launched) is starting,
    // not ended; left so for longer than the launch can take, it has vanished (255).
    let planted = dir(&ids[1]).join("0");
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::write(planted.join("run.sh"), "sleep 1\n").unwrap();
    let out = fd(home.path(), &["job", "list", "--json"]);
    let list = json(&out);
    assert_eq!(job(&list, "erased")["state"], "running", "{list}");
    assert_eq!(codes(job(&list, "erased")), [-1]);
    assert!(!text(&out.stderr).contains(&ids[1]), "{}", text(&out.stderr));
    for p in [planted.join("run.sh"), planted.clone()] {
        let touched = std::process::Command::new("touch")
            .args(["-d", "1 hour ago"])
            .arg(&p)
            .status()
            .unwrap();
        assert!(touched.success());
    }
    let list = json(&fd(home.path(), &["job", "list", "--json"]));
    assert_eq!(codes(job(&list, "erased")), [255], "{list}");

    // Bad input: the place, the field, what was expected.
    let bad = home.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "type: task\nname: x\nfleet: local\ncommands: [true]\nnodes: two\n",
    )
    .unwrap();
    let out = fd(home.path(), &["job", "run", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with(&format!(
            "{}:5:8: nodes: expected a whole number (0 or more), found the text \"two\"",
            bad.display()
        )),
        "{}",
        text(&out.stderr)
    );
    let out = fd(home.path(), &["job", "logs", "quik"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no job `quik` in the state; did you mean `quick`?"));
}

#[test]
fn testbed_job_rendezvous_reattach_slow_node_failure_and_stop() {
    let Some(tb) = Testbed::new(3, 0) else { return };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "tb");
    let mut ids = vec![];

    // 1. Launch and follow; node 2 is slow. The follower dies mid-run (the operator's
    // connection drops); the job goes on and is followed again from its first line.
    let file = job_file(
        home.path(),
        "train",
        "tb",
        &["STEPS=30", "PACE=0.1", "SLOW_RANK=2", "MASTER_PORT=29411"],
        "",
    );
    let mut follower = spawn(home.path(), &["job", "run", file.to_str().unwrap()]);
    let seen = read_until(&mut follower, |l| {
        (0..3).all(|n| l.iter().any(|x| x.starts_with(&format!("tb-{n}: Step: 3 "))))
    });
    assert!(seen.iter().any(|l| l == "tb-0: rendezvous: rank 0 of 3 ready (world 3, dstack rank 0, skypilot ips ['10.88.0.1', '10.88.0.2', '10.88.0.3'])"), "{seen:?}");
    assert!(
        seen.iter()
            .any(|l| l.starts_with("tb-0: rendezvous: rank 2 joined from 10.88.0.3")),
        "{seen:?}"
    );
    follower.kill().unwrap();
    follower.wait().unwrap();
    let list = json(&fd(home.path(), &["job", "list", "--json"]));
    let train = job(&list, "train");
    assert_eq!(train["state"], "running", "{train}");
    ids.push(train["id"].as_str().unwrap().to_string());
    // Live metrics, read from the nodes' logs while the job runs.
    let live = json(&fd(home.path(), &["job", "show", "train", "--json"]));
    assert_eq!(live["state"], "running", "{live}");
    assert!(live["metrics"]["steps"].as_u64().unwrap() >= 3, "{live}");
    assert!(live["metrics"]["steps"].as_u64().unwrap() < 30, "{live}");
    assert_eq!(live["metrics"]["first_loss"], 7.2);

    let out = fd(home.path(), &["job", "logs", "train", "--follow"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let again = text(&out.stdout);
    for n in 0..3 {
        assert!(again.contains(&format!("tb-{n}: node {n} of 3\n")), "{again}");
        assert!(again.contains(&format!("tb-{n}: Step: 30 ")), "{again}");
        assert_eq!(again.matches(&format!("tb-{n}: Step: ")).count(), 30, "{again}");
    }
    let show = json(&fd(home.path(), &["job", "show", "train", "--json"]));
    assert_eq!(show["state"], "succeeded", "{show}");
    assert_eq!(codes(&show), [0, 0, 0]);
    assert_eq!(show["metrics"]["steps"], 30);
    assert_eq!(show["metrics"]["first_loss"], 7.2);
    assert_eq!(show["metrics"]["last_loss"], 0.3391);
    let slow = show["slow_nodes"].as_array().unwrap();
    assert_eq!(slow.len(), 1, "{show}");
    assert_eq!(slow[0]["name"], "tb-2");
    let logs = fd(
        home.path(),
        &["job", "logs", "train", "--node", "1", "--tail", "1"],
    );
    assert!(
        text(&logs.stdout).starts_with("Step: 30 "),
        "{}",
        text(&logs.stdout)
    );

    // 2. One node's training process is killed: shown at once, and with
    // stop_on_failure the other nodes are stopped; every exit code is recorded.
    let file = job_file(
        home.path(),
        "fragile",
        "tb",
        &["STEPS=100000", "PACE=0.1", "MASTER_PORT=29412"],
        "stop_on_failure: true\n",
    );
    let mut follower = spawn(home.path(), &["job", "run", file.to_str().unwrap()]);
    let _ = read_until(&mut follower, |l| {
        (0..3).all(|n| l.iter().any(|x| x.starts_with(&format!("tb-{n}: Step: 2 "))))
    });
    let list = json(&fd(home.path(), &["job", "list", "--json"]));
    let id = job(&list, "fragile")["id"].as_str().unwrap().to_string();
    ids.push(id.clone());
    let pid_file = PathBuf::from(format!("/root/.flightdeck/jobs/{id}/1/train.pid"));
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    tb.node_run(1, &["kill", "-KILL", pid.trim()]).unwrap();
    let status = follower.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(follower.stderr.as_mut().unwrap(), &mut err).unwrap();
    // ux-walk-2 item 2: the exit status is the failure's (137), not the stop's (143).
    assert_eq!(status.code(), Some(137), "{err}");
    assert!(err.contains(&format!("job {id}: tb-1 exited with 137")), "{err}");
    assert!(err.contains("stop_on_failure: stopping the other nodes"), "{err}");
    let list = json(&fd(home.path(), &["job", "list", "--json"]));
    let fragile = job(&list, "fragile");
    assert_eq!(codes(fragile), [143, 137, 143], "{fragile}");
    // A crash that stopped the others is a failure, not an operator's stop.
    assert_eq!(fragile["state"], "failed", "{fragile}");
    assert_eq!(fragile["failed_rank"], 1, "{fragile}");

    // 3. `job stop` ends a detached job on every node.
    let file = job_file(
        home.path(),
        "endless",
        "tb",
        &["STEPS=100000", "PACE=0.1", "MASTER_PORT=29413"],
        "",
    );
    let out = fd(home.path(), &["job", "run", file.to_str().unwrap(), "--detach"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let id = text(&out.stdout).trim().to_string();
    ids.push(id.clone());
    wait_for("steps on every node", || {
        (0..3).all(|n| {
            std::fs::read_to_string(format!("/root/.flightdeck/jobs/{id}/{n}/out.log"))
                .is_ok_and(|t| t.contains("Step: 2 "))
        })
    });
    let out = fd(home.path(), &["job", "stop", "endless"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "tb-0: exited 143\ntb-1: exited 143\ntb-2: exited 143\n"
    );
    let list = json(&fd(home.path(), &["job", "list", "--json"]));
    assert_eq!(job(&list, "endless")["state"], "stopped");

    for id in ids {
        let _ = std::fs::remove_dir_all(format!("/root/.flightdeck/jobs/{id}"));
    }
}
