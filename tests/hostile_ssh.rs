//! The SSH experiments of the hostile review of 2026-11-25
//! (../shared/reviews/2026-11-25/hostile-review.md), re-run against the binary and the
//! SSH testbed, each judged against what OpenSSH does in the same spot (OpenSSH's own
//! client is run beside flightdeck where it has a verdict):
//!
//! * D2 (K1, K2, K3, M11): host keys are checked with each host's UserKnownHostsFile,
//!   GlobalKnownHostsFile and StrictHostKeyChecking, as `ssh -G` resolves them, and the
//!   connection holder checks with its client's, never its own;
//! * D7 (M10): a command is never reported failed while the holder still connects for it,
//!   and the holder starts nothing for a client that has gone;
//! * D8 (M3, M4): a state directory that is a planted link or another user's is refused,
//!   and a holder socket served by another user gets nothing;
//! * D13 (M13): `mux stop` lets open channels finish (`ssh -O stop`); force cuts them;
//! * D18 (M14): a socket path too long for a unix socket is said up front.

mod support;

use serde_json::Value;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::testbed::Testbed;
use support::text;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn needs_root(what: &str) -> bool {
    if is_root() {
        return true;
    }
    support::cannot_run(&format!("{what} needs root"))
}

/// The flightdeck binary with a clean environment: PATH, HOME = `home`, and
/// FLIGHTDECK_HOME when given.
fn fd_cmd(home: &Path, fd_home: Option<&Path>, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_flightdeck"));
    c.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .stdin(Stdio::null());
    if let Some(f) = fd_home {
        c.env("FLIGHTDECK_HOME", f);
    }
    c
}

fn fd(home: &Path, fd_home: Option<&Path>, args: &[&str]) -> Output {
    fd_cmd(home, fd_home, args).output().expect("run flightdeck")
}

fn spawn_fd(home: &Path, fd_home: Option<&Path>, args: &[&str]) -> Child {
    fd_cmd(home, fd_home, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start flightdeck")
}

fn write(p: &Path, t: &str) {
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(p, t).unwrap();
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// An operator's HOME with a private `.ssh`.
fn operator() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let ssh = d.path().join(".ssh");
    std::fs::create_dir(&ssh).unwrap();
    std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o700)).unwrap();
    d
}

/// `ssh-ed25519 AAAA…` of a fresh key nobody serves (the man in the middle's).
fn other_key(dir: &Path) -> String {
    let key = dir.join("mitm_host_key");
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f", key.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(st.success());
    read(&key.with_extension("pub"))
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

/// `exec FLEET --json -- CMD` with `flags` before it: the document and the output.
fn exec_json(
    home: &Path,
    fd_home: Option<&Path>,
    flags: &[&str],
    fleet: &Path,
    cmd: &str,
) -> (Value, Output) {
    let mut args: Vec<&str> = flags.to_vec();
    args.extend(["exec", fleet.to_str().unwrap(), "--json", "--", cmd]);
    let out = fd(home, fd_home, &args);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)));
    (v, out)
}

