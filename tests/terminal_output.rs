//! Nothing that a node, an API or a file of another user sends reaches the operator's
//! terminal unfiltered (hostile review D3). Each test plants control sequences at the
//! remote end ([`EVIL`]: OSC 52 putting `rm -rf ~` on the clipboard, an OSC 0 title, BEL,
//! a screen clear, SGR 8 (concealed text) and the C1 CSI 0x9b) and runs flightdeck on a
//! pty (util-linux `script`), stdout and stderr both: what the pty got holds no ESC, BEL,
//! C1 or other C0 character but newline and tab ([`assert_nothing_acts`]), and the
//! planted text is there, shown (`␛]52;c;…^G`).
//!
//! The one exception is a node's streamed output (`exec`, `job run` following, `job
//! logs`): there colour (SGR) passes on a terminal, `--raw` passes everything, and a pipe
//! gets every byte; every other sequence is shown.
//!
//! Every CLI path that prints outside text, and the test that covers it:
//!
//! | path | where the text comes from | test |
//! |---|---|---|
//! | `exec` stdout and stderr (streams) | node | `exec_streams_show_every_sequence_but_colour` |
//! | `exec --collapse` groups | node | `exec_streams_show_every_sequence_but_colour` |
//! | `exec`'s per-node error line, and its `[error]` with `--collapse` | Kubernetes API (a 403's message) | `gke_api_text_is_shown` |
//! | `fleet status` of a GKE fleet (node and pool names, conditions, Kueue's reason) | Kubernetes API | `gke_api_text_is_shown` |
//! | `fleet gc` listing of GKE objects | Kubernetes API | `gke_api_text_is_shown` |
//! | error chains printed by `main` (`flightdeck: …`) | Kubernetes API, node | `gke_api_text_is_shown`, `testbed_node_text_is_shown` |
//! | `nccl run` on GKE: set-up errors | Kubernetes API | `gke_api_text_is_shown` |
//! | `fleet apply` (GCP): progress and the operation's error | Compute API | `gce_api_text_is_shown` |
//! | `fleet status` (GCP): instance status | Compute API | `gce_api_text_is_shown` |
//! | `fleet gc` (GCP): orphan listing | Compute API | `gce_api_text_is_shown` |
//! | `fleet plan` / `apply` errors (an API error body) | Compute API | `gce_api_text_is_shown` |
//! | `doctor`: a node's line as it answers, the findings, `--evidence` | node (nvidia-smi, the kernel log, sysctl) | `testbed_node_text_is_shown` |
//! | `fleet bootstrap`: step progress, a failure's reason and tail, the summary | node | `testbed_node_text_is_shown` |
//! | `nccl run`: pre-flight report, node-to-node SSH set-up errors, launch errors, the error tail and cause | node | `testbed_node_text_is_shown` |
//! | `nics`: NIC names, errors | node | `testbed_node_text_is_shown` |
//! | `job run` progress and errors, `job logs` (stream), `job show`, `job stop` | node | `job_text_is_shown` |
//! | `nccl history`, `nccl compare`, `nccl attach` | the run history (what nodes printed) | `nccl_history_is_shown` |
//! | `nccl parse FILE` | a file | `files_of_another_user_are_shown` |
//! | `fleet validate` / `plan` / `apply`: diagnostics of a fleet file | a file | `files_of_another_user_are_shown` |
//! | `job run`: diagnostics of a job file | a file | `files_of_another_user_are_shown` |
//! | `offers`: the cached live catalog | Compute/Billing API, kept in a file | `files_of_another_user_are_shown` |
//!
//! `every_print_site_goes_through_the_sanitiser` holds the code to it: no line of the
//! CLI prints but through `outln!`/`out!`/`errln!`/`err!` (which pass
//! `term::visible::text`), a status line (`cli::StatusLine`), or a stream marked as
//! such. The cockpit is covered by `tests/hostile_terminal.rs`.

mod support;

use std::path::Path;
use support::{flightdeck, text};

const PAYLOAD: &str = r"printf '\033]52;c;ZXZpbA==\007\033]0;owned\007\033[2J\033[31mred\033[0m\n'";

/// What a hostile node, API or file sends.
const EVIL: &str = "\u{1b}]52;c;cm0gLXJmIH4K\u{7}\u{1b}]0;OWNED\u{7}\u{1b}[2J\u{1b}[8m\u{9b}2J";

/// The same for a node's shell (`printf`), C1 CSI as UTF-8.
const EVIL_PRINTF: &str = r"\033]52;c;cm0gLXJmIH4K\007\033]0;OWNED\007\033[2J\033[8m\302\2332J";

