//! `flightdeck nccl parse` on real logs other people posted (tests/fixtures/nccl/public,
//! each with its source and licence in PROVENANCE.md): what an expert reads from each,
//! as facts.tsv records it, read back from the JSON document: versions, ranks, hosts,
//! transport, the collective of every table, its rows to the last size and busbw,
//! whether the run finished, and the line that says why it did not.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl/public")
}

/// `nccl parse FILE --json`: the documents (one per test) and the exit code.
fn parse(file: &Path, extra: &[&str]) -> (Vec<Value>, Option<i32>) {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(["nccl", "parse", file.to_str().unwrap(), "--json"])
        .args(extra)
        .env_clear()
        .env("HOME", home.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "{}: {e}\n{text}\n{}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let docs = match v {
        Value::Array(a) => a,
        one => vec![one],
    };
    (docs, out.status.code())
}

struct Facts {
    file: String,
    nccl_version: String,
    tests_version: String,
    ranks: String,
    hosts: String,
    transport: String,
    collectives: Vec<String>,
    rows: Vec<String>,
    last_size: Vec<String>,
    last_busbw: Vec<String>,
    finished: bool,
    cause: String,
}

fn facts() -> Vec<Facts> {
    let text = std::fs::read_to_string(dir().join("facts.tsv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let list = |s: &str| -> Vec<String> {
        if s == "-" {
            vec![]
        } else {
            s.split(',').map(str::to_string).collect()
        }
    };
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            Facts {
                file: f[col("file")].to_string(),
                nccl_version: f[col("nccl_version")].to_string(),
                tests_version: f[col("tests_version")].to_string(),
                ranks: f[col("ranks")].to_string(),
                hosts: f[col("hosts")].to_string(),
                transport: f[col("transport")].to_string(),
                collectives: list(f[col("collectives")]),
                rows: list(f[col("rows")]),
                last_size: list(f[col("last_size_bytes")]),
                last_busbw: list(f[col("last_busbw")]),
                finished: f[col("finished")] == "yes",
                cause: f[col("cause")].to_string(),
            }
        })
        .collect()
}

/// Where this reader and facts.tsv's author read a log differently, and why (each is the
/// reader's reading, checked by hand against the log).
fn reading_of(file: &str, fact: &str) -> Option<&'static str> {
    match (file, fact) {
        // One host: NCCL's network carries nothing between its ranks, whatever it
        // initialised (the log hangs before any channel).
        ("nccl-issue-257-hang-after-init-socket.txt", "transport")
        | ("tensorrt-llm-issue-408-hash-stripped-markdown-socket.txt", "transport") => Some("-"),
        // `NET/IB : No device found.` is an INFO line, and the run goes on over sockets:
        // the transport says so; it is not an error.
        ("nccl-issue-941-container-net-ib-no-device-found.txt", "cause") => Some("-"),
        _ => None,
    }
}

fn transport_fits(want: &str, doc: &Value) -> bool {
    let t = doc["transport"].as_str().unwrap_or("");
    match want {
        "-" => true,
        "Socket" => t.contains("NET/Socket"),
        "IB" => t.contains("NET/IB"),
        "P2P/SHM only" => !t.contains("NET/"),
        other => t.contains(other),
    }
}

#[test]
fn every_public_log_is_read_as_an_expert_reads_it() {
    let all = facts();
    assert!(all.len() >= 20, "a corpus of at least 20 logs: {}", all.len());
    let mut checked = 0;
    for f in &all {
        let path = dir().join(&f.file);
        let (docs, code) = parse(&path, &[]);
        let what = &f.file;
        let tables: Vec<&Value> = docs
            .iter()
            .filter(|d| d["kind"] == "nccl-tests" && !d["rows"].as_array().unwrap().is_empty())
            .collect();
        // Every table, in order; one that stopped before its first row ("0") has none.
        let with_rows: Vec<usize> = (0..f.rows.len()).filter(|k| f.rows[*k] != "0").collect();
        assert_eq!(tables.len(), with_rows.len(), "{what}: tables {docs:#?}");
        if with_rows.len() < f.rows.len() {
            assert!(
                docs.iter()
                    .any(|d| d["kind"] == "nccl-tests" && d["rows"].as_array().unwrap().is_empty()),
                "{what}"
            );
        }
        for (t, k) in tables.iter().zip(with_rows) {
            let rows = t["rows"].as_array().unwrap();
            assert_eq!(rows.len().to_string(), f.rows[k], "{what}: rows of table {k}");
            let last = rows.last().unwrap();
            assert_eq!(
                last["size"].to_string(),
                f.last_size[k],
                "{what}: last size of table {k}"
            );
            let busbw = last["out_of_place"]["busbw"].as_f64().unwrap();
            let want: f64 = f.last_busbw[k].parse().unwrap();
            assert!(
                (busbw - want).abs() < 1e-9,
                "{what}: last busbw of table {k}: {busbw} vs {want}"
            );
            let c = &f.collectives[k];
            let named = t["collective"].as_str();
            let choices = t["collective_choices"].as_str().unwrap_or("");
            assert!(
                named == Some(c.as_str()) || (named.is_none() && choices.contains(c.as_str())),
                "{what}: collective of table {k}: {named:?} (choices {choices:?}), the log's is {c}"
            );
        }
        let doc = docs.last().unwrap();
        if f.nccl_version != "-" {
            let v = docs.iter().find_map(|d| d["nccl_version"].as_str()).unwrap_or("");
            assert!(
                v.starts_with(&f.nccl_version),
                "{what}: NCCL {v} vs {}",
                f.nccl_version
            );
        }
        if let Some(v) = f.tests_version.strip_prefix("nccl-tests version ") {
            assert_eq!(doc["tests_version"], v, "{what}");
        }
        if f.ranks != "-" {
            let r = docs.iter().find_map(|d| d["ranks"].as_u64());
            assert_eq!(r.map(|r| r.to_string()), Some(f.ranks.clone()), "{what}: ranks");
        }
        if f.hosts != "-" {
            assert_eq!(doc["hosts"].to_string(), f.hosts, "{what}: hosts");
        }
        let transport = reading_of(what, "transport").unwrap_or(&f.transport);
        assert!(
            transport_fits(transport, doc),
            "{what}: transport {} vs {transport}",
            doc["transport"]
        );
        // Finished or not, and the exit code that says so.
        let finished = docs.iter().all(|d| d["finished"] == true);
        assert_eq!(finished, f.finished, "{what}: finished");
        assert_eq!(code, Some(if f.finished { 0 } else { 1 }), "{what}: exit");
        if !f.finished {
            assert!(doc["unfinished"].as_str().is_some(), "{what}: says how it ended");
        }
        let cause = reading_of(what, "cause").unwrap_or(&f.cause);
        match (cause, docs.iter().find_map(|d| d["cause"].as_str())) {
            ("-", None) => {}
            ("-", Some(c)) => panic!("{what}: a cause where the log reports none: {c}"),
            (want, None) => panic!("{what}: no cause; the log's is {want}"),
            (want, Some(c)) => {
                // The line as posted holds the cause read (`NCCL WARN ...` from where NCCL's
                // message starts), or the cause read holds the posted one (PyTorch's error
                // with NCCL's last error appended).
                let head: String = c
                    .trim_start_matches("NCCL WARN ")
                    .split("; ")
                    .next()
                    .unwrap()
                    .chars()
                    .take(60)
                    .collect();
                assert!(
                    want.contains(&head) || c.contains(want),
                    "{what}: cause {c:?}, the log's line {want:?}"
                );
            }
        }
        checked += 1;
    }
    eprintln!("{checked} logs read");
}