/// Each node's `(stdout, error)` from an exec document.
fn per_node(v: &Value) -> Vec<(String, String)> {
    v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["stdout"].as_str().unwrap_or("").to_string(),
                n["error"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// OpenSSH's client through the bastion with the operator's config.
fn openssh(tb: &Testbed, cfg: &Path, extra: &[&str], node: usize, cmd: &str) -> Output {
    Command::new("ssh")
        .args(["-F", cfg.to_str().unwrap()])
        .args(extra)
        .args(["-J", &format!("root@{}", tb.bastion.addr)])
        .arg(format!("root@{}", tb.nodes[node].addr))
        .arg(cmd)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The lines every experiment's config ends with (ssh's `~` is the password database's,
/// so files are named absolutely for both clients).
fn base_config(tb: &Testbed, known_hosts: &Path) -> String {
    format!(
        "Host *\n  User root\n  IdentityFile {}\n  UserKnownHostsFile {}\n  BatchMode yes\n  ConnectTimeout 10\n",
        tb.user_key.display(),
        known_hosts.display()
    )
}

/// D2, experiments K1, K2, K3: the verdict of `ssh` with the same `~/.ssh/config`.
#[test]
fn k1_k2_k3_host_keys_are_checked_per_host_as_openssh_checks_them() {
    let Some(tb) = Testbed::new(2, 0) else { return };
    let op = operator();
    let home = op.path();
    let ssh = home.join(".ssh");
    let cfg = ssh.join("config");
    let known = ssh.join("known_hosts");
    let fleet = home.join("lab.yaml");
    write(&fleet, &tb.fleet_yaml("lab"));
    let nodes = format!("{} {}", tb.nodes[0].addr, tb.nodes[1].addr);
    let mitm = other_key(home);
    let bastion_line = format!("{} {}\n", tb.bastion.addr, tb.bastion.host_key_pub);
    let mitm_lines: String = tb.nodes.iter().map(|n| format!("{} {mitm}\n", n.addr)).collect();
    let real_lines: String = tb
        .nodes
        .iter()
        .map(|n| format!("{} {}\n", n.addr, n.host_key_pub))
        .collect();

    // K1: a per-host UserKnownHostsFile records another key: the server looks like a man
    // in the middle. ~/.ssh/known_hosts knows only the bastion.
    let kh_cluster = ssh.join("kh_cluster");
    write(&kh_cluster, &mitm_lines);
    write(&known, &bastion_line);
    write(
        &cfg,
        &format!(
            "Host {nodes}\n  UserKnownHostsFile {}\n{}",
            kh_cluster.display(),
            base_config(&tb, &known)
        ),
    );
    let o = openssh(
        &tb,
        &cfg,
        &["-o", "StrictHostKeyChecking=accept-new"],
        0,
        "echo RAN",
    );
    assert!(!o.status.success() && !text(&o.stdout).contains("RAN"));
    assert!(
        text(&o.stderr).contains("REMOTE HOST IDENTIFICATION HAS CHANGED"),
        "{}",
        text(&o.stderr)
    );
    let (v, out) = exec_json(
        home,
        None,
        &["--no-mux", "--accept-new-host-keys"],
        &fleet,
        "echo RAN",
    );
    for (i, (so, err)) in per_node(&v).into_iter().enumerate() {
        assert!(!so.contains("RAN"), "K1 node {i} ran: {}", text(&out.stdout));
        assert!(
            err.contains("HOST KEY CHANGED") && err.contains(&kh_cluster.display().to_string()),
            "K1 node {i}: {err}"
        );
    }
    assert_eq!(read(&known), bastion_line, "K1: nothing recorded");

    // K2: GlobalKnownHostsFile records another key, StrictHostKeyChecking accept-new,
    // no flag: CHANGED, as OpenSSH says.
    let global = home.join("global_kh");
    write(&global, &mitm_lines);
    write(
        &cfg,
        &format!(
            "Host *\n  GlobalKnownHostsFile {}\n  StrictHostKeyChecking accept-new\n{}",
            global.display(),
            base_config(&tb, &known)
        ),
    );
    let o = openssh(&tb, &cfg, &[], 0, "echo RAN");
    assert!(
        !o.status.success() && text(&o.stderr).contains("REMOTE HOST IDENTIFICATION HAS CHANGED"),
        "{}",
        text(&o.stderr)
    );
    let (v, out) = exec_json(home, None, &["--no-mux"], &fleet, "echo RAN");
    for (i, (so, err)) in per_node(&v).into_iter().enumerate() {
        assert!(!so.contains("RAN"), "K2 node {i} ran: {}", text(&out.stdout));
        assert!(
            err.contains("HOST KEY CHANGED") && err.contains(&global.display().to_string()),
            "K2 node {i}: {err}"
        );
    }
    assert_eq!(read(&known), bastion_line, "K2: nothing recorded");
    // A key the global file records is trusted, and nothing is written anywhere.
    write(&global, &real_lines);
    let (v, _) = exec_json(home, None, &["--no-mux"], &fleet, "echo RAN");
    assert!(per_node(&v).iter().all(|(so, _)| so.contains("RAN")), "{v}");
    assert!(openssh(&tb, &cfg, &[], 0, "echo RAN").status.success());
    assert_eq!(read(&known), bastion_line, "K2: a global key is not copied");
    assert_eq!(read(&global), real_lines, "K2: the global file is never written");

    // K3: a per-host `StrictHostKeyChecking yes` before `Host * … accept-new`, the nodes
    // unknown: "Host key verification failed", with the flag as without it.
    write(
        &cfg,
        &format!(
            "Host {nodes}\n  StrictHostKeyChecking yes\nHost *\n  StrictHostKeyChecking accept-new\n{}",
            base_config(&tb, &known)
        ),
    );
    let o = openssh(&tb, &cfg, &[], 0, "echo RAN");
    assert!(
        !o.status.success() && text(&o.stderr).contains("Host key verification failed"),
        "{}",
        text(&o.stderr)
    );
    for flags in [&["--no-mux"][..], &["--no-mux", "--accept-new-host-keys"][..]] {
        let (v, out) = exec_json(home, None, flags, &fleet, "echo RAN");
        for (i, (so, err)) in per_node(&v).into_iter().enumerate() {
            assert!(
                !so.contains("RAN"),
                "K3 {flags:?} node {i} ran: {}",
                text(&out.stdout)
            );
            assert!(
                err.contains("StrictHostKeyChecking is yes") && err.contains("Host key verification failed"),
                "K3 {flags:?} node {i}: {err}"
            );
        }
    }
    assert_eq!(read(&known), bastion_line, "K3: nothing recorded");
    // The bastion, under `Host *`'s accept-new, is learned when unknown: one line, its
    // key, under its name in clear or hashed as the system's HashKnownHosts says (L2),
    // found by OpenSSH's own lookup.
    write(&known, "");
    let _ = exec_json(home, None, &["--no-mux"], &fleet, "echo RAN");
    let learned = read(&known);
    assert_eq!(
        learned.lines().count(),
        1,
        "K3: only the bastion was learned:\n{learned}"
    );
    assert!(
        learned.trim_end().ends_with(tb.bastion.host_key_pub.trim()),
        "{learned}"
    );
    // ssh reads the user's config, then the system's: as one file, `ssh -G` says.
    let both = home.join("both_configs");
    write(
        &both,
        &format!(
            "{}\n{}",
            read(&cfg_of(home)),
            std::fs::read_to_string("/etc/ssh/ssh_config").unwrap_or_default()
        ),
    );
    let hashed = ssh_g(&both, &tb.bastion.addr.to_string())
        .iter()
        .any(|(k, v)| k == "hashknownhosts" && v == "yes");
    assert_eq!(
        learned.starts_with("|1|"),
        hashed,
        "HashKnownHosts {hashed}: {learned}"
    );
    let found = Command::new("ssh-keygen")
        .args(["-F", &tb.bastion.addr.to_string(), "-f"])
        .arg(&known)
        .output()
        .unwrap();
    assert!(
        found.status.success(),
        "ssh-keygen -F finds the bastion: {learned}"
    );
}

/// The operator's ssh config of `home`.
fn cfg_of(home: &Path) -> PathBuf {
    home.join(".ssh/config")
}

/// A held connection holder: `mux serve --persist 0` with `home` and `fd_home`, stopped
/// (its channels cut) when dropped.
struct Holder {
    child: Child,
    home: PathBuf,
    fd_home: Option<PathBuf>,
}

impl Holder {
    fn start(home: &Path, fd_home: Option<&Path>) -> Holder {
        let child = fd_cmd(home, fd_home, &["mux", "serve", "--persist", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let h = Holder {
            child,
            home: home.to_path_buf(),
            fd_home: fd_home.map(Path::to_path_buf),
        };
        let start = Instant::now();
        while h.status().is_null() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the holder never answered"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        h
    }

    /// Wait (at most 20 s) until the holder has `n` open channels.
    fn wait_active(&self, n: u64) {
        let start = Instant::now();
        while self.status()["active"].as_u64() != Some(n) {
            assert!(start.elapsed() < Duration::from_secs(20), "{}", self.status());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn status(&self) -> Value {
        let out = fd(&self.home, self.fd_home.as_deref(), &["mux", "status", "--json"]);
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    /// Wait at most `limit` for the holder's process to end.
    fn exited_within(&mut self, limit: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < limit {
            if self.child.try_wait().unwrap().is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// D2, experiment M11: the holder checks with the client's known_hosts and policy, never
/// its own, also on a connection it already holds for another client.
#[test]
fn m11_the_holder_checks_host_keys_with_its_clients_files_never_its_own() {
    let Some(tb) = Testbed::new(2, 0) else { return };
    let shared = tempfile::tempdir().unwrap();
    let fd_home = shared.path().join("fd");
    let (op_a, op_b, op) = (operator(), operator(), operator());
    let fleet = shared.path().join("lab.yaml");
    write(&fleet, &tb.fleet_yaml("lab"));
    // The holder's own HOME has an empty known_hosts; B's knows every real key; the
    // client's records another key for the nodes.
    write(&op_a.path().join(".ssh/known_hosts"), "");
    std::fs::copy(&tb.known_hosts, op_b.path().join(".ssh/known_hosts")).unwrap();
    let mitm = other_key(op.path());
    let known = op.path().join(".ssh/known_hosts");
    let mut lines = format!("{} {}\n", tb.bastion.addr, tb.bastion.host_key_pub);
    for n in &tb.nodes {
        lines.push_str(&format!("{} {mitm}\n", n.addr));
    }
    write(&known, &lines);

    // Without the holder: refused.
    let (v, _) = exec_json(op.path(), Some(&fd_home), &["--no-mux"], &fleet, "echo RAN");
    assert!(
        per_node(&v).iter().all(|(_, e)| e.contains("HOST KEY CHANGED")),
        "{v}"
    );

    let holder = Holder::start(op_a.path(), Some(&fd_home));
    // Through the holder, with --accept-new-host-keys: refused just the same, and the
    // holder's HOME learns nothing.
    let (v, out) = exec_json(
        op.path(),
        Some(&fd_home),
        &["--accept-new-host-keys"],
        &fleet,
        "echo RAN",
    );
    for (i, (so, err)) in per_node(&v).into_iter().enumerate() {
        assert!(
            !so.contains("RAN"),
            "M11 node {i} ran through the holder: {}",
            text(&out.stdout)
        );
        assert!(err.contains("HOST KEY CHANGED"), "M11 node {i}: {err}");
    }
    assert_eq!(read(&op_a.path().join(".ssh/known_hosts")), "");
    assert_eq!(read(&known), lines);

    // B, whose known_hosts has the real keys, runs through the holder: it now holds a
    // connection to each node (and the bastion).
    let (v, _) = exec_json(op_b.path(), Some(&fd_home), &[], &fleet, "echo RAN");
    assert!(per_node(&v).iter().all(|(so, _)| so.contains("RAN")), "{v}");
    let st = holder.status();
    assert_eq!(st["connections"].as_array().map(Vec::len), Some(3), "{st}");
    let served = st["served"].as_u64().unwrap();
    // The client is asked about again, on the held connections: still refused (with the
    // flag and without), as OpenSSH's verdict for this client.
    for flags in [&["--accept-new-host-keys"][..], &[][..]] {
        let (v, _) = exec_json(op.path(), Some(&fd_home), flags, &fleet, "echo RAN");
        for (i, (so, err)) in per_node(&v).into_iter().enumerate() {
            assert!(
                !so.contains("RAN"),
                "M11 {flags:?} node {i} ran on a held connection"
            );
            assert!(err.contains("HOST KEY CHANGED"), "M11 {flags:?} node {i}: {err}");
        }
    }
    assert!(
        holder.status()["served"].as_u64().unwrap() > served,
        "asked the holder"
    );
    assert_eq!(read(&known), lines, "nothing learned for the client");
    assert_eq!(read(&op_a.path().join(".ssh/known_hosts")), "");
    // A client that knows no node and would ask: the holder does not accept for it; the
    // client connects itself and, with nobody to ask, refuses.
    let op_c = operator();
    write(
        &op_c.path().join(".ssh/known_hosts"),
        &format!("{} {}\n", tb.bastion.addr, tb.bastion.host_key_pub),
    );
    let (v, _) = exec_json(op_c.path(), Some(&fd_home), &[], &fleet, "echo RAN");
    assert!(
        per_node(&v)
            .iter()
            .all(|(so, e)| !so.contains("RAN") && e.contains("unknown host key")),
        "{v}"
    );
    drop(holder);
}

/// A TCP proxy to `to` whose n-th connection follows `plan[n]`: held silent (never
/// forwarded), or forwarded after a delay.
#[derive(Clone, Copy)]
enum Plan {
    Silent,
    After(Duration),
}

fn slow_proxy(to: std::net::SocketAddr, plan: Vec<Plan>) -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut silent = vec![];
        for (i, s) in l.incoming().enumerate() {
            let Ok(s) = s else { continue };
            match plan.get(i).copied().unwrap_or(Plan::After(Duration::ZERO)) {
                Plan::Silent => silent.push(s),
                Plan::After(d) => {
                    std::thread::spawn(move || {
                        std::thread::sleep(d);
                        let Ok(up) = std::net::TcpStream::connect(to) else {
                            return;
                        };
                        let (mut a, mut b) = (s.try_clone().unwrap(), up.try_clone().unwrap());
                        let (mut s, mut up) = (s, up);
                        std::thread::spawn(move || {
                            let _ = std::io::copy(&mut a, &mut b);
                            let _ = b.shutdown(std::net::Shutdown::Write);
                        });
                        let _ = std::io::copy(&mut up, &mut s);
                        let _ = s.shutdown(std::net::Shutdown::Write);
                    });
                }
            }
        }
    });
    port
}

fn markers(dir: &Path) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

/// D7, experiment M10 (ConnectTimeout 25 instead of 30 and the third connection
/// forwarded after 12 s instead of 25, so that the holder connects past the old 60 s):
/// the client waits as long as the route may take, and sees its output; a client that
/// is gone before the holder connected never has its command started.
#[test]
fn m10_a_command_runs_only_while_its_client_waits_for_it() {
    let Some(tb) = Testbed::new(1, 0) else { return };
    let op = operator();
    let home = op.path();
    let bastion: std::net::SocketAddr = format!("{}:22", tb.bastion.addr).parse().unwrap();
    let slow = slow_proxy(
        bastion,
        vec![Plan::Silent, Plan::Silent, Plan::After(Duration::from_secs(12))],
    );
    let gone = slow_proxy(bastion, vec![Plan::After(Duration::from_secs(6))]);
    let key = tb.user_key.display().to_string();
    write(
        &home.join(".ssh/config"),
        &format!(
            "Host slowhost\n  HostName 127.0.0.1\n  Port {slow}\n  ConnectTimeout 25\nHost gonehost\n  HostName 127.0.0.1\n  Port {gone}\n  ConnectTimeout 25\nHost *\n  User root\n  IdentityFile {key}\n"
        ),
    );
    write(
        &home.join(".ssh/known_hosts"),
        &format!(
            "[127.0.0.1]:{slow} {k}\n[127.0.0.1]:{gone} {k}\n",
            k = tb.bastion.host_key_pub
        ),
    );
    let fleet = |name: &str, host: &str| {
        let f = home.join(format!("{name}.yaml"));
        write(
            &f,
            &format!("type: fleet\nname: {name}\nplacement: cluster\nssh_config:\n  user: root\n  identity_file: {key}\n  hosts:\n    - {host}\n"),
        );
        f
    };
    let (slow_fleet, gone_fleet) = (fleet("slow", "slowhost"), fleet("gone", "gonehost"));
    let (late, cut) = (home.join("late"), home.join("cut"));
    std::fs::create_dir_all(&late).unwrap();
    std::fs::create_dir_all(&cut).unwrap();
    let holder = Holder::start(home, None);

    let start = Instant::now();
    let cmd = format!("touch {}/late.$(date +%s%N); echo ran", late.display());
    let out = fd(home, None, &["exec", slow_fleet.to_str().unwrap(), "--", &cmd]);
    let took = start.elapsed();
    assert!(
        out.status.success() && text(&out.stdout).contains("ran"),
        "reported after {took:?}: {}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(took > Duration::from_secs(60), "the holder connected at {took:?}");
    assert_eq!(markers(&late), 1, "ran once");
    assert!(
        holder.status()["served"].as_u64().unwrap() >= 1,
        "through the holder"
    );

    // The operator gives up (the client is killed) while the holder connects: the
    // holder connects 4 s later and must not start the command.
    let cmd = format!("touch {}/cut.$(date +%s%N); echo ran", cut.display());
    let mut client = spawn_fd(home, None, &["exec", gone_fleet.to_str().unwrap(), "--", &cmd]);
    std::thread::sleep(Duration::from_secs(2));
    client.kill().unwrap();
    let _ = client.wait();
    std::thread::sleep(Duration::from_secs(10));
    assert_eq!(
        markers(&cut),
        0,
        "the command of a client that had gone was started"
    );
    drop(holder);
}

/// Run this test binary's [`fake_holder_helper`] as uid 65534: a "holder" at `sock` that
/// answers anyone with forged output and logs what it receives to `log`.
fn fake_holder(sock: &Path, log: &Path) -> Child {
    use std::os::unix::process::CommandExt;
    let me = std::env::current_exe().unwrap();
    let child = Command::new(me)
        .args(["fake_holder_helper", "--exact", "--nocapture", "--test-threads=1"])
        .env("FD_FAKE_HOLDER_SOCKET", sock)
        .env("FD_FAKE_HOLDER_LOG", log)
        .uid(65534)
        .gid(65534)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while std::os::unix::net::UnixStream::connect(sock).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the fake holder never listened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // That probe was logged as a connection with no bytes: start the log afresh.
    std::thread::sleep(Duration::from_millis(200));
    let _ = std::fs::write(log, "");
    child
}

/// Not a test of its own: the fake holder of [`fake_holder`], when the environment asks.
#[test]
fn fake_holder_helper() {
    let (Some(sock), Some(log)) = (
        std::env::var_os("FD_FAKE_HOLDER_SOCKET"),
        std::env::var_os("FD_FAKE_HOLDER_LOG"),
    ) else {
        return;
    };
    let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777));
    for s in l.incoming() {
        let Ok(mut s) = s else { continue };
        s.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        let mut got = vec![];
        let mut buf = [0u8; 65536];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&log)
            .unwrap();
        let _ = f.write_all(&got);
        let frame = |k: u8, p: &[u8]| {
            let mut v = vec![k];
            v.extend_from_slice(&(p.len() as u32).to_be_bytes());
            v.extend_from_slice(p);
            v
        };
        let _ = s.write_all(&frame(b'o', b""));
        let _ = s.write_all(&frame(b'1', b"all good, nothing to see\n"));
        let _ = s.write_all(&frame(b'x', &0i32.to_be_bytes()));
    }
}

/// `dir` (and its files) owned by uid 65534 with `mode`.
fn give_to_nobody(dir: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::os::unix::fs::chown(dir, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// D8, experiments M3 and M4, through the binary as root.
#[test]
fn m3_m4_another_users_state_directory_or_link_is_refused() {
    if !needs_root("running as root against another user's directory") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let op = operator();
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777;

    // M4: hrevil (uid 65534) plants `hrlink/state -> victimdir`.
    let victim = t.path().join("victimdir");
    std::fs::create_dir(&victim).unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o755)).unwrap();
    let hrlink = t.path().join("hrlink");
    std::fs::create_dir(&hrlink).unwrap();
    std::os::unix::fs::symlink(&victim, hrlink.join("state")).unwrap();
    std::os::unix::fs::lchown(hrlink.join("state"), Some(65534), Some(65534)).unwrap();
    give_to_nobody(&hrlink, 0o755);
    let out = fd(op.path(), Some(&hrlink), &["fleet", "list"]);
    assert_eq!(mode(&victim), 0o755, "M4: the link's target was chmodded");
    assert_eq!(
        std::fs::read_dir(&victim).unwrap().count(),
        0,
        "M4: root's files were made in the link's target"
    );
    assert!(!out.status.success(), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("hrlink") && text(&out.stderr).contains("refused"),
        "M4: {}",
        text(&out.stderr)
    );

    // M3: hrevil owns `hrshared/state` and serves a fake holder there.
    let Some(tb) = Testbed::new(1, 0) else { return };
    let fleet = op.path().join("lab.yaml");
    write(&fleet, &tb.fleet_yaml("lab"));
    std::fs::copy(&tb.known_hosts, op.path().join(".ssh/known_hosts")).unwrap();
    let hrshared = t.path().join("hrshared");
    std::fs::create_dir_all(hrshared.join("state")).unwrap();
    give_to_nobody(&hrshared, 0o755);
    give_to_nobody(&hrshared.join("state"), 0o777);
    let log = t.path().join("fake.log");
    write(&log, "");
    give_to_nobody(&log, 0o666);
    let mut fake = fake_holder(&hrshared.join("state/mux.sock"), &log);
    let out = fd(
        op.path(),
        Some(&hrshared),
        &[
            "exec",
            fleet.to_str().unwrap(),
            "--",
            "echo real; cat /etc/hostname",
        ],
    );
    let _ = fake.kill();
    let _ = fake.wait();
    assert!(
        !text(&out.stdout).contains("all good"),
        "M3: the forged output was shown: {}",
        text(&out.stdout)
    );
    assert_eq!(
        read(&log),
        "",
        "M3: the fake holder received the request or stdin"
    );
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("refused"), "M3: {}", text(&out.stderr));
    assert_eq!(mode(&hrshared.join("state")), 0o777, "M3: not chmodded");
    assert!(!hrshared.join("state/flightdeck.log").exists());
    assert!(!hrshared.join("state/state.lock").exists());
}

/// D8: a client asks the kernel who serves the socket (`SO_PEERCRED`) before it sends
/// anything, as the holder does; another user's holder is not used.
#[test]
fn a_holder_socket_served_by_another_user_gets_nothing() {
    if !needs_root("a fake holder of another user") {
        return;
    }
    use flightdeck::ssh::mux::{Client, MuxError};
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let sock = t.path().join("mux.sock");
    let log = t.path().join("fake.log");
    write(&log, "");
    give_to_nobody(&log, 0o666);
    let mut fake = fake_holder(&sock, &log);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let resolver =
        flightdeck::ssh::pool::Resolver::with_config(flightdeck::ssh::config::SshConfig::default(), t.path());
    let route = resolver.route(&flightdeck::fleet::SshAddress {
        host: "10.0.0.1".into(),
        port: None,
        user: None,
        identity_file: None,
        proxy_jump: None,
    });
    let opts = flightdeck::ssh::client::SshOptions {
        known_hosts: vec![],
        policy: flightdeck::ssh::known_hosts::HostKeyPolicy::Refuse,
        prompter: std::sync::Arc::new(flightdeck::ssh::client::NoPrompt),
        use_agent: false,
        agent_socket: None,
        keys: Default::default(),
    };
    let client = Client::new(sock.clone());
    let r = rt.block_on(client.exec(&route, "echo secret-command", &opts));
    assert!(matches!(r, Err(MuxError::Absent)), "used another user's holder");
    let st = rt.block_on(Client::new(sock.clone()).status());
    let why = st.err().unwrap_or_default();
    assert!(why.contains("served by uid 65534"), "{why}");
    std::thread::sleep(Duration::from_millis(500));
    let _ = fake.kill();
    let _ = fake.wait();
    assert_eq!(read(&log), "", "the fake holder received something");
}

/// D13, experiment M13: `mux stop` while two commands run lets them finish (`ssh -O
/// stop`); a forced stop (`ssh -O exit`) cuts them.
#[test]
fn m13_mux_stop_lets_open_channels_finish_and_force_cuts_them() {
    let Some(tb) = Testbed::new(2, 0) else { return };
    let op = operator();
    let home = op.path();
    std::fs::copy(&tb.known_hosts, home.join(".ssh/known_hosts")).unwrap();
    let fleet = home.join("lab.yaml");
    write(&fleet, &tb.fleet_yaml("lab"));
    let mut holder = Holder::start(home, None);
    let run = spawn_fd(
        home,
        None,
        &["exec", fleet.to_str().unwrap(), "--", "sleep 3; echo finished"],
    );
    holder.wait_active(2);
    let out = fd(home, None, &["mux", "stop"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("stopped accepting") && text(&out.stdout).contains("2 open channel"),
        "{}",
        text(&out.stdout)
    );
    // It accepts nothing more: a new command connects itself.
    assert!(holder.status().is_null());
    let done = run.wait_with_output().unwrap();
    assert!(
        done.status.success(),
        "M13: {}\n{}",
        text(&done.stdout),
        text(&done.stderr)
    );
    assert_eq!(
        text(&done.stdout).matches("finished").count(),
        2,
        "{}",
        text(&done.stdout)
    );
    assert!(
        holder.exited_within(Duration::from_secs(10)),
        "the holder exits once drained"
    );

    // Forced: the channels are cut now.
    let holder = Holder::start(home, None);
    let run = spawn_fd(
        home,
        None,
        &["exec", fleet.to_str().unwrap(), "--", "sleep 5; echo finished"],
    );
    holder.wait_active(2);
    let sock = home.join(".local/state/flightdeck/mux.sock");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let st = rt
        .block_on(flightdeck::ssh::mux::Client::new(sock).stop(true))
        .unwrap()
        .expect("a holder answered");
    assert_eq!(st.active, 2);
    let done = run.wait_with_output().unwrap();
    assert!(!done.status.success());
    assert!(!text(&done.stdout).contains("finished"));
    drop(holder);
}

/// D18, experiment M14: a state directory whose socket path is longer than a unix
/// socket's is said up front, with the path, its length and the fix.
#[test]
fn m14_a_socket_path_too_long_is_said_up_front() {
    let op = operator();
    let long = op.path().join("x".repeat(120));
    std::fs::create_dir_all(&long).unwrap();
    let start = Instant::now();
    let out = fd(op.path(), Some(&long), &["mux", "start"]);
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "said after {:?}",
        start.elapsed()
    );
    let sock = long.join("state/mux.sock");
    let n = sock.as_os_str().len().to_string();
    for want in [
        sock.display().to_string(),
        n,
        "sun_path".into(),
        "FLIGHTDECK_HOME".into(),
    ] {
        assert!(err.contains(&want), "`{want}` not in: {err}");
    }
    let out = fd(op.path(), Some(&long), &["mux", "status"]);
    assert!(text(&out.stderr).contains("sun_path"), "{}", text(&out.stderr));
    let out = fd(op.path(), Some(&long), &["mux", "serve", "--persist", "1"]);
    assert!(!out.status.success());
    let log = read(&long.join("state/flightdeck.log"));
    assert!(log.contains("sun_path"), "the log says why: {log}");
}

// ---------------------------------------------------------------------------------------
// D2: ssh_config resolved as `ssh -G` resolves it.

/// The host-key fields (and what decides them) as `ssh -G` prints them.
const FIELDS: [&str; 9] = [
    "hashknownhosts",
    "hostname",
    "user",
    "port",
    "connecttimeout",
    "stricthostkeychecking",
    "userknownhostsfile",
    "globalknownhostsfile",
    "hostkeyalias",
];

fn ssh_g(cfg: &Path, host: &str) -> Vec<(String, String)> {
    let out = Command::new("ssh")
        .args(["-F", cfg.to_str().unwrap(), "-G", host])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "ssh -G {host}: {}", text(&out.stderr));
    let mut v: Vec<(String, String)> = text(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(k, _)| FIELDS.contains(k))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    v.sort();
    v
}

fn ours(cfg: &Path, host: &str) -> Vec<(String, String)> {
    use flightdeck::ssh::config::{Query, SshConfig};
    use flightdeck::ssh::pool::Resolver;
    // ssh's `~` and %d are the password database's home, not HOME.
    // SAFETY: getpwuid returns a pointer into static storage, read at once.
    let home = unsafe {
        let pw = libc::getpwuid(libc::getuid());
        PathBuf::from(
            std::ffi::CStr::from_ptr((*pw).pw_dir)
                .to_string_lossy()
                .into_owned(),
        )
    };
    let r = Resolver::with_config(SshConfig::load_files(&home, Some(cfg), None), &home);
    let t = r.target(host, None, None, None);
    let s = r.config.resolve_for(&Query {
        host,
        user: None,
        local_user: &r.local_user,
        home: &home,
    });
    let files = |f: &[PathBuf]| {
        if f.is_empty() {
            "none".to_string()
        } else {
            f.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        }
    };
    let mut v = vec![
        (
            "hashknownhosts".to_string(),
            if t.hash_known_hosts { "yes" } else { "no" }.to_string(),
        ),
        ("hostname".to_string(), t.host.clone()),
        ("user".into(), t.user.clone()),
        ("port".into(), t.port.to_string()),
        (
            "connecttimeout".into(),
            s.connect_timeout.map_or("none".into(), |c| c.to_string()),
        ),
        (
            "stricthostkeychecking".into(),
            t.strict.map_or("ask", |s| s.ssh_g()).to_string(),
        ),
        ("userknownhostsfile".into(), files(&r.known_hosts(host))),
        ("globalknownhostsfile".into(), files(&t.global_known_hosts)),
    ];
    if let Some(a) = &t.host_key_alias {
        v.push(("hostkeyalias".into(), a.clone()));
    }
    v.sort();
    v
}

/// D2: each config below is resolved for each host by `ssh -G` and by flightdeck; the
/// host-key fields agree: first value wins, Host patterns with negation, Match,
/// Include with globs, tokens and `~` in UserKnownHostsFile, several files, `none`.
#[test]
fn ssh_config_resolves_as_ssh_g_for_every_host() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().display().to_string();
    write(
        &d.path().join("inc/10-a.conf"),
        &format!("UserKnownHostsFile {p}/inc_kh\nHost y.*\n  StrictHostKeyChecking accept-new\n"),
    );
    write(
        &d.path().join("inc/20-b.conf"),
        "HostKeyAlias From-B\nConnectTimeout 9\n",
    );
    write(&d.path().join("inc/other.txt"), "Port 1\n");
    let table: Vec<(String, Vec<&str>)> = vec![
        // K1: a per-host UserKnownHostsFile.
        (
            "Host 127.0.0.1 localhost\n  UserKnownHostsFile ~/.ssh/kh_cluster\nHost *\n  StrictHostKeyChecking accept-new\n".into(),
            vec!["127.0.0.1", "localhost", "10.0.0.1"],
        ),
        // K2: GlobalKnownHostsFile, several files.
        (
            format!("Host *\n  GlobalKnownHostsFile {p}/g1 {p}/g2\n  StrictHostKeyChecking accept-new\n"),
            vec!["a", "10.0.0.1"],
        ),
        // K3: the first value wins, per host.
        (
            "Host a b\n  StrictHostKeyChecking yes\nHost *\n  StrictHostKeyChecking accept-new\n  UserKnownHostsFile /k1 /k2\n".into(),
            vec!["a", "b", "c"],
        ),
        // Negation, HostName, tokens and `~` in UserKnownHostsFile, `=` and quotes.
        (
            "Host *.lab !bad.lab\n  HostName %h.internal\n  Port=2222\n  User ops\n  UserKnownHostsFile \"~/kh %h\" %d/kh_%h_%p_%r_%n_%u_%k_%i_%L_%l_%C %k\n  StrictHostKeyChecking no\nHost bad.lab\n  StrictHostKeyChecking off\n  HostKeyAlias BadAlias\nHost *\n  StrictHostKeyChecking true\n".into(),
            vec!["gpu.lab", "bad.lab", "other"],
        ),
        // Include with a glob inside a Host block, and after it.
        (
            format!("Host *.a\n  Include {p}/inc/*.conf\nHost x.a\n  StrictHostKeyChecking yes\nUserKnownHostsFile=none\nHost *\n  GlobalKnownHostsFile none\n"),
            vec!["x.a", "y.a", "y.b", "z"],
        ),
        // Match: host (after HostName), originalhost, user, localuser, all, negation.
        (
            "Host alias\n  HostName real.example\nMatch host real.example\n  StrictHostKeyChecking yes\nMatch originalhost alias !localuser nosuchuser\n  UserKnownHostsFile /m/orig\nMatch user nosuchuser\n  Port 9\nMatch all\n  GlobalKnownHostsFile /m/all\n  ConnectTimeout 4\n".into(),
            vec!["alias", "real.example", "other"],
        ),
        // Match final: a second pass against the name HostName gave.
        (
            "Host short\n  HostName long.example\nHost long.example\n  StrictHostKeyChecking accept-new\nMatch final host long.example\n  UserKnownHostsFile /m/final\n".into(),
            vec!["short", "long.example", "x"],
        ),
    ];
    for (i, (config, hosts)) in table.iter().enumerate() {
        let cfg = d.path().join(format!("config{i}"));
        write(&cfg, config);
        for h in hosts {
            assert_eq!(ours(&cfg, h), ssh_g(&cfg, h), "config {i} host {h}:\n{config}");
        }
    }
}

/// M1 (hostile review 3): `~` in GlobalKnownHostsFile is the operator's home, as OpenSSH
/// expands it, never a folder `~` under the current one that another user planted with
/// the key; a relative GlobalKnownHostsFile is refused by name.
#[test]
fn m1_a_global_known_hosts_file_under_tilde_is_the_homes_not_the_current_folders() {
    let Some(tb) = Testbed::new(1, 0) else { return };
    let op = operator();
    let home = op.path();
    let ssh = home.join(".ssh");
    let known = ssh.join("known_hosts");
    let fleet = home.join("lab.yaml");
    write(&fleet, &tb.fleet_yaml("lab"));
    write(
        &known,
        &format!("{} {}\n", tb.bastion.addr, tb.bastion.host_key_pub),
    );
    let real = format!("{} {}\n", tb.nodes[0].addr, tb.nodes[0].host_key_pub);
    write(
        &ssh.join("config"),
        &format!(
            "Host *\n  GlobalKnownHostsFile ~/.ssh/global_kh\n  StrictHostKeyChecking yes\n{}",
            base_config(&tb, &known)
        ),
    );
    // Another user's folder, with `~/.ssh/global_kh` in it recording the real key.
    let planted = tempfile::tempdir().unwrap();
    write(&planted.path().join("~/.ssh/global_kh"), &real);
    let run = |cwd: &Path| {
        let out = fd_cmd(
            home,
            None,
            &[
                "--no-mux",
                "exec",
                fleet.to_str().unwrap(),
                "--json",
                "--",
                "echo RAN",
            ],
        )
        .current_dir(cwd)
        .output()
        .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)));
        per_node(&v).remove(0)
    };
    let (so, err) = run(planted.path());
    assert!(!so.contains("RAN"), "the planted file was trusted: {so}");
    assert!(!err.is_empty());
    // The home's own file is the one read.
    write(&ssh.join("global_kh"), &real);
    let (so, err) = run(planted.path());
    assert!(so.contains("RAN"), "{err}");
    // A relative GlobalKnownHostsFile names itself and is not used.
    write(
        &ssh.join("config"),
        &format!(
            "Host *\n  GlobalKnownHostsFile .ssh/global_kh\n  StrictHostKeyChecking yes\n{}",
            base_config(&tb, &known)
        ),
    );
    let (so, err) = run(home);
    assert!(!so.contains("RAN"));
    assert!(
        err.contains("GlobalKnownHostsFile .ssh/global_kh is a relative path"),
        "{err}"
    );
}