/// How [`EVIL`]'s start looks once shown.
const SHOWN: &str = "␛]52;c;cm0gLXJmIH4K^G";

/// Run flightdeck with `args` on a pty (util-linux `script`); what the pty showed.
fn on_a_terminal(home: &Path, args: &[&str]) -> String {
    on_a_terminal_env(home, args, &[])
}

/// [`on_a_terminal`] with more environment.
fn on_a_terminal_env(home: &Path, args: &[&str], env: &[(&str, String)]) -> String {
    let bin = env!("CARGO_BIN_EXE_flightdeck");
    let cmd = std::iter::once(format!("timeout 300 {bin}"))
        .chain(args.iter().map(|a| format!("'{}'", a.replace('\'', "'\\''"))))
        .collect::<Vec<_>>()
        .join(" ");
    let mut c = std::process::Command::new("script");
    c.args(["-qec", &cmd, "/dev/null"])
        .env("HOME", home)
        .env_remove("FLIGHTDECK_HOME");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("util-linux script");
    text(&out.stdout)
}

/// What reached the terminal holds no control character but newline and tab, beyond
/// flightdeck's own status line (`\r ESC[2K`, on a terminal) and the pty's `\r\n`.
fn assert_nothing_acts(shown: &str, what: &str) {
    let s = clean(shown);
    let bad: Vec<(usize, char)> = s
        .char_indices()
        .filter(|(_, c)| c.is_control() && !matches!(c, '\n' | '\t'))
        .collect();
    assert!(
        bad.is_empty(),
        "{what}: control characters reached the terminal at {:?}:\n{s:?}",
        &bad[..bad.len().min(8)]
    );
}

/// The pty's text without the pty's and the status line's own controls.
fn clean(shown: &str) -> String {
    shown.replace("\r\u{1b}[2K", "").replace("\r\n", "\n")
}

/// A node's stream on a terminal: colour (SGR) passes, nothing else acts; the planted
/// text is there, shown.
fn assert_stream_shown(shown: &str, what: &str) {
    let mut s = String::new();
    let mut rest = shown;
    while let Some(at) = rest.find("\u{1b}[") {
        s.push_str(&rest[..at]);
        let tail = &rest[at + 2..];
        let end = tail
            .find(|c: char| !(c.is_ascii_digit() || c == ';' || c == ':'))
            .unwrap_or(tail.len());
        if tail[end..].starts_with('m') {
            rest = &tail[end + 1..];
        } else {
            s.push_str("\u{1b}[");
            rest = tail;
        }
    }
    s.push_str(rest);
    assert_shown(&s, what);
}

/// [`assert_nothing_acts`], and the planted text is there, shown.
fn assert_shown(shown: &str, what: &str) {
    assert_nothing_acts(shown, what);
    assert!(
        clean(shown).contains(SHOWN),
        "{what}: the planted text is not shown:\n{shown:?}"
    );
}

#[test]
fn exec_streams_show_every_sequence_but_colour() {
    let home = tempfile::tempdir().unwrap();
    support::apply_local_fleet(home.path());
    let shown = on_a_terminal(home.path(), &["exec", "local", "--", PAYLOAD]);
    assert!(shown.contains("␛]52;c;ZXZpbA==^G␛]0;owned^G␛[2J"), "{shown:?}");
    assert!(
        shown.contains("\u{1b}[31mred\u{1b}[0m"),
        "colour passes: {shown:?}"
    );
    assert!(!shown.contains("\u{1b}]52"), "{shown:?}");
    let raw = on_a_terminal(home.path(), &["--raw", "exec", "local", "--", PAYLOAD]);
    assert!(
        raw.contains("\u{1b}]52;c;ZXZpbA==\u{7}"),
        "--raw passes them: {raw:?}"
    );
    // Into a pipe: every byte as it came (a file or another program gets the real output).
    let piped = flightdeck(home.path(), &["exec", "local", "--", PAYLOAD]);
    assert!(text(&piped.stdout).contains("\u{1b}]52;c;ZXZpbA==\u{7}"));

    // Beyond colour nothing acts: stdout, stderr, grouped.
    let evil = format!("printf '{EVIL_PRINTF}\\n'; printf '{EVIL_PRINTF}\\n' >&2; exit 3");
    for extra in [&[][..], &["--collapse"][..]] {
        let mut args = vec!["exec", "local"];
        args.extend_from_slice(extra);
        args.extend(["--", &evil]);
        let shown = on_a_terminal(home.path(), &args);
        assert_stream_shown(&shown, &format!("exec {extra:?}"));
        assert!(shown.contains("exit 3"), "{shown:?}");
    }
}

