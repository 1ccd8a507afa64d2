//! The connection holder against the SSH testbed: headless commands run over the
//! holder's connections (the same TCP connection per node, call after call), a dead
//! connection is replaced, a changed host key is refused on the new connection, the
//! holder idles out, and another user is refused by the socket.

mod support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use support::testbed::Testbed;
use support::{flightdeck, spawn_flightdeck, text};

/// Each node's `SSH_CONNECTION` (client address and port: the same port means the same
/// connection), from `exec --json`; a node that failed has its error instead.
fn connections(home: &Path) -> BTreeMap<String, String> {
    let out = flightdeck(home, &["exec", "lab", "--json", "--", "echo $SSH_CONNECTION"]);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)));
    v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let name = n["node"].as_str().unwrap().to_string();
            let said = if n["exit_code"] == 0 {
                n["stdout"].as_str().unwrap_or("").trim().to_string()
            } else {
                format!(
                    "FAILED {}",
                    n["error"].as_str().unwrap_or(n["stderr"].as_str().unwrap_or(""))
                )
            };
            (name, said)
        })
        .collect()
}

fn status(home: &Path) -> Value {
    let out = flightdeck(home, &["mux", "status", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Wait until `mux status` says a holder runs (or none, with `up == false`).
fn wait_status(home: &Path, up: bool) -> Value {
    let start = Instant::now();
    loop {
        let s = status(home);
        if s.is_null() != up {
            return s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "holder up={up} not seen: {s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_holder_keeps_one_connection_per_node_replaces_a_dead_one_and_checks_new_host_keys() {
    let Some(mut tb) = Testbed::new(4, 0) else { return };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");

    // Without a holder every call is a new connection: the client ports differ.
    assert!(status(home.path()).is_null());
    let a = connections(home.path());
    let b = connections(home.path());
    assert_eq!(a.len(), 4);
    for (node, conn) in &a {
        assert_ne!(
            &b[node], conn,
            "without a holder {node} was reached over a new connection"
        );
    }

    let mut holder = spawn_flightdeck(home.path(), &["mux", "serve", "--persist", "0"]);
    let s = wait_status(home.path(), true);
    assert_eq!(s["holder"], "mux");
    let first = connections(home.path());
    let again = connections(home.path());
    assert_eq!(first, again, "the same connection per node, call after call");
    assert!(first.values().all(|c| !c.starts_with("FAILED")), "{first:?}");
    let s = status(home.path());
    // One connection to the bastion (its route ends in `>`), one per node through it.
    let routes: Vec<&str> = s["connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["route"].as_str().unwrap())
        .collect();
    assert_eq!(routes.len(), 5, "{s}");
    assert!(routes[0].ends_with('>'), "{routes:?}");
    assert!(
        routes[1..]
            .iter()
            .all(|r| r.starts_with(routes[0]) && !r.ends_with('>')),
        "{routes:?}"
    );
    assert_eq!(s["served"], 8);

    // Node 1's sshd dies with its sessions and comes back: the holder connects again,
    // the command never sees it.
    tb.kill_sshd(1);
    tb.start_sshd(1);
    let after = connections(home.path());
    assert!(after.values().all(|c| !c.starts_with("FAILED")), "{after:?}");
    for (node, conn) in &after {
        if node.ends_with("-1") {
            assert_ne!(conn, &first[node], "{node} reconnected");
        } else {
            assert_eq!(conn, &first[node], "{node} kept its connection");
        }
    }

    // Node 2 is reinstalled with another host key: the holder's new connection checks
    // it and refuses, as a direct connection would; the others go on.
    tb.change_host_key(2);
    let changed = connections(home.path());
    let n2 = changed.iter().find(|(n, _)| n.ends_with("-2")).unwrap().1;
    assert!(
        n2.starts_with("FAILED") && n2.contains("HOST KEY CHANGED"),
        "{n2}"
    );
    assert_eq!(
        changed.values().filter(|c| c.starts_with("FAILED")).count(),
        1,
        "{changed:?}"
    );

    // Commands that send their script on stdin work through it too (the doctor).
    let out = flightdeck(
        home.path(),
        &["doctor", "lab", "--only", "clock", "--nodes", "0,1,3", "--json"],
    );
    let v: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
    let clocks = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "clock")
        .count();
    assert!(clocks >= 2, "{v}");
    assert!(status(home.path())["served"].as_u64().unwrap() > 12);

    // `--no-mux` connects itself.
    let out = flightdeck(
        home.path(),
        &[
            "exec",
            "lab",
            "--no-mux",
            "--nodes",
            "0",
            "--json",
            "--",
            "echo $SSH_CONNECTION",
        ],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_ne!(
        v["nodes"][0]["stdout"].as_str().unwrap().trim(),
        first.values().next().unwrap()
    );

    let out = flightdeck(home.path(), &["mux", "stop"]);
    assert!(text(&out.stdout).contains("stopped"), "{}", text(&out.stdout));
    let code = holder.wait().unwrap();
    assert!(code.success(), "{code:?}");
    assert!(status(home.path()).is_null());
    let sock = home.path().join(".local/state/flightdeck/mux.sock");
    assert!(!sock.exists(), "the socket is removed when the holder exits");
}

#[test]
fn mux_auto_starts_a_holder_that_exits_when_idle() {
    let Some(tb) = Testbed::new(2, 0) else { return };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    let cfg = home.path().join(".config/flightdeck");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("config.yaml"), "mux: auto\nmux_persist: 3s\n").unwrap();

    let a = connections(home.path());
    let s = wait_status(home.path(), true);
    assert_eq!(
        (s["holder"].as_str(), s["persist_s"].as_u64()),
        (Some("mux"), Some(3))
    );
    let b = connections(home.path());
    assert_eq!(a, b, "the first command started the holder and used it");
    // Idle for its persist time, it exits and removes its socket.
    let gone = wait_status(home.path(), false);
    assert!(gone.is_null());

    // A bad value is a config error with its place.
    std::fs::write(cfg.join("config.yaml"), "mux: auto\nmux_persist: 10 minutes\n").unwrap();
    let out = flightdeck(home.path(), &["config", "check"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("config.yaml:2:") && err.contains("unknown unit"),
        "{err}"
    );
}

/// Run `flightdeck mux status` as uid/gid 65534 (nobody) with `home`.
fn status_as_nobody(home: &Path) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    std::process::Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(["mux", "status"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .uid(65534)
        .gid(65534)
        .output()
        .expect("run flightdeck as nobody")
}

#[test]
fn another_user_is_refused_by_the_socket_and_by_the_holder() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        support::cannot_run("running a client as another user needs root");
    }
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir().unwrap();
    let mut holder = spawn_flightdeck(home.path(), &["mux", "serve", "--persist", "0"]);
    wait_status(home.path(), true);
    let state = home.path().join(".local/state/flightdeck");
    let sock = state.join("mux.sock");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&sock), 0o600);
    assert_eq!(mode(&state), 0o700);

    // As it is: another user cannot reach the socket at all. (The home is opened so that
    // only the state dir's 0700 and the socket's 0600 stand in the way.)
    for d in [
        home.path().to_path_buf(),
        home.path().join(".local"),
        home.path().join(".local/state"),
    ] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = status_as_nobody(home.path());
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("Permission denied"),
        "{}",
        text(&out.stderr)
    );

    // Permissions opened by mistake: the holder itself refuses anyone but its own user
    // (its log says so), and the other user's client, which asks the kernel who serves
    // the socket before it sends anything, will not use a holder of another user either.
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = status_as_nobody(home.path());
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("is served by uid 0, not by you (uid 65534): another user's holder, not used"),
        "{err}"
    );
    // The holder logs the refusal when it has accepted the connection, which may be
    // after the client, which read the server's uid at connect, has already given up.
    let mut log = String::new();
    for _ in 0..100 {
        log = std::fs::read_to_string(state.join("flightdeck.log")).unwrap();
        if log.contains("refused uid 65534") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(log.contains("refused uid 65534"), "{log}");
    // The other user's flightdeck did not narrow or write into this state directory.
    assert_eq!(mode(&state), 0o755);
    // Its own user is still served.
    assert_eq!(status(home.path())["holder"], "mux");

    let _ = flightdeck(home.path(), &["mux", "stop"]);
    holder.wait().unwrap();
}

/// flightdeck beside the cockpit of `t` (its HOME and FLIGHTDECK_HOME).
fn beside(t: &support::tmux::Tmux, args: &[&str]) -> std::process::Output {
    let fd_home = t.fd_home();
    let home = fd_home.parent().unwrap().to_path_buf();
    support::flightdeck_env(&home, args, &[("FLIGHTDECK_HOME", fd_home.display().to_string())])
}

#[test]
fn the_cockpit_holds_connections_for_headless_commands_while_it_runs() {
    if !support::tmux::tmux_available() {
        panic!("tmux is not installed: run ./scripts/test.sh, which installs it");
    }
    let Some(tb) = Testbed::new(2, 0) else { return };
    let t = support::tmux::Tmux::start(&[], &[], 100, 30);
    let home = t.fd_home().parent().unwrap().to_path_buf();
    let file = home.join("lab.yaml");
    std::fs::write(&file, tb.fleet_yaml("lab")).unwrap();
    let out = beside(
        &t,
        &[
            "fleet",
            "apply",
            file.to_str().unwrap(),
            "--yes",
            "--accept-new-host-keys",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let status = |t: &support::tmux::Tmux| -> Value {
        let out = beside(t, &["mux", "status", "--json"]);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let start = Instant::now();
    while status(&t).is_null() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the cockpit never served:\n{}",
            t.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(status(&t)["holder"], "cockpit");
    let conns = |t: &support::tmux::Tmux| {
        let out = beside(t, &["exec", "lab", "--json", "--", "echo $SSH_CONNECTION"]);
        let v: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
        let c: Vec<String> = v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["stdout"].as_str().unwrap().trim().to_string())
            .collect();
        c
    };
    let (a, b) = (conns(&t), conns(&t));
    assert_eq!(a.len(), 2);
    assert!(a.iter().all(|c| !c.is_empty()), "{a:?}");
    assert_eq!(a, b, "the cockpit's connections, call after call");
    let s = status(&t);
    assert_eq!(
        (s["served"].as_u64(), s["connections"].as_array().map(Vec::len)),
        (Some(4), Some(3)),
        "{s}"
    );
    // Only quitting the cockpit closes them.
    let out = beside(&t, &["mux", "stop"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("quit it"), "{}", text(&out.stderr));
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), 0);
    assert!(status(&t).is_null(), "the socket went with the cockpit");
    let c = conns(&t);
    assert!(
        c.iter().all(|x| !x.is_empty()) && c != a,
        "connected itself once the cockpit was gone: {c:?}"
    );
}

/// In one process: a holder on a socket, and a pool that asks it first. Stdin of 3 MiB
/// (cut into frames), stderr, exit codes and a time limit all cross it; the command past
/// its limit is stopped on the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_stderr_exit_codes_and_a_time_limit_cross_the_holder() {
    use flightdeck::exec;
    use flightdeck::reach::Reach;
    use flightdeck::ssh::client::{NoPrompt, SshOptions};
    use flightdeck::ssh::known_hosts::HostKeyPolicy;
    use flightdeck::ssh::mux;
    use flightdeck::ssh::pool::{Pool, Resolver};
    let Some(tb) = Testbed::new(2, 0) else { return };
    let opts = SshOptions {
        known_hosts: vec![tb.known_hosts.clone()],
        policy: HostKeyPolicy::Refuse,
        prompter: std::sync::Arc::new(NoPrompt),
        use_agent: false,
        agent_socket: None,
        keys: Default::default(),
    };
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("state/mux.sock");
    let bound = mux::bind(&sock).unwrap().expect("bound");
    let holder = mux::Holder::new(Pool::holding(opts.clone()), mux::HolderKind::Mux, None);
    tokio::spawn(holder.clone().serve(bound));
    let pool = Pool::new(opts).with_mux(mux::Client::new(sock.clone()));
    let resolver = std::sync::Arc::new(Resolver::new(tb.dir.path()));
    let nodes = flightdeck::fleet::parse(Path::new("tb.yaml"), &tb.fleet_yaml("tb"))
        .unwrap()
        .node_targets();
    let input: Vec<u8> = (0..3 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let want = format!("{} ", input.len());
    let jobs = vec![
        (
            nodes[0].clone(),
            "wc -c | tr -d '\\n'; echo ' '; echo oops >&2; exit 3".to_string(),
            input,
        ),
        (nodes[1].clone(), "sleep 31.25".to_string(), vec![]),
    ];
    let transport = Reach::new(pool, resolver.clone());
    let (tx, mut rx) = exec::channel(1024);
    let run = tokio::spawn(exec::run_each_with_input(
        transport,
        jobs,
        8,
        Some(Duration::from_secs(3)),
        tx,
    ));
    let (mut out, mut err, mut codes) = (String::new(), String::new(), BTreeMap::new());
    while let Some(e) = rx.recv().await {
        match e {
            exec::Event::Line {
                node: 0,
                stream: exec::Stream::Stdout,
                text,
            } => out.push_str(&text),
            exec::Event::Line {
                stream: exec::Stream::Stderr,
                text,
                ..
            } => err.push_str(&text),
            exec::Event::Done { node, result } => {
                codes.insert(node, result.code);
            }
            _ => {}
        }
    }
    run.await.unwrap();
    assert_eq!(out.trim_end(), want.trim_end(), "every byte of stdin arrived");
    assert!(err.contains("oops"), "{err}");
    assert_eq!(codes[&0], 3);
    assert_eq!(codes[&1], exec::TIMED_OUT);
    // Stopped on the node itself (coreutils' timeout): a channel signal would not reach
    // a root login's session, and the testbed logs in as root.
    let start = Instant::now();
    while tb.node_run(1, &["pgrep", "-f", "^sleep 31.25$"]).is_ok() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "node 1's sleep outlived its time limit"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let st = holder.status();
    assert_eq!(st.served, 2);
    assert_eq!(st.connections.len(), 3, "bastion and two nodes: {st:?}");
}