/// L1 (hostile review 3): `${VAR}` of an unset variable in UserKnownHostsFile is refused
/// by ssh ("env var ${…} has no value", "invalid environment variable expansion") and by
/// flightdeck alike, never read as the file without it (`/tmp/kh_shared`, which any user
/// can create with the key in it).
#[test]
fn l1_an_unset_variable_in_a_known_hosts_path_is_refused_as_ssh_refuses_it() {
    let Some(tb) = Testbed::new(1, 0) else { return };
    let op = operator();
    let home = op.path();
    let ssh = home.join(".ssh");
    let fleet = home.join("lab.yaml");
    write(&fleet, &tb.fleet_yaml("lab"));
    // The file an unset variable would leave, planted with the real keys.
    let planted = home.join("kh_shared");
    write(
        &planted,
        &format!(
            "{} {}\n{} {}\n",
            tb.bastion.addr, tb.bastion.host_key_pub, tb.nodes[0].addr, tb.nodes[0].host_key_pub
        ),
    );
    let cfg = ssh.join("config");
    write(
        &cfg,
        &format!(
            "Host *\n  UserKnownHostsFile {}/kh_${{FD_UNSET_VAR_L1}}shared\n  StrictHostKeyChecking yes\n  User root\n  IdentityFile {}\n  BatchMode yes\n  ConnectTimeout 10\n",
            home.display(),
            tb.user_key.display()
        ),
    );
    let o = openssh(&tb, &cfg, &[], 0, "echo RAN");
    assert!(!o.status.success() && !text(&o.stdout).contains("RAN"));
    assert!(text(&o.stderr).contains("has no value"), "{}", text(&o.stderr));
    let (v, out) = exec_json(home, None, &["--no-mux"], &fleet, "echo RAN");
    let (so, err) = per_node(&v).remove(0);
    assert!(!so.contains("RAN"), "{}", text(&out.stdout));
    assert!(err.contains("env var ${FD_UNSET_VAR_L1} has no value"), "{err}");
}