/// The source of every CLI module, and the file name.
fn cli_sources() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli");
    let mut out = vec![];
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        // The connection holder's own status (mux_cmd.rs) is not outside text but the
        // holder's; it is checked where the holder is (see SECURITY.md).
        if name.ends_with(".rs") && name != "mux_cmd.rs" {
            out.push((name, std::fs::read_to_string(&p).unwrap()));
        }
    }
    out.sort();
    out
}

/// No line of the CLI reaches stdout or stderr but through the sanitiser: the print
/// macros are `outln!`/`out!`/`errln!`/`err!`; a status line is `StatusLine`; a write to
/// a terminal handle passes `text(`/`shown(` on its line or is marked on the line
/// before: `// stream` (a node's output, [`flightdeck::term::visible::for_stdout`]) or
/// `// shown` (sanitised just above).
#[test]
fn every_print_site_goes_through_the_sanitiser() {
    let mut bad = vec![];
    for (name, src) in cli_sources() {
        let lines: Vec<&str> = src.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let marked = |m: &str| i > 0 && lines[i - 1].trim() == m;
            let raw_macro = ["println!(", "print!(", "eprintln!(", "eprint!("]
                .iter()
                .any(|m| {
                    code.match_indices(m).any(|(at, _)| {
                        let before = code[..at].chars().last();
                        let empty = code[at + m.len()..].starts_with(')');
                        // `outln!`'s own definition prints the sanitised text.
                        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                            && !empty
                            && !code.contains("$crate::term::visible::text")
                    })
                });
            let line_status = code.contains("progress::Line::start") && !code.contains("StatusLine(");
            // Writes to a handle: `out`, `err`, `w`, `stdout`, `stderr`, `stderr.lock()`.
            let handle_write = ["writeln!(", "write!(", ".write_all("]
                .iter()
                .any(|m| code.contains(m))
                && [
                    "out",
                    "err",
                    "w",
                    "stdout",
                    "stderr",
                    "stderr.lock()",
                    "std::io::stderr()",
                ]
                .iter()
                .any(|h| {
                    code.contains(&format!("writeln!({h},"))
                        || code.contains(&format!("write!({h},"))
                        || code.contains(&format!("writeln!({h})"))
                        || code.trim_start().starts_with(&format!("{h}.write_all("))
                        || code.contains(&format!(" {h}.write_all("))
                });
            let passes = code.contains("text(")
                || code.contains("shown(")
                || marked("// stream")
                || marked("// shown")
                || code.contains("writeln!(w)");
            if raw_macro || line_status || (handle_write && !passes) {
                bad.push(format!("src/cli/{name}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "these lines print without the sanitiser:\n{}",
        bad.join("\n")
    );
}

/// The state directory of `home`.
fn state_dir(home: &Path) -> std::path::PathBuf {
    let out = flightdeck(home, &["config", "path", "--state"]);
    std::path::PathBuf::from(text(&out.stdout).trim())
}

/// [`EVIL`] in a YAML double-quoted scalar.
const EVIL_YAML: &str = r"\e]52;c;cm0gLXJmIH4K\a\e]0;OWNED\a\e[2J\e[8m\x9b2J";

#[test]
fn files_of_another_user_are_shown() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    // A fleet file from a shared repository, its name and a key holding the payload.
    let fleet = h.join("hostile.yaml");
    std::fs::write(
        &fleet,
        format!(
            "type: fleet\nname: \"lab{EVIL_YAML}\"\n\"key{EVIL_YAML}\": 1\nssh_config:\n  hosts: [10.0.0.1]\n"
        ),
    )
    .unwrap();
    let f = fleet.to_str().unwrap();
    for args in [
        &["fleet", "validate", f][..],
        &["fleet", "plan", f],
        &["fleet", "apply", f, "--yes"],
    ] {
        assert_shown(&on_a_terminal(h, args), &format!("{args:?}"));
    }
    // A job file, the same.
    let job = h.join("job.yaml");
    std::fs::write(
        &job,
        format!(
            "type: task\nname: \"x{EVIL_YAML}\"\nfleet: local\ncommands: [true]\n\"key{EVIL_YAML}\": 1\n"
        ),
    )
    .unwrap();
    assert_shown(
        &on_a_terminal(h, &["job", "run", job.to_str().unwrap()]),
        "job run FILE",
    );
    // nccl-tests output from anywhere: the NCCL version it claims.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl/h200x2-alltoall.txt");
    let nccl = std::fs::read_to_string(fixture).unwrap().replacen(
        "#\n",
        &format!("#\nNCCL version 2.28.9{EVIL}+cuda12.9\n"),
        1,
    );
    let out = h.join("nccl.txt");
    std::fs::write(&out, nccl).unwrap();
    assert_shown(
        &on_a_terminal(h, &["nccl", "parse", out.to_str().unwrap()]),
        "nccl parse",
    );
    // The live catalog's cache (what the Compute and Billing APIs said), spoilt.
    let state = state_dir(h);
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(
        state.join("offers-live.csv"),
        format!("# flightdeck live offers cache, written by a refresh; do not edit.\n# source: live{EVIL}\n# as_of: 2099-01-01T00:00:00Z{EVIL}\n# fetched_at: 4070908800\n# project: p{EVIL}\nmachine_type{EVIL},gpu\na3{EVIL},H100\n"),
    )
    .unwrap();
    assert_shown(&on_a_terminal(h, &["offers"]), "offers (a spoilt cache)");
}

#[test]
fn nccl_history_is_shown() {
    use flightdeck::nccl::history::{self, SavedRow, SavedRun};
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let state = state_dir(h);
    std::fs::create_dir_all(&state).unwrap();
    // What a hostile node printed, kept by the history: its cause, the machine type its
    // GPUs claimed, the collective.
    for (id, peak) in [("run-a", 100.0), ("run-b", 90.0)] {
        let mut r = SavedRun {
            id: id.into(),
            fleet: "lab".into(),
            started_at: 1_700_000_000,
            ended_at: Some(1_700_000_100),
            nodes: vec!["lab-0".into()],
            machine_type: Some(format!("{id}{EVIL}")),
            machine_type_from: Some(format!("rank list{EVIL}")),
            exit_codes: vec![Some(1)],
            peak_busbw: Some(peak),
            rows: vec![SavedRow {
                size: 8,
                busbw: Some(peak),
                in_place_busbw: None,
                algbw: None,
                time_us: None,
            }],
            verdict: Some(
                serde_json::from_value(serde_json::json!({
                    "grade": "fail", "measured_peak_busbw": peak, "expected_peak_busbw": null,
                    "expected_at": null, "ratio": null, "machine_type": format!("m{EVIL}"),
                    "nodes": 1, "reference": format!("r{EVIL}"), "reason": format!("it failed{EVIL}"),
                    "cause": format!("NCCL WARN {EVIL}"),
                }))
                .unwrap(),
            ),
            ..Default::default()
        };
        r.spec.collective = format!("all_reduce{EVIL}");
        r.spec.profile = format!("rdma{EVIL}");
        history::save(&state, &r).unwrap();
    }
    assert_shown(&on_a_terminal(h, &["nccl", "history"]), "nccl history");
    assert_shown(
        &on_a_terminal(h, &["nccl", "compare", "run-a", "run-b"]),
        "nccl compare",
    );
}

#[test]
fn job_text_is_shown() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    support::apply_local_fleet(h);
    let dir = h.join("job");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("evil.sh"),
        format!("printf '{EVIL_PRINTF}\\n'\nprintf '{EVIL_PRINTF}\\n' >&2\nexit 3\n"),
    )
    .unwrap();
    let file = dir.join("evil.yaml");
    std::fs::write(
        &file,
        "type: task\nname: evil\nfleet: local\nfiles: [evil.sh]\ncommands: [sh evil.sh]\n",
    )
    .unwrap();
    let shown = on_a_terminal(h, &["job", "run", file.to_str().unwrap()]);
    assert_stream_shown(&shown, "job run (following)");
    assert!(clean(&shown).contains("exited with 3"), "{shown:?}");
    assert_stream_shown(&on_a_terminal(h, &["job", "logs", "evil"]), "job logs");
    assert_stream_shown(
        &on_a_terminal(h, &["job", "logs", "evil", "--follow"]),
        "job logs --follow",
    );
    for args in [
        &["job", "show", "evil"][..],
        &["job", "list"],
        &["job", "stop", "evil"],
    ] {
        assert_nothing_acts(&on_a_terminal(h, args), &format!("{args:?}"));
    }
}

