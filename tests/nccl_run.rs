//! `flightdeck nccl run` and `nccl attach` end to end without GPUs: the nccl-tests binary
//! is a double (a shell script named `all_reduce_perf` printing a recorded real run from
//! tests/fixtures/nccl, line by line, then exiting as nccl-tests does). Everything else
//! is real: the detached launch, the run directory, following the log, the parser, the
//! state store; on the local backend and over SSH on the testbed.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::testbed::Testbed;
use support::text;

/// Write the double into `dir` and return `dir`.
fn nccl_tests_double(dir: &Path, exit: i32, sleep_each: &str) -> PathBuf {
    double_printing(dir, "h200x2-all_reduce.txt", exit, sleep_each)
}

/// The double printing `fixture` (a file of tests/fixtures/nccl), then exiting `exit`.
fn double_printing(dir: &Path, fixture: &str, exit: i32, sleep_each: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/nccl")
        .join(fixture);
    let script = format!(
        "#!/bin/sh\n# DOUBLE of nccl-tests' all_reduce_perf: prints a recorded run of the real one.\n\
         echo \"args: $*\" >&2\n\
         while IFS= read -r l; do printf '%s\\n' \"$l\"; sleep {sleep_each}; done < '{}'\nexit {exit}\n",
        fixture.display()
    );
    let bin = dir.join("all_reduce_perf");
    std::fs::write(&bin, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir.to_path_buf()
}

fn fd(home: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .output()
        .unwrap()
}

#[test]
fn local_run_parses_the_recorded_output_and_records_the_run() {
    let home = tempfile::tempdir().unwrap();
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("fleets/local.yaml");
    assert!(
        fd(home.path(), &["fleet", "apply", local.to_str().unwrap(), "--yes"])
            .status
            .success()
    );
    let dir = nccl_tests_double(&home.path().join("nt"), 0, "0");
    let out = fd(
        home.path(),
        &[
            "nccl",
            "run",
            "local",
            "--nccl-tests-dir",
            dir.to_str().unwrap(),
            "-b",
            "8",
            "-e",
            "8G",
            "-g",
            "2",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["collective"], "all_reduce");
    assert_eq!(doc["rows"].as_array().unwrap().len(), 31);
    assert_eq!(doc["peak_busbw"], 347.71);
    assert_eq!(doc["run"]["exit_codes"][0]["exit_code"], 0);
    // The run dir on the node holds the double's arguments as flightdeck passed them.
    let id = doc["run"]["id"].as_str().unwrap();
    let log = std::fs::read_to_string(home.path().join(format!(".flightdeck/runs/{id}/out.log"))).unwrap();
    assert!(
        log.contains("args: -b 8 -e 8589934592 -f 2 -g 2 -n 20 -w 5 -d float"),
        "{log}"
    );
    // Attach replays the finished run from the state store.
    let again = fd(home.path(), &["nccl", "attach", "--json"]);
    let again: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(again["rows"], doc["rows"]);
    // A failing binary: exit code and its last lines.
    let bad = nccl_tests_double(&home.path().join("bad"), 3, "0");
    std::fs::write(
        bad.join("all_reduce_perf"),
        "#!/bin/sh\necho 'NCCL WARN Cuda failure' >&2\nexit 3\n",
    )
    .unwrap();
    let out = fd(
        home.path(),
        &[
            "nccl",
            "run",
            "local",
            "--nccl-tests-dir",
            bad.to_str().unwrap(),
            "-g",
            "1",
        ],
    );
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains("local-0: NCCL WARN Cuda failure"),
        "{}",
        text(&out.stderr)
    );
    let bad_test = fd(home.path(), &["nccl", "run", "local", "--test", "allreduce"]);
    assert_eq!(bad_test.status.code(), Some(1));
    assert!(text(&bad_test.stderr).contains("did you mean `all_reduce`?"));
    // A data type the engine does not have is refused before anything runs (nccl-tests
    // itself would run float instead, after one line of warning).
    let bad_type = fd(home.path(), &["nccl", "run", "local", "-d", "floot"]);
    assert_eq!(bad_type.status.code(), Some(1));
    assert!(
        text(&bad_type.stderr).contains("nccl-tests has no data type `floot`; expected one of float,"),
        "{}",
        text(&bad_type.stderr)
    );
    let torch_type = fd(
        home.path(),
        &[
            "nccl", "run", "local", "--engine", "torch", "-d", "uint64", "-n", "5",
        ],
    );
    assert!(
        text(&torch_type.stderr).contains("torch has no data type `uint64`"),
        "{}",
        text(&torch_type.stderr)
    );
    let no_iters = fd(home.path(), &["nccl", "run", "local", "-n", "0"]);
    assert!(
        text(&no_iters.stderr).contains("the timed iterations per size must be at least 1"),
        "{}",
        text(&no_iters.stderr)
    );
}

#[test]
fn an_ssh_run_survives_its_follower_and_is_attached_again() {
    let Some(tb) = Testbed::new(1, 0) else { return };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "tb");
    // Node and test process share the filesystem; the double prints one line every 50 ms.
    let dir = nccl_tests_double(&home.path().join("nt"), 0, "0.05");
    let mut follower = Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args([
            "nccl",
            "run",
            "tb",
            "--nccl-tests-dir",
            dir.to_str().unwrap(),
            "-g",
            "2",
        ])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1200));
    // The operator's connection drops: the follower dies, the run goes on.
    follower.kill().unwrap();
    follower.wait().unwrap();
    let out = fd(home.path(), &["nccl", "attach", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["rows"].as_array().unwrap().len(),
        31,
        "every row, from the start"
    );
    assert_eq!(doc["avg_busbw"], 112.161);
    let state = std::fs::read_to_string(home.path().join(".local/state/flightdeck/state.json")).unwrap();
    assert!(state.contains("\"exit_code\": 0"), "{state}");
}