/// The jump hosts real ssh goes through for `host` (`-l user` when given), outermost
/// first as (host as given, -l user, -p port): each `Executing proxy command: exec ssh
/// [-l U] [-p P] … -W '[h]:p' HOST` line of `ssh -vvv`, whose children print theirs.
/// The names do not resolve, so ssh stops at the innermost hop at once.
fn ssh_jumps(cfg: &Path, host: &str, user: Option<&str>) -> Vec<(String, Option<String>, Option<String>)> {
    let mut c = Command::new("ssh");
    c.args([
        "-F",
        cfg.to_str().unwrap(),
        "-vvv",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=2",
    ]);
    if let Some(u) = user {
        c.args(["-l", u]);
    }
    let out = c.args([host, "true"]).stdin(Stdio::null()).output().unwrap();
    text(&out.stderr)
        .lines()
        .filter_map(|l| {
            l.split_once("Executing proxy command: exec ssh ")
                .map(|(_, c)| c.to_string())
        })
        .map(|c| {
            let w: Vec<&str> = c.split_whitespace().collect();
            let flag = |f: &str| w.iter().position(|x| *x == f).map(|i| w[i + 1].to_string());
            (w.last().unwrap().to_string(), flag("-l"), flag("-p"))
        })
        .collect()
}

/// flightdeck's jump hosts for `host`, outermost first, as [`ssh_jumps`] has them.
fn our_jumps(cfg: &Path, host: &str, user: Option<&str>) -> (Vec<(String, String, u16)>, Option<String>) {
    use flightdeck::ssh::config::SshConfig;
    use flightdeck::ssh::pool::Resolver;
    let home = PathBuf::from("/nonexistent-home");
    let r = Resolver::with_config(SshConfig::load_files(&home, Some(cfg), None), &home);
    let route = r.route(&flightdeck::fleet::SshAddress {
        host: host.into(),
        port: None,
        user: user.map(str::to_string),
        identity_file: None,
        proxy_jump: None,
    });
    let mut hops: Vec<(String, String, u16)> = route
        .jumps
        .iter()
        .map(|t| (t.host.clone(), t.user.clone(), t.port))
        .collect();
    hops.reverse();
    (hops, route.target.config_refusal.clone())
}