/// A hostile Kubernetes API in front of the double: it forwards each request and adds
/// [`EVIL`] to every `message` and `reason` the double answers, to node names and to the
/// names of debug pods; the paths of Kueue's workloads answer 403 with [`EVIL`] in the
/// message; once [`HostileApi::deny`] is called every request does.
struct HostileApi {
    url: String,
    deny: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl HostileApi {
    fn start(upstream: &str) -> HostileApi {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let up = upstream.trim_start_matches("http://").to_string();
        let deny = Arc::new(AtomicBool::new(false));
        let d = deny.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { continue };
                let (up, d) = (up.clone(), d.clone());
                std::thread::spawn(move || {
                    let _ = hostile_serve(s, &up, &d);
                });
            }
        });
        HostileApi { url, deny }
    }

    fn deny(&self) {
        self.deny.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// One HTTP/1.1 message: its head (start line and headers) and body (by Content-Length,
/// else to the end).
fn read_message(r: &mut impl std::io::BufRead) -> std::io::Result<Option<(String, Vec<u8>)>> {
    let mut head = String::new();
    loop {
        let mut l = String::new();
        if r.read_line(&mut l)? == 0 {
            return Ok(None);
        }
        if l == "\r\n" || l == "\n" {
            break;
        }
        head.push_str(&l);
    }
    let len = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("content-length")
            .then(|| v.trim().parse::<usize>().ok())
            .flatten()
    });
    let mut body = vec![];
    match len {
        Some(n) => {
            body.resize(n, 0);
            r.read_exact(&mut body)?;
        }
        None if head.starts_with("HTTP/") => {
            r.read_to_end(&mut body)?;
        }
        None => {}
    }
    Ok(Some((head, body)))
}

