//! `flightdeck nccl parse`: the real binary on the recorded real nccl-tests outputs in
//! tests/fixtures/nccl (copied from ../shared/fixtures/nccl), and on variants of them
//! rewritten the way launchers and older nccl-tests versions print them.

use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/nccl")
        .join(name)
}

fn fixture_text(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).unwrap()
}

fn flightdeck(args: &[&str], stdin: Option<&str>) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(args)
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run flightdeck");
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(text.as_bytes()).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `nccl parse --json` of a fixture file: exit 0, one JSON document, nothing on stderr.
fn parse_file(name: &str) -> Value {
    let path = fixture(name);
    let out = flightdeck(&["nccl", "parse", path.to_str().unwrap(), "--json"], None);
    document(&out, name)
}

/// `nccl parse - --json` of a text on stdin.
fn parse_stdin(input: &str, what: &str) -> Value {
    document(&flightdeck(&["nccl", "parse", "-", "--json"], Some(input)), what)
}

fn document(out: &Output, what: &str) -> Value {
    assert_eq!(out.status.code(), Some(0), "{what}: {}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "{what}: stderr {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{what}: not one JSON document: {e}"))
}

/// The out-of-place busbw of the row of `size` bytes.
fn oop_busbw(doc: &Value, size: u64) -> f64 {
    let row = doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["size"] == size)
        .unwrap_or_else(|| panic!("no row of {size} bytes"));
    row["out_of_place"]["busbw"].as_f64().unwrap()
}

struct Expect {
    file: &'static str,
    collective: Value,
    nccl_version: &'static str,
    ranks: Value,
    rows: usize,
    avg_busbw: f64,
    peak_busbw: f64,
    transport: Value,
    /// (size, out-of-place busbw) of one row.
    row: (u64, f64),
}

const GIB8: u64 = 8 << 30;
const MIB64: u64 = 64 << 20;

fn expectations() -> Vec<Expect> {
    let null = Value::Null;
    let two = Value::from(2);
    vec![
        Expect {
            file: "h200x2-all_reduce.txt",
            collective: "all_reduce".into(),
            nccl_version: "2.28.9",
            ranks: two.clone(),
            rows: 31,
            avg_busbw: 112.161,
            peak_busbw: 347.71,
            transport: null.clone(),
            row: (MIB64, 268.25),
        },
        Expect {
            file: "h200x2-all_gather.txt",
            collective: "all_gather".into(),
            nccl_version: "2.28.9",
            ranks: two.clone(),
            rows: 31,
            avg_busbw: 90.4437,
            peak_busbw: 299.39,
            transport: null.clone(),
            row: (MIB64, 212.85),
        },
        Expect {
            file: "h200x2-reduce_scatter.txt",
            collective: "reduce_scatter".into(),
            nccl_version: "2.28.9",
            ranks: two.clone(),
            rows: 31,
            avg_busbw: 88.51,
            peak_busbw: 294.68,
            transport: null.clone(),
            row: (MIB64, 209.62),
        },
        Expect {
            file: "h200x2-alltoall.txt",
            collective: "alltoall".into(),
            nccl_version: "2.28.9",
            ranks: two.clone(),
            rows: 31,
            avg_busbw: 103.213,
            peak_busbw: 338.58,
            transport: null.clone(),
            row: (MIB64, 243.18),
        },
        Expect {
            file: "h200x2-sendrecv.txt",
            collective: "sendrecv".into(),
            nccl_version: "2.28.9",
            ranks: two.clone(),
            rows: 31,
            avg_busbw: 115.369,
            peak_busbw: 366.19,
            transport: null.clone(),
            row: (MIB64, 265.88),
        },
        Expect {
            file: "h200x2-all_reduce-nccl-debug.txt",
            collective: "all_reduce".into(),
            nccl_version: "2.28.9+cuda13.0",
            ranks: two,
            rows: 4,
            avg_busbw: 166.116,
            peak_busbw: 269.57,
            transport: "NVLink P2P".into(),
            row: (1 << 20, 61.83),
        },
        Expect {
            // No banner, no device list: collective and ranks are unknown.
            file: "gke-b200-2node-all_gather.txt",
            // No banner: read from the table (a count per rank, no reduction, the
            // in-place half checked).
            collective: Value::from("all_gather"),
            nccl_version: "2.26.6+cuda12.8",
            ranks: null.clone(),
            rows: 24,
            avg_busbw: 135.094,
            peak_busbw: 376.4,
            transport: null,
            row: (MIB64, 266.37),
        },
    ]
}

#[test]
fn every_fixture_parses_to_the_design_document() {
    for e in expectations() {
        let doc = parse_file(e.file);
        // A log whose rank list names the machine (one host of H200s) is judged too.
        let judged = doc.get("verdict").is_some();
        assert_eq!(judged, e.file.starts_with("h200x2"), "{}", e.file);
        if judged {
            assert_eq!(doc["machine_type"]["from"], "nccl-tests rank list", "{}", e.file);
        }
        let keys: Vec<&str> = doc
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .filter(|k| !["machine_type", "verdict"].contains(k))
            .collect();
        let mut want_keys = vec![
            "avg_busbw",
            "collective",
            "nccl_version",
            "peak_busbw",
            "ranks",
            "rows",
            "transport",
            "kind",
            "tests_version",
            "collective_from",
            "collective_choices",
            "hosts",
            "finished",
            "cause",
            "net",
        ];
        want_keys.sort_unstable();
        assert_eq!(keys, want_keys, "{}", e.file);
        assert_eq!(doc["collective"], e.collective, "{}", e.file);
        assert_eq!(doc["nccl_version"], e.nccl_version, "{}", e.file);
        assert_eq!(doc["ranks"], e.ranks, "{}", e.file);
        assert_eq!(doc["rows"].as_array().unwrap().len(), e.rows, "{}", e.file);
        assert_eq!(doc["avg_busbw"].as_f64(), Some(e.avg_busbw), "{}", e.file);
        assert_eq!(doc["peak_busbw"].as_f64(), Some(e.peak_busbw), "{}", e.file);
        assert_eq!(doc["transport"], e.transport, "{}", e.file);
        assert_eq!(oop_busbw(&doc, e.row.0), e.row.1, "{}", e.file);
        for row in doc["rows"].as_array().unwrap() {
            assert_eq!(row["type"], "float", "{}", e.file);
            assert_eq!(row["root"], -1, "{}", e.file);
            for half in ["out_of_place", "in_place"] {
                let m = row[half].as_object().unwrap();
                let keys: Vec<&str> = m.keys().map(String::as_str).collect();
                assert_eq!(keys, ["algbw", "busbw", "time_us", "wrong"], "{}", e.file);
            }
        }
    }
}

#[test]
fn figures_are_exactly_as_printed() {
    let doc = parse_file("h200x2-all_reduce.txt");
    let last = &doc["rows"][30];
    assert_eq!(last["size"], GIB8);
    assert_eq!(last["count"], 2147483648u64);
    assert_eq!(last["redop"], "sum");
    assert_eq!(last["out_of_place"]["time_us"], 24704.0);
    assert_eq!(last["out_of_place"]["algbw"], 347.71);
    assert_eq!(last["in_place"]["time_us"], 24672.7);
    assert_eq!(last["in_place"]["busbw"], 348.16);
    assert_eq!(last["out_of_place"]["wrong"], 0);
    // The raw text: shortest round-trip figures, integer `wrong`.
    let path = fixture("h200x2-all_reduce.txt");
    let raw = text(&flightdeck(&["nccl", "parse", path.to_str().unwrap(), "--json"], None).stdout);
    assert!(raw.contains("\"busbw\": 347.71,"), "{raw}");
    assert!(raw.contains("\"wrong\": 0\n"), "{raw}");
    assert!(!raw.contains("347.7100"), "{raw}");

    // alltoall and sendrecv check nothing in-place: `wrong` is null there.
    for file in ["h200x2-alltoall.txt", "h200x2-sendrecv.txt"] {
        let doc = parse_file(file);
        for row in doc["rows"].as_array().unwrap() {
            assert_eq!(row["in_place"]["wrong"], Value::Null, "{file}");
            assert_eq!(row["out_of_place"]["wrong"], 0, "{file}");
        }
    }
    let doc = parse_file("h200x2-alltoall.txt");
    assert_eq!(doc["rows"][0]["size"], 0);
    assert_eq!(doc["rows"][0]["redop"], "none");
}

#[test]
fn stdin_gives_the_same_document() {
    for e in expectations() {
        assert_eq!(
            parse_stdin(&fixture_text(e.file), e.file),
            parse_file(e.file),
            "{}",
            e.file
        );
    }
}

/// Every line of `text` through `f`.
fn map_lines(text: &str, f: impl Fn(&str) -> String) -> String {
    text.lines().map(|l| f(l) + "\n").collect()
}

/// The header as old nccl-tests printed it: `wrong` for `#wrong`, and the column lines
/// without their `#`.
fn old_header(l: &str) -> String {
    let body = l.trim_start_matches('#');
    let t = body.trim_start();
    if t.starts_with("size") || t.starts_with("(B)") || t.starts_with("out-of-place") {
        format!(" {}", body.replace("#wrong", " wrong"))
    } else {
        l.to_string()
    }
}

/// nccl-tests 2.0-2.12: no root column (the 8 characters `  %6s` after redop), `error`.
fn without_root(l: &str) -> String {
    let t = l.trim_start();
    let is_row = t.starts_with(|c: char| c.is_ascii_digit());
    let is_header = t.trim_start_matches('#').trim_start().starts_with("size");
    if is_row || is_header {
        let cut = 44;
        format!("{}{}", &l[..cut], &l[cut + 8..]).replace("#wrong", " error")
    } else {
        l.to_string()
    }
}

#[test]
fn launcher_prefixes_and_old_headers_parse_the_same() {
    type Transform = fn(&str) -> String;
    let variants: [(&str, Transform); 5] = [
        ("mpirun --tag-output", |l| format!("[1,0]<stdout>:{l}")),
        ("SkyPilot log prefix", |l| format!("(head, rank=0, pid=123) {l}")),
        ("srun --label + Open MPI 5", |l| format!("0: [1,0]<stdout>: {l}")),
        ("old header", old_header),
        ("CRLF", |l| format!("{l}\r")),
    ];
    for e in expectations() {
        let plain = parse_file(e.file);
        let original = fixture_text(e.file);
        for (what, f) in variants {
            let variant = map_lines(&original, f);
            assert_ne!(variant, original);
            assert_eq!(parse_stdin(&variant, what), plain, "{} as {what}", e.file);
        }
    }
}

#[test]
fn the_format_without_a_root_column() {
    for e in expectations() {
        let mut want = parse_file(e.file);
        for row in want["rows"].as_array_mut().unwrap() {
            row["root"] = Value::Null;
        }
        let variant = map_lines(&fixture_text(e.file), without_root);
        assert!(variant.contains(" error "), "{}", e.file);
        let mut got = parse_stdin(&variant, "without root");
        // A table without its name is read for its collective; without the root column
        // (before 2.13) all_gather's and alltoall's figures are the same, and that is said.
        if got["collective_from"] == "the table" || got["collective_choices"].is_string() {
            for k in ["collective", "collective_from", "collective_choices"] {
                got[k] = want[k].clone();
            }
        }
        assert_eq!(got, want, "{}", e.file);
    }
}

#[test]
fn debug_lines_interleaved_inside_rows() {
    // NCCL prints a debug line while nccl-tests is half-way through a row (right after
    // the root column and between the halves): the rows come out whole.
    let info = "node-a:4242:4250 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n";
    for e in expectations() {
        let plain = parse_file(e.file);
        let variant = map_lines(&fixture_text(e.file), |l| {
            if l.trim_start().starts_with(|c: char| c.is_ascii_digit()) && l.len() > 85 {
                format!("{}{info}{}{info}{}", &l[..52], &l[52..85], &l[85..])
            } else {
                l.to_string()
            }
        });
        let doc = parse_stdin(&variant, "interleaved");
        assert_eq!(doc["rows"], plain["rows"], "{}", e.file);
        assert_eq!(doc["avg_busbw"], plain["avg_busbw"], "{}", e.file);
        let want_transport = if e.transport.is_null() {
            "P2P".into()
        } else {
            e.transport.clone()
        };
        assert_eq!(doc["transport"], want_transport, "{}", e.file);
    }
}

#[test]
fn table_output() {
    let path = fixture("h200x2-all_reduce-nccl-debug.txt");
    let out = flightdeck(&["nccl", "parse", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    let lines: Vec<&str> = t.lines().collect();
    assert!(
        lines[0].contains("out-of-place") && lines[0].contains("in-place"),
        "{t}"
    );
    for col in [
        "size", "count", "type", "redop", "root", "time(us)", "algbw", "busbw", "wrong",
    ] {
        assert!(lines[1].contains(col), "{t}");
    }
    assert_eq!(
        lines[2].split_whitespace().collect::<Vec<_>>(),
        [
            "1M", "262144", "float", "sum", "-1", "16.96", "61.83", "61.83", "0", "15.38", "68.19", "68.19",
            "0"
        ]
    );
    assert!(lines[5].trim_start().starts_with("64M"), "{t}");
    assert!(lines.iter().all(|l| !l.ends_with(' ')), "no trailing blanks");
    assert_eq!(
        lines[lines.len() - 2],
        "collective all_reduce, ranks 2, 1 host, NCCL 2.28.9+cuda13.0, nccl-tests 2.19.6, \
          transport NVLink P2P (no net plugin found: libnccl-net.so), \
          avg busbw 166.116 GB/s, peak busbw 269.57 GB/s at 64M, 4 rows"
    );
    // No --machine-type: the rank list (one host, two H200s) names the machine.
    assert!(
        lines
            .last()
            .unwrap()
            .starts_with("verdict PASS: peak 269.57 GB/s is 100%")
            && lines
                .last()
                .unwrap()
                .ends_with("[2xH200, from nccl-tests rank list]"),
        "{t}"
    );

    let out = flightdeck(
        &["nccl", "parse", "-"],
        Some(&fixture_text("gke-b200-2node-all_gather.txt")),
    );
    let t = text(&out.stdout);
    assert!(t.contains("  8G  134217728  float   none    -1"), "{t}");
    assert!(
        t.ends_with(
            "collective all_gather (inferred from the table), ranks unknown, NCCL 2.26.6+cuda12.8, \
             transport unknown (no NCCL_DEBUG=INFO lines), \
             avg busbw 135.094 GB/s, peak busbw 376.4 GB/s at 8G, 24 rows\n"
        ),
        "{t}"
    );
}

#[test]
fn errors_name_the_file_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.txt");
    let out = flightdeck(&["nccl", "parse", missing.to_str().unwrap(), "--json"], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("cannot read {}", missing.display())),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");

    let not_nccl = dir.path().join("train.log");
    std::fs::write(
        &not_nccl,
        "Step: 1 | Time: 27.02s | Loss: 1.3697\nStep: 2 | Time: 26.98s | Loss: 1.2811\n",
    )
    .unwrap();
    for json in [true, false] {
        let mut args = vec!["nccl", "parse", not_nccl.to_str().unwrap()];
        if json {
            args.push("--json");
        }
        let out = flightdeck(&args, None);
        assert_eq!(out.status.code(), Some(1));
        assert!(out.stdout.is_empty());
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("{} is not an NCCL log", not_nccl.display())),
            "{err}"
        );
    }

    let out = flightdeck(&["nccl", "parse", "-"], Some(""));
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("stdin is not an NCCL log"));

    // A training log with NCCL's lines in it is read for them, and is no finished run.
    let out = flightdeck(
        &["nccl", "parse", "-"],
        Some("Step: 1 | Time: 27.02s | Loss: 1.3697\nvm:1:2 [0] NCCL INFO Using network Socket\n"),
    );
    assert_eq!(out.status.code(), Some(1));
    let s = text(&out.stdout);
    assert!(s.starts_with("NCCL log, collective unknown"), "{s}");
    assert!(s.contains("not an nccl-tests table: an NCCL log"), "{s}");
}

#[test]
fn a_log_with_two_tests_gives_an_array() {
    let input = fixture_text("h200x2-all_reduce.txt") + &fixture_text("h200x2-sendrecv.txt");
    let doc = parse_stdin(&input, "two tests");
    let docs = doc.as_array().expect("an array of documents");
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[0], parse_file("h200x2-all_reduce.txt"));
    assert_eq!(docs[1], parse_file("h200x2-sendrecv.txt"));
}