/// Hostile review 3, M3: a jump host's own ProxyJump is followed (recursively, as the
/// `-W` child ssh reads its config), only the first hop of a list has its own, and `%`
/// tokens in ProxyJump are the connection's. Compared with what real ssh runs.
#[test]
fn m3_jump_hosts_are_the_ones_ssh_goes_through() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config");
    write(
        &cfg,
        "Host node-*\n  ProxyJump hop2\nHost hop2\n  ProxyJump hop1\nHost hop1\n  User jumper\nHost app-*\n  User deploy\n  ProxyJump %r@jump-%n:2222\nHost list-*\n  ProxyJump a1,b1\nHost a1\n  ProxyJump a0\nHost b1\n  ProxyJump nowhere\nHost loop-*\n  ProxyJump la\nHost la\n  ProxyJump lb\nHost lb\n  ProxyJump la\n",
    );
    for (host, user) in [
        ("node-1", None),
        ("app-1", None),
        ("app-2", Some("ops")),
        ("list-1", None),
    ] {
        let real = ssh_jumps(&cfg, host, user);
        assert!(!real.is_empty(), "{host}: ssh printed no proxy command");
        let (ours, refusal) = our_jumps(&cfg, host, user);
        assert_eq!(refusal, None, "{host}");
        let ours_as_ssh: Vec<(String, Option<String>, Option<String>)> =
            ours.iter().map(|(h, _, _)| (h.clone(), None, None)).collect();
        let real_hosts: Vec<(String, Option<String>, Option<String>)> =
            real.iter().map(|(h, _, _)| (h.clone(), None, None)).collect();
        assert_eq!(ours_as_ssh, real_hosts, "{host}: the hops, outermost first");
        // Where ssh passes -l or -p to a hop, flightdeck connects with them.
        for ((h, u, p), (_, ru, rp)) in ours.iter().zip(&real) {
            if let Some(ru) = ru {
                assert_eq!(u, ru, "{host} via {h}: user");
            }
            if let Some(rp) = rp {
                assert_eq!(&p.to_string(), rp, "{host} via {h}: port");
            }
        }
    }
    // The review's two cases, as flightdeck routes them.
    assert_eq!(
        our_jumps(&cfg, "node-1", None).0,
        [
            ("hop2".to_string(), whoami(), 22),
            ("hop1".into(), "jumper".into(), 22)
        ]
    );
    assert_eq!(
        our_jumps(&cfg, "app-1", None).0,
        [("jump-app-1".to_string(), "deploy".to_string(), 2222)]
    );
    // A loop is refused, not followed forever (ssh would spawn itself without end).
    let (hops, refusal) = our_jumps(&cfg, "loop-1", None);
    assert!(hops.is_empty());
    assert!(refusal.unwrap().contains("more than 8 jump hosts deep"));
}