/// Runs are judged against the expected curve, kept in the history with their profile,
/// and compared; `nccl parse` judges with --machine-type.
#[test]
fn local_runs_are_judged_kept_and_compared() {
    let home = tempfile::tempdir().unwrap();
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("fleets/local.yaml");
    assert!(
        fd(home.path(), &["fleet", "apply", local.to_str().unwrap(), "--yes"])
            .status
            .success()
    );
    let dir = support::nccl_double::install(&home.path().join("nt"), "0");
    let d = dir.to_str().unwrap();
    // The machine from nccl-tests' rank list (2x NVIDIA H200): our measured curve.
    let out = fd(
        home.path(),
        &["nccl", "run", "local", "--nccl-tests-dir", d, "-g", "2", "--json"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let a: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        a["machine_type"],
        serde_json::json!({"name": "2xH200", "from": "nccl-tests rank list"})
    );
    assert_eq!(a["verdict"]["grade"], "pass");
    assert_eq!(a["verdict"]["expected_peak_busbw"], 347.71);
    assert_eq!(a["profile"]["name"], "none");
    // The same machine slowed to 75%: a warning. Named by --machine-type; auto picks no
    // GPUDirect profile for it, and says so before the run.
    // The double's pace keys the slowness by the node's eth0 address (`none` without).
    let addr = Command::new("sh")
        .arg("-c")
        .arg("ip -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -n1")
        .output()
        .unwrap();
    let addr = text(&addr.stdout).trim().to_string();
    let key = if addr.is_empty() { "none".to_string() } else { addr };
    std::fs::write(dir.join(format!("slow.{key}")), "1.333333").unwrap();
    let out = fd(
        home.path(),
        &[
            "nccl",
            "run",
            "local",
            "--nccl-tests-dir",
            d,
            "-g",
            "2",
            "--machine-type",
            "2xH200",
            "--json",
        ],
    );
    let b: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        b["peak_busbw"], 260.78,
        "347.71 / 1.333333 as the double prints it"
    );
    assert_eq!(b["verdict"]["grade"], "warn", "{b:#}");
    assert_eq!(b["machine_type"]["from"], "--machine-type");
    assert!(
        text(&out.stderr).contains("NCCL profile none"),
        "{}",
        text(&out.stderr)
    );
    // A GPUDirect machine whose pieces are missing (this one has no FasTrak NICs,
    // plugin or RxDM): the pre-flight stops the run before anything starts, naming the
    // node, each check and the fix.
    let args = [
        "nccl",
        "run",
        "local",
        "--nccl-tests-dir",
        d,
        "-g",
        "2",
        "--machine-type",
        "a3-megagpu-8g",
        "--json",
    ];
    let refused = fd(home.path(), &args);
    let err = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{err}");
    assert!(refused.stdout.is_empty());
    assert!(
        err.contains("pre-flight for GPUDirect-tcpxo failed on 1 node; nothing was started"),
        "{err}"
    );
    assert!(err.contains("local-0: interface enp6s0: missing; fix:"), "{err}");
    assert!(
        err.contains("local-0: file /var/lib/tcpxo/lib64/libnccl-net.so: missing; fix: run `flightdeck fleet bootstrap FLEET`"),
        "{err}"
    );
    assert!(
        err.contains("local-0: rxdm: container receive-datapath-manager is not running"),
        "{err}"
    );
    // With --no-preflight: the profile's variables are shown before the run and saved.
    let out = fd(home.path(), &[&args[..], &["--no-preflight"]].concat());
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(text(&out.stderr).contains("NCCL profile tcpxo (auto, for a3-megagpu-8g)"));
    assert!(text(&out.stderr).contains("export NCCL_NVLSTREE_MAX_CHUNKSIZE='131072'"));
    assert_eq!(c["verdict"]["grade"], "unknown");
    assert_eq!(
        c["verdict"]["reason"],
        "no reference for all_reduce on 1 node of a3-megagpu-8g"
    );
    // History: every run with its verdict and profile (the three started within a
    // second or two, so their order is not asserted).
    let h = fd(home.path(), &["nccl", "history", "--json"]);
    let h: serde_json::Value = serde_json::from_slice(&h.stdout).unwrap();
    let h = h.as_array().unwrap();
    assert_eq!(h.len(), 3);
    let entry = |run: &serde_json::Value| h.iter().find(|e| e["id"] == run["run"]["id"]).unwrap().clone();
    assert_eq!(entry(&c)["profile"], "tcpxo");
    assert_eq!(entry(&a)["verdict"], "pass");
    assert_eq!(entry(&b)["verdict"], "warn");
    assert_eq!(entry(&b)["peak_busbw"], 260.78);
    let saved = std::fs::read_to_string(home.path().join(format!(
        ".local/state/flightdeck/nccl/{}.json",
        c["run"]["id"].as_str().unwrap()
    )))
    .unwrap();
    assert!(
        saved.contains("NCCL_FASTRAK_CTRL_DEV"),
        "the profile's env is saved with the run"
    );
    let table = fd(home.path(), &["nccl", "history"]);
    assert!(text(&table.stdout).starts_with("ID "), "{}", text(&table.stdout));
    // Compare A and B per size.
    let (ia, ib) = (a["run"]["id"].as_str().unwrap(), b["run"]["id"].as_str().unwrap());
    let cmp = fd(home.path(), &["nccl", "compare", ia, ib, "--json"]);
    assert!(cmp.status.success(), "{}", text(&cmp.stderr));
    let cmp: serde_json::Value = serde_json::from_slice(&cmp.stdout).unwrap();
    let last = cmp["rows"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["size"], 8589934592u64);
    assert_eq!(last["a"], 347.71);
    assert_eq!(last["b"], b["peak_busbw"]);
    let missing = fd(home.path(), &["nccl", "compare", ia, "nccl-nope"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(text(&missing.stderr).contains("no NCCL run `nccl-nope` in the history"));
    // parse judges by the rank list (one host of two H200s), or by the machine it is told.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl/h200x2-all_reduce.txt");
    let f = fixture.to_str().unwrap();
    let plain: serde_json::Value =
        serde_json::from_slice(&fd(home.path(), &["nccl", "parse", f, "--json"]).stdout).unwrap();
    assert_eq!(plain["machine_type"]["from"], "nccl-tests rank list", "{plain}");
    assert_eq!(plain["verdict"]["grade"], "pass", "{plain}");
    let judged: serde_json::Value = serde_json::from_slice(
        &fd(
            home.path(),
            &["nccl", "parse", f, "--json", "--machine-type", "2xH200"],
        )
        .stdout,
    )
    .unwrap();
    assert_eq!(judged["verdict"]["grade"], "pass");
    assert_eq!(judged["peak_busbw"], 347.71);
}

/// The fault matrix's "a node killed during an NCCL run": the node's sshd and everything
/// it runs are killed mid-run; the follower ends (no hang), says which node was lost,
/// and the history keeps the run with the rows that had arrived.
#[test]
fn a_node_killed_mid_run_is_reported_and_the_run_kept() {
    let Some(mut tb) = Testbed::new(1, 0) else { return };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "tb");
    let dir = nccl_tests_double(&home.path().join("nt"), 0, "0.05");
    let follower = support::spawn_flightdeck(
        home.path(),
        &[
            "nccl",
            "run",
            "tb",
            "--nccl-tests-dir",
            dir.to_str().unwrap(),
            "-g",
            "2",
        ],
    );
    std::thread::sleep(std::time::Duration::from_millis(1500));
    tb.kill_sshd(0);
    let out = follower.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("tb-0"), "the lost node is named: {err}");
    let h = fd(home.path(), &["nccl", "history", "--json"]);
    let h: serde_json::Value = serde_json::from_slice(&h.stdout).unwrap();
    let runs = h.as_array().unwrap();
    assert_eq!(runs.len(), 1, "{h}");
    // Judged as the failure it is, not by the rows that came before the loss.
    assert_eq!(runs[0]["verdict"], "fail", "{h}");
    assert!(
        runs[0]["peak_busbw"].as_f64().is_some(),
        "the rows that arrived are kept: {h}"
    );
}