fn hostile_serve(
    s: std::net::TcpStream,
    upstream: &str,
    deny: &std::sync::atomic::AtomicBool,
) -> std::io::Result<()> {
    use std::io::Write;
    let mut r = std::io::BufReader::new(s.try_clone()?);
    let mut w = s;
    let Some((head, body)) = read_message(&mut r)? else {
        return Ok(());
    };
    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
    let forbidden = deny.load(std::sync::atomic::Ordering::SeqCst) || path.contains("/workloads");
    let (status, body) = if forbidden {
        let v = serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": format!("admission webhook denied it: {EVIL}"),
            "reason": "Forbidden", "code": 403});
        ("403 Forbidden".to_string(), serde_json::to_vec(&v).unwrap())
    } else {
        let mut up = std::net::TcpStream::connect(upstream)?;
        let mut req = String::new();
        for l in head.lines() {
            if !l.to_ascii_lowercase().starts_with("connection:") {
                req.push_str(l);
                req.push_str("\r\n");
            }
        }
        req.push_str("Connection: close\r\n\r\n");
        up.write_all(req.as_bytes())?;
        up.write_all(&body)?;
        let mut ur = std::io::BufReader::new(up);
        let Some((rhead, rbody)) = read_message(&mut ur)? else {
            return Ok(());
        };
        let status = rhead
            .lines()
            .next()
            .and_then(|l| l.split_once(' '))
            .map_or("502 Bad Gateway", |(_, rest)| rest)
            .to_string();
        let body = match serde_json::from_slice::<serde_json::Value>(&rbody) {
            Ok(mut v) => {
                spoil(&mut v, &path);
                serde_json::to_vec(&v).unwrap()
            }
            Err(_) => rbody,
        };
        (status, body)
    };
    write!(
        w,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    w.write_all(&body)?;
    w.flush()
}

/// [`EVIL`] after every `message` and `reason`, node names and debug pods' names.
fn spoil(v: &mut serde_json::Value, path: &str) {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            for k in ["message", "reason"] {
                if let Some(Value::String(s)) = m.get_mut(k) {
                    s.push_str(EVIL);
                }
            }
            let name_it = path.contains("/nodes")
                || m.get("metadata")
                    .and_then(|md| md["labels"]["flightdeck-role"].as_str())
                    .is_some();
            if name_it {
                if let Some(Value::String(s)) = m.get_mut("metadata").and_then(|md| md.get_mut("name")) {
                    s.push_str(EVIL);
                }
            }
            for (_, x) in m.iter_mut() {
                spoil(x, path);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| spoil(x, path)),
        _ => {}
    }
}

fn kubeconfig(file: &Path, server: &str) {
    std::fs::write(
        file,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: double\n  cluster:\n    server: {server}\ncontexts:\n- name: double\n  context:\n    cluster: double\n    user: double\n    namespace: default\ncurrent-context: double\nusers:\n- name: double\n  user:\n    token: {}\n",
            support::k8s_double::TOKEN
        ),
    )
    .unwrap();
}