fn whoami() -> String {
    flightdeck::ssh::config::local_user_name()
}

/// Hostile review 3, M2: `Match exec` blocks are evaluated as ssh evaluates them (the
/// command's `%` tokens expanded, run by the shell, exit 0 matches; not run when an
/// earlier criterion of the line failed), so flightdeck is never laxer than ssh; a
/// criterion it cannot evaluate refuses the hosts its block could apply to, saying why.
#[test]
fn m2_match_exec_is_evaluated_as_ssh_evaluates_it() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().display().to_string();
    let cfg = d.path().join("config");
    let configs: Vec<(String, Vec<&str>)> = vec![
        // The review's block: exec holds, so StrictHostKeyChecking yes comes first.
        (
            "Match originalhost mx-* exec \"test -d /tmp\"\n  StrictHostKeyChecking yes\nHost mx-*\n  HostName 127.0.0.1\n  Port 2298\n  User root\n  StrictHostKeyChecking accept-new\n".into(),
            vec!["mx-1", "other"],
        ),
        // Negated, failing, and tokens: %h (HostName so far), %n, %p, %r.
        (
            format!("Host t-*\n  HostName real-%h\n  Port 2201\n  User tok\nMatch exec \"test %h = real-t-1 && test %n = t-1 && test %p = 2201 && test %r = tok\"\n  ConnectTimeout 7\nMatch !exec false\n  UserKnownHostsFile {p}/kh_neg\nMatch exec \"exit 3\"\n  StrictHostKeyChecking no\n"),
            vec!["t-1", "t-2"],
        ),
    ];
    for (text, hosts) in &configs {
        write(&cfg, text);
        for h in hosts {
            assert_eq!(ours(&cfg, h), ssh_g(&cfg, h), "{h} under:\n{text}");
        }
    }
    // Not run when an earlier criterion failed: ssh runs nothing, nor does flightdeck.
    let marker = d.path().join("ran");
    write(
        &cfg,
        &format!(
            "Match host nomatch exec \"touch {}\"\n  Port 9\n",
            marker.display()
        ),
    );
    assert_eq!(ours(&cfg, "h"), ssh_g(&cfg, "h"));
    assert!(!marker.exists(), "an exec after a failed criterion ran");
    // The review's second case: `!exec "false"` puts ProxyJump jumpbox in force.
    write(
        &cfg,
        "Match originalhost me-* !exec \"false\"\n  ProxyJump jumpbox\n",
    );
    let real = ssh_jumps(&cfg, "me-1", None);
    assert_eq!(real.first().map(|r| r.0.as_str()), Some("jumpbox"), "{real:?}");
    let (hops, refusal) = our_jumps(&cfg, "me-1", None);
    assert_eq!((hops[0].0.as_str(), refusal), ("jumpbox", None));
    // A command killed by a signal: ssh stops (fatal), flightdeck refuses the host.
    write(&cfg, "Match exec \"kill -9 $$\"\n  Port 9\n");
    let g = Command::new("ssh")
        .args(["-F", cfg.to_str().unwrap(), "-G", "k"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!g.status.success(), "ssh -G: {}", text(&g.stdout));
    let (_, refusal) = our_jumps(&cfg, "k", None);
    assert!(refusal.unwrap().contains("exited abnormally (signal 9)"));
    // A criterion flightdeck does not evaluate refuses the hosts its block could apply to
    // (ssh 9.2 refuses the whole file: "Unsupported Match attribute"), not others.
    write(
        &cfg,
        "Match originalhost ln-* localnetwork 10.0.0.0/8\n  StrictHostKeyChecking yes\n",
    );
    let (_, refusal) = our_jumps(&cfg, "ln-1", None);
    assert!(
        refusal.unwrap().contains("`Match localnetwork 10.0.0.0/8` is not evaluated by flightdeck, and its block could apply to this host"),
    );
    assert_eq!(our_jumps(&cfg, "other", None).1, None);
}

/// Hostile review 3, L5: a `kill -9` of the connection holder while a command runs on
/// two nodes: the nodes were reached and ran it, so the summary says the connection was
/// lost with no exit status, not that they are unreachable.
#[test]
fn l5_a_killed_holder_is_a_lost_connection_not_unreachable_nodes() {
    let Some(tb) = Testbed::new(2, 0) else { return };
    let op = operator();
    let home = op.path();
    std::fs::copy(&tb.known_hosts, home.join(".ssh/known_hosts")).unwrap();
    let fleet = home.join("lab.yaml");
    write(&fleet, &tb.fleet_yaml("lab"));
    let holder = Holder::start(home, None);
    let run = spawn_fd(
        home,
        None,
        &["exec", fleet.to_str().unwrap(), "--", "echo started; sleep 30"],
    );
    holder.wait_active(2);
    // SAFETY: kill of a child's pid.
    unsafe { libc::kill(holder.child.id() as i32, libc::SIGKILL) };
    let done = run.wait_with_output().unwrap();
    let err = text(&done.stderr);
    assert!(!done.status.success(), "{err}");
    assert!(
        err.contains("2 nodes: 2 connection lost, no exit status") && !err.contains("unreachable"),
        "{err}"
    );
}