/// `nccl run` with the RDMA profile and `--no-preflight` on a node without gIB: the
/// double prints what NCCL 2.27.7 and nccl-tests print when `NCCL_NET=gIB` names a
/// plugin that is not there (composed from their source strings:
/// tests/fixtures/nccl/composed/README.md) and exits 3 as nccl-tests does. The CLI names
/// NCCL's own error as the cause; the verdict is FAIL with it, and the history keeps it.
#[test]
fn a_run_without_its_plugin_fails_with_nccls_own_error() {
    let home = tempfile::tempdir().unwrap();
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("fleets/local.yaml");
    assert!(
        fd(home.path(), &["fleet", "apply", local.to_str().unwrap(), "--yes"])
            .status
            .success()
    );
    let dir = double_printing(
        &home.path().join("nt"),
        "composed/nccl2.27.7-rdma-no-gib-all_reduce.txt",
        3,
        "0",
    );
    let d = dir.to_str().unwrap();
    let args = [
        "nccl",
        "run",
        "local",
        "--nccl-tests-dir",
        d,
        "-g",
        "2",
        "--profile",
        "rdma",
        "--no-preflight",
    ];
    let out = fd(home.path(), &[&args[..], &["--json"]].concat());
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("cause: NCCL WARN Failed to initialize any NET plugin\n"),
        "{err}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["profile"]["name"], "rdma");
    assert_eq!(doc["verdict"]["grade"], "fail", "{doc:#}");
    assert_eq!(
        doc["verdict"]["cause"],
        "NCCL WARN Failed to initialize any NET plugin"
    );
    assert_eq!(
        doc["verdict"]["reason"],
        "the run failed before its first row: a node ended with exit 3; \
         cause: NCCL WARN Failed to initialize any NET plugin"
    );
    // The history keeps the cause; its table says why the run failed.
    let h = fd(home.path(), &["nccl", "history", "--json"]);
    let h: serde_json::Value = serde_json::from_slice(&h.stdout).unwrap();
    assert_eq!(h[0]["verdict"], "fail");
    assert_eq!(h[0]["cause"], "NCCL WARN Failed to initialize any NET plugin");
    let table = text(&fd(home.path(), &["nccl", "history"]).stdout);
    assert!(
        table.contains("cause: NCCL WARN Failed to initialize any NET plugin;"),
        "{table}"
    );
    // The text output too, with the run's last lines after it.
    let out = fd(home.path(), &args);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    let cause = err
        .find("cause: NCCL WARN Failed to initialize any NET plugin")
        .expect("the cause");
    assert!(
        err[cause..].contains("local-0: lab-0: Test NCCL failure common.cu:1123"),
        "{err}"
    );
}