/// `--machine-type` and `--profile` judge the transport as a run's verdict does: a run
/// over NET/Socket on a GPUDirect machine type fails with that cause, a plugin other than
/// the profile's is named, and `--profile none` judges busbw alone.
#[test]
fn the_transport_is_judged_as_a_runs_is() {
    // Two A100 nodes over NET/Socket (the RDMA plugin found no IB device).
    let socket = dir().join("cre-a100-2node-socket-all_reduce-kubectl-timestamps.txt");
    let (docs, code) = parse(&socket, &["--machine-type", "a3-megagpu-8g", "--nodes", "2"]);
    let v = &docs[0]["verdict"];
    assert_eq!(v["grade"], "fail", "{v:#}");
    let reason = v["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("profile tcpxo expects FasTrak, but NCCL used NET/Socket"),
        "{reason}"
    );
    assert_eq!(code, Some(1), "a failed verdict");
    assert_eq!(docs[0]["net"]["plugin"], "NCCL RDMA Plugin v11");
    let (docs, code) = parse(
        &socket,
        &[
            "--machine-type",
            "a3-megagpu-8g",
            "--nodes",
            "2",
            "--profile",
            "none",
        ],
    );
    assert_ne!(docs[0]["verdict"]["grade"], "fail");
    assert_eq!(code, Some(0));

    // aws-ofi-nccl on an RDMA profile: the network its channels ran over is named.
    let ofi = dir().join("eks-blueprints-efa-t4-2node-all_reduce-ompi-tag-output.txt");
    let (docs, _) = parse(&ofi, &["--profile", "rdma"]);
    let reason = docs[0]["verdict"]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("profile rdma expects gIB, but NCCL used NET/AWS Libfabric"),
        "{reason}"
    );

    // The text form says the same on its verdict line.
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(["nccl", "parse", socket.to_str().unwrap(), "--profile", "tcpx"])
        .env_clear()
        .env("HOME", home.path())
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(
        t.lines()
            .any(|l| l
                .starts_with("verdict FAIL: profile tcpx expects GPUDirectTCPX, but NCCL used NET/Socket")),
        "{t}"
    );
    assert!(
        t.contains("transport NET/Socket (plugin NCCL RDMA Plugin v11)"),
        "{t}"
    );
}

/// A crashed nccl-tests run and a PyTorch log, as text: what was read, that it did not
/// finish, and why.
#[test]
fn crashed_and_foreign_logs_say_what_they_have() {
    let home = tempfile::tempdir().unwrap();
    let run = |f: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_flightdeck"))
            .args(["nccl", "parse", dir().join(f).to_str().unwrap()])
            .env_clear()
            .env("HOME", home.path())
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            out.status.code(),
        )
    };
    let (t, code) = run("nccl-issue-473-shm-docker-unhandled-system-error.txt");
    assert_eq!(code, Some(1));
    assert!(
        t.contains("the run did not finish: it stopped before its first row; cause: Test NCCL failure common.cu:777 'unhandled system error'"),
        "{t}"
    );
    assert!(t.contains("ranks 4, 1 host"), "{t}");
    let (t, code) = run("mambatree-issue-14-pytorch-bootstrap-no-socket-interface.txt");
    assert_eq!(code, Some(1));
    assert!(t.starts_with("PyTorch log, "), "{t}");
    assert!(t.contains("NCCL 2.14.3"), "{t}");
    assert!(
        t.contains("not an nccl-tests table: a PyTorch log; cause: NCCL error in: "),
        "{t}"
    );
    assert!(
        t.trim_end()
            .ends_with("Last error: Bootstrap : no socket interface found"),
        "{t}"
    );
}