#[test]
fn gke_api_text_is_shown() {
    use support::k8s_double::{KubeDouble, NodeSpec, Options, Provisioning};
    let tmp = tempfile::tempdir().unwrap();
    let n = |name: &str, ip: &str| NodeSpec {
        name: name.into(),
        pool: "a3u-flex".into(),
        machine_type: "a3-ultragpu-8g".into(),
        accelerator: "nvidia-h200-141gb".into(),
        gpus: 8,
        provisioning: Provisioning::FlexStart,
        internal_ip: ip.into(),
    };
    let d = KubeDouble::start(Options {
        nodes: vec![n("gke-a3u-flex-0", "10.0.0.10"), n("gke-a3u-flex-1", "10.0.0.11")],
        ..Options::default()
    });
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let kc = tmp.path().join("kubeconfig");
    kubeconfig(&kc, &d.url);
    let f = tmp.path().join("a3u.yaml");
    std::fs::write(
        &f,
        format!(
            "type: fleet\nname: a3u\nnetwork:\n  gpudirect: rdma\ngke:\n  context: double\n  kubeconfig: {}\n  node_pools: [a3u-flex]\n  debug_image: ubuntu:24.04\n",
            kc.display()
        ),
    )
    .unwrap();
    let out = flightdeck(&home, &["fleet", "apply", f.to_str().unwrap(), "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = flightdeck(&home, &["exec", "a3u", "--", "true"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // A teammate's debug pod for `fleet gc` to list (the operator's own went with `exec`).
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "fd-debug-gke-a3u-flex-0-alice", "namespace": "default",
            "labels": {"app.kubernetes.io/managed-by": "flightdeck", "flightdeck-fleet": "a3u",
                "flightdeck-role": "debug", "flightdeck-owner": "alice", "flightdeck-state": "0badc0de"}},
        "spec": {"nodeName": "gke-a3u-flex-0", "containers": [{"name": "debug", "image": "ubuntu:24.04",
            "command": ["sleep", "infinity"]}]}});
    let body = serde_json::to_vec(&pod).unwrap();
    let mut sock = std::net::TcpStream::connect(d.url.trim_start_matches("http://")).unwrap();
    use std::io::{Read, Write};
    write!(sock, "POST /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len()).unwrap();
    sock.write_all(&body).unwrap();
    let mut answer = String::new();
    sock.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");

    let api = HostileApi::start(&d.url);
    kubeconfig(&kc, &api.url);
    d.set_node_ready("gke-a3u-flex-1", false);
    assert_shown(
        &on_a_terminal(&home, &["fleet", "status", "a3u"]),
        "fleet status (GKE)",
    );
    assert_shown(&on_a_terminal(&home, &["fleet", "gc"]), "fleet gc (GKE)");

    api.deny();
    let shown = on_a_terminal(&home, &["exec", "a3u", "--", "true"]);
    assert_shown(&shown, "exec's per-node error line");
    assert_shown(
        &on_a_terminal(&home, &["exec", "a3u", "--collapse", "--", "true"]),
        "exec --collapse's error",
    );
    assert_shown(
        &on_a_terminal(&home, &["fleet", "status", "a3u"]),
        "an API error through main",
    );
    assert_shown(
        &on_a_terminal(&home, &["nccl", "run", "a3u", "-b", "8", "-e", "8"]),
        "nccl run (GKE) set-up",
    );
    assert_shown(&on_a_terminal(&home, &["fleet", "gc"]), "fleet gc (GKE), denied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gce_api_text_is_shown() {
    use support::gce_double::{GceDouble, SshBanner, PROJECT};
    let d = GceDouble::start().await;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().to_path_buf();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(home.join("fd")).unwrap();
    std::fs::write(
        home.join(".ssh/id_ed25519.pub"),
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGceDoubleTestKeyOnlyForTests tester@flightdeck\n",
    )
    .unwrap();
    std::fs::write(home.join("adc.json"), d.credentials().to_string()).unwrap();
    std::fs::write(
        home.join("fd/config.yaml"),
        format!("gcp:\n  project_id: {PROJECT}\n  owner: tester\n  operation_poll_secs: 0.02\n  ssh_wait_secs: 30\n  bootstrap: false\n"),
    )
    .unwrap();
    let pid = (std::process::id() % 200) as u8 + 20;
    let ips: Vec<String> = (1..=4).map(|i| format!("127.{pid}.250.{i}")).collect();
    let mut banners = vec![];
    for ip in &ips {
        banners.push(SshBanner::start(ip).await);
    }
    d.nat_pool(&ips.iter().map(String::as_str).collect::<Vec<_>>());
    let env = vec![
        ("FLIGHTDECK_HOME", home.join("fd").display().to_string()),
        (
            "GOOGLE_APPLICATION_CREDENTIALS",
            home.join("adc.json").display().to_string(),
        ),
        ("FLIGHTDECK_GCP_COMPUTE_URL", d.origin()),
        ("USER", "tester".to_string()),
    ];
    let run = |args: &[&str]| {
        let (home, env) = (home.clone(), env.clone());
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        tokio::task::spawn_blocking(move || {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            // FLIGHTDECK_HOME is set again after on_a_terminal_env's removal.
            on_a_terminal_env(&home, &a, &env)
        })
    };
    let file = home.join("mega.yaml");
    std::fs::write(
        &file,
        "type: fleet\nname: mega\nnodes: 2\nplacement: cluster\ninstance_types: [a3-megagpu-8g]\nregions: [us-east4, us-central1]\nspot_policy: spot\nnetwork:\n  gpudirect: none\n",
    )
    .unwrap();
    let f = file.to_str().unwrap().to_string();
    // The first zone's inserts fail with an operation error the API words as it likes.
    let plan = support::flightdeck_env(&home, &["fleet", "plan", &f, "--json"], &env);
    let plan: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    let first = plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "instance")
        .unwrap()["place"]
        .as_str()
        .unwrap()
        .to_string();
    d.operation_error(&first, &format!("NEW{EVIL}"), &format!("Something {EVIL}"));
    let shown = run(&["fleet", "apply", &f, "--yes"]).await.unwrap();
    assert_shown(&shown, "fleet apply (GCP): an operation's error");
    // An instance's status as the API says it.
    let (scope, name) = d.existing("instances").into_iter().next().expect("an instance");
    let mut v = d.resource("instances", &scope, &name).unwrap();
    v["status"] = format!("RUNNING{EVIL}").into();
    d.plant("instances", &scope, &name, v);
    assert_shown(
        &run(&["fleet", "status", "mega"]).await.unwrap(),
        "fleet status (GCP)",
    );
    // An orphan, named and labelled by whoever made it.
    d.plant_instance(
        "us-central1-a",
        &format!("ghost-0{EVIL}"),
        serde_json::json!({"flightdeck-fleet": format!("ghost{EVIL}"), "flightdeck-owner": "tester"}),
    );
    assert_shown(&run(&["fleet", "gc", "--yes"]).await.unwrap(), "fleet gc (GCP)");
    drop(banners);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offers_refresh_errors_are_shown() {
    use support::gcp_double::GcpDouble;
    let d = GcpDouble::start().await;
    d.forbid("machineTypes", "forbidden", &format!("denied: {EVIL}"));
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().to_path_buf();
    let adc = home.join("adc.json");
    std::fs::write(&adc, d.authorized_user().to_string()).unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let env = vec![
        ("FLIGHTDECK_HOME", home.join("fd").display().to_string()),
        ("FLIGHTDECK_GCP_COMPUTE_URL", d.origin()),
        ("FLIGHTDECK_GCP_BILLING_URL", d.origin()),
        ("GCE_METADATA_HOST", closed.to_string()),
        ("GOOGLE_APPLICATION_CREDENTIALS", adc.display().to_string()),
    ];
    let shown = tokio::task::spawn_blocking(move || on_a_terminal_env(&home, &["offers", "--refresh"], &env))
        .await
        .unwrap();
    assert_shown(&shown, "offers --refresh (an API error body)");
}

/// Put an executable `name` holding `script` first on node `i`'s PATH.
fn plant(tb: &support::testbed::Testbed, i: usize, name: &str, script: &str) {
    use std::os::unix::fs::PermissionsExt;
    let bin = tb.nodes[i]
        .root
        .as_ref()
        .expect("a machine node")
        .join("usr/local/bin")
        .join(name);
    let _ = std::fs::remove_file(&bin);
    std::fs::write(&bin, script).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn unplant(tb: &support::testbed::Testbed, i: usize, name: &str) {
    let bin = tb.nodes[i]
        .root
        .as_ref()
        .unwrap()
        .join("usr/local/bin")
        .join(name);
    std::fs::remove_file(bin).unwrap();
}

/// A hostile program: [`EVIL`] on stdout (also as a bootstrap marker's step) and on
/// stderr, then exit 1.
fn evil_program() -> String {
    format!(
        "#!/bin/sh\nprintf 'said: {EVIL_PRINTF}\\n'\nprintf '@@fd-bootstrap run evil{EVIL_PRINTF}\\n'\nprintf 'lab-0:1:1 [0] NCCL WARN {EVIL_PRINTF}\\n'\nprintf 'E: {EVIL_PRINTF}\\n' >&2\nexit 1\n"
    )
}

/// Two machine nodes over SSH through a bastion, each its own home: every path where
/// what a node prints reaches the operator.
#[test]
fn testbed_node_text_is_shown() {
    use support::testbed::{Testbed, SHIMMED};
    let Some(tb) = Testbed::new_machines_with_homes(2, 2) else {
        return;
    };
    for n in &tb.nodes {
        n.add_gpu_double();
    }
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    tb.apply_fleet(h, "lab");

    // doctor: a GPU name from nvidia-smi, an Xid line from the kernel log.
    let n0 = &tb.nodes[0];
    for f in ["nvidia-smi.txt", "query-gpu.csv", "nvidia-smi-q.txt"] {
        let t = std::fs::read_to_string(n0.gpu_file(f)).unwrap();
        std::fs::write(
            n0.gpu_file(f),
            t.replace("NVIDIA H200", &format!("NVIDIA H200{EVIL}")),
        )
        .unwrap();
    }
    n0.plant_dmesg(&format!(
        "[  812.113418] NVRM: Xid (PCI:0000:00:07): 79, pid=4242, name=python3{EVIL}, GPU has fallen off the bus.\n"
    ));
    let shown = on_a_terminal(h, &["doctor", "lab", "--only", "gpus,versions,xid", "--evidence"]);
    assert_shown(&shown, "doctor --evidence");
    // Without --evidence the findings hold what the doctor parsed, not the node's words.
    assert_nothing_acts(
        &on_a_terminal(h, &["doctor", "lab", "--only", "gpus,versions,xid"]),
        "doctor",
    );

    // bootstrap: every command a step runs on node 0 is hostile.
    for c in SHIMMED {
        plant(&tb, 0, c, &evil_program());
    }
    let shown = on_a_terminal(
        h,
        &["fleet", "bootstrap", "lab", "--flavour", "rdma", "--nodes", "0"],
    );
    assert_shown(&shown, "fleet bootstrap");
    assert!(clean(&shown).contains("failed"), "{shown:?}");

    // nccl run on one node: nccl-tests itself is hostile (the error tail and the cause);
    // then the history and attach show what it said.
    plant(&tb, 0, "all_reduce_perf", &evil_program());
    let shown = on_a_terminal(
        h,
        &[
            "nccl",
            "run",
            "lab",
            "--nodes",
            "0",
            "--no-preflight",
            "-b",
            "8",
            "-e",
            "8",
            "-g",
            "1",
        ],
    );
    assert_shown(&shown, "nccl run: the error tail and cause");
    assert_shown(
        &on_a_terminal(h, &["nccl", "history"]),
        "nccl history (a real run)",
    );
    assert_shown(&on_a_terminal(h, &["nccl", "attach"]), "nccl attach");

    // The pre-flight: node 1's shell answers with the payload.
    plant(&tb, 1, "sh", &evil_program());
    let shown = on_a_terminal(
        h,
        &["nccl", "run", "lab", "--profile", "tcpxo", "-b", "8", "-e", "8"],
    );
    unplant(&tb, 1, "sh");
    assert_shown(&shown, "nccl run: the pre-flight's report");

    // Node-to-node SSH: node 1's ssh-keygen fails with the payload.
    plant(&tb, 1, "ssh-keygen", &evil_program());
    let shown = on_a_terminal(h, &["nccl", "run", "lab", "--no-preflight", "-b", "8", "-e", "8"]);
    unplant(&tb, 1, "ssh-keygen");
    assert_shown(&shown, "nccl run: node-to-node SSH set-up");

    // The launch: mpirun on the head node is hostile.
    plant(&tb, 0, "fd-evil-mpirun", &evil_program());
    let shown = on_a_terminal(
        h,
        &[
            "nccl",
            "run",
            "lab",
            "--no-preflight",
            "-b",
            "8",
            "-e",
            "8",
            "--mpirun",
            "/usr/local/bin/fd-evil-mpirun",
        ],
    );
    assert_shown(&shown, "nccl run: the launch");

    // A job whose upload fails on node 1 with what its mkdir says.
    let dir = h.join("job");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("data.txt"), "data\n").unwrap();
    let job = dir.join("j.yaml");
    std::fs::write(
        &job,
        "type: task\nname: j\nfleet: lab\nfiles: [data.txt]\ncommands: [cat data.txt]\n",
    )
    .unwrap();
    plant(&tb, 1, "mkdir", &evil_program());
    let shown = on_a_terminal(h, &["job", "run", job.to_str().unwrap(), "--no-preflight"]);
    unplant(&tb, 1, "mkdir");
    assert_shown(&shown, "job run: a node's error");

    // nics: a NIC named with control characters (as many as IFNAMSIZ allows).
    tb.rename_nic(1, "eth2", "e\u{1b}]0;X\u{7}\u{1b}[2J", None);
    let shown = on_a_terminal(h, &["nics", "lab", "--samples", "1"]);
    assert_nothing_acts(&shown, "nics");
    assert!(clean(&shown).contains("e␛]0;X^G␛[2J"), "nics: {shown:?}");
}
