//! The SSH layer against real OpenSSH servers in network namespaces (tests/support/
//! testbed.rs): a bastion in front of the nodes, one connection per node, channels over
//! it, host key checks and authentication errors.

mod support;

use flightdeck::exec::{self, Event, Stream};
use flightdeck::fleet::{self, NodeTarget, SshAddress};
use flightdeck::reach::Reach;
use flightdeck::ssh::client::{NoPrompt, SshError, SshOptions};
use flightdeck::ssh::known_hosts::HostKeyPolicy;
use flightdeck::ssh::pool::{Pool, Resolver};
use std::path::Path;
use std::sync::Arc;
use support::testbed::Testbed;

fn opts(known_hosts: &Path, policy: HostKeyPolicy) -> SshOptions {
    SshOptions {
        known_hosts: vec![known_hosts.to_path_buf()],
        policy,
        prompter: Arc::new(NoPrompt),
        use_agent: false,
        agent_socket: None,
        keys: Default::default(),
    }
}

fn nodes(tb: &Testbed) -> Vec<NodeTarget> {
    fleet::parse(Path::new("tb.yaml"), &tb.fleet_yaml("tb"))
        .unwrap()
        .node_targets()
}

/// The nodes' SSH addresses.
fn hosts(tb: &Testbed) -> Vec<SshAddress> {
    nodes(tb).iter().map(|n| n.ssh().unwrap().clone()).collect()
}

/// A resolver that reads no ~/.ssh/config of the machine running the tests.
fn resolver(tb: &Testbed) -> Arc<Resolver> {
    Arc::new(Resolver::new(tb.dir.path()))
}

async fn run_all(pool: Pool, resolver: Arc<Resolver>, nodes: Vec<NodeTarget>, cmd: &str) -> Vec<Event> {
    let (tx, mut rx) = exec::channel(1024);
    let h = tokio::spawn(exec::run(
        Reach::new(pool, resolver),
        nodes,
        cmd.to_string(),
        64,
        tx,
    ));
    let mut events = vec![];
    while let Some(e) = rx.recv().await {
        events.push(e);
    }
    h.await.unwrap();
    events
}

fn done(events: &[Event], node: usize) -> exec::NodeResult {
    events
        .iter()
        .find_map(|e| match e {
            Event::Done { node: n, result } if *n == node => Some(result.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result for node {node}"))
}

fn stdout(events: &[Event], node: usize) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Line {
                node: n,
                stream: Stream::Stdout,
                text,
            } if *n == node => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_nodes_through_one_bastion_connection() {
    let Some(tb) = Testbed::new(8, 1) else { return };
    let pool = Pool::new(opts(&tb.known_hosts, HostKeyPolicy::Refuse));
    let events = run_all(
        pool.clone(),
        resolver(&tb),
        nodes(&tb),
        "ip -4 -o addr show eth0 | awk '{print $4}'; echo $SSH_CONNECTION",
    )
    .await;
    for (i, node) in tb.nodes.iter().enumerate() {
        let r = done(&events, i);
        assert_eq!((r.code, r.error.as_deref()), (0, None), "node {i}");
        let out = stdout(&events, i);
        assert_eq!(
            out[0],
            format!("{}/24", node.addr),
            "node {i} answered from its own namespace"
        );
        assert!(
            out[1].starts_with("10.88.0.254 "),
            "node {i} was reached from the bastion: {}",
            out[1]
        );
    }
    // Every node's connection ran through one connection to the bastion.
    let established = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &tb.bastion.ns,
            "ss",
            "-Htn",
            "state",
            "established",
            "( sport = :22 )",
        ])
        .output()
        .unwrap();
    let count = String::from_utf8_lossy(&established.stdout).lines().count();
    assert!(count <= 1, "{count} connections to the bastion");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_invalid_utf8_and_a_megabyte_without_newline() {
    let Some(tb) = Testbed::new(3, 0) else { return };
    let pool = Pool::new(opts(&tb.known_hosts, HostKeyPolicy::Refuse));
    let cmd = "case $(ip -4 -o addr show eth0) in *10.88.0.2/*) echo two; exit 3;; *10.88.0.3/*) kill -TERM $$;; esac; \
               head -c 1000000 /dev/zero | tr '\\0' x; printf '\\377\\376end'";
    let events = run_all(pool, resolver(&tb), nodes(&tb), cmd).await;
    assert_eq!(done(&events, 0).code, 0);
    assert_eq!(done(&events, 1).code, 3);
    assert_eq!(done(&events, 2).code, 128 + 15, "killed by TERM");
    let out = stdout(&events, 0);
    let total: usize = out.iter().map(|l| l.len()).sum();
    assert!(out.iter().all(|l| l.len() <= exec::MAX_LINE), "lines are capped");
    assert!(
        out.last().unwrap().ends_with("\u{fffd}\u{fffd}end"),
        "invalid UTF-8 is replaced, not fatal"
    );
    assert_eq!(total, 1_000_000 + "\u{fffd}\u{fffd}end".len());
    assert_eq!(stdout(&events, 1), vec!["two"]);
    assert_eq!(
        exec::worst(&[done(&events, 0), done(&events, 1), done(&events, 2)]),
        143
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_host_key_is_refused_and_unknown_follows_policy() {
    let Some(mut tb) = Testbed::new(2, 0) else { return };
    tb.change_host_key(1);
    let pool = Pool::new(opts(&tb.known_hosts, HostKeyPolicy::AcceptNew));
    let res = resolver(&tb);
    let all = hosts(&tb);
    let route = res.route(&all[1]);
    match pool.connect(&route).await {
        Err(SshError::HostKeyChanged {
            target, file, line, ..
        }) => {
            assert_eq!(target, format!("root@{}", tb.nodes[1].addr));
            assert_eq!(file, tb.known_hosts.display().to_string());
            assert_eq!(line, 2);
        }
        Err(e) => panic!("expected a changed-key refusal, got: {e}"),
        Ok(_) => panic!("a changed host key was accepted"),
    }
    let msg = pool.connect(&route).await.err().unwrap().to_string();
    assert!(msg.contains("HOST KEY CHANGED"), "{msg}");
    // A key of another type (ECDSA where ed25519 is recorded) is a changed host too, with
    // accept-new as without it: refused, and nothing is appended to known_hosts.
    tb.change_host_key_to(1, "ecdsa");
    let before = std::fs::read_to_string(&tb.known_hosts).unwrap();
    let msg = pool
        .connect(&route)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(msg.contains("HOST KEY CHANGED") && msg.contains("ecdsa"), "{msg}");
    assert_eq!(std::fs::read_to_string(&tb.known_hosts).unwrap(), before);
    // node 0 still works over the same bastion.
    assert!(pool.connect(&res.route(&all[0])).await.is_ok());

    // An empty known_hosts: Refuse says so, AcceptNew learns both bastion and node.
    let fresh = tb.dir.path().join("fresh_known_hosts");
    let refuse = Pool::new(opts(&fresh, HostKeyPolicy::Refuse));
    let e = refuse.connect(&res.route(&all[0])).await.err().unwrap();
    assert!(matches!(e, SshError::HostKeyUnknown { .. }), "{e}");
    assert!(e.to_string().contains("SHA256:"), "{e}");
    let accept = Pool::new(opts(&fresh, HostKeyPolicy::AcceptNew));
    accept.connect(&res.route(&all[0])).await.unwrap();
    let learned = std::fs::read_to_string(&fresh).unwrap();
    assert!(
        learned.contains(&tb.bastion.host_key_pub) && learned.contains(&tb.nodes[0].host_key_pub),
        "{learned}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_user_key_gives_a_clear_auth_error() {
    let Some(tb) = Testbed::new(1, 0) else { return };
    let other = tb.dir.path().join("other_key");
    let st = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ecdsa", "-N", "", "-f", other.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(st.success());
    let mut n = hosts(&tb);
    n[0].identity_file = Some(other.display().to_string());
    let pool = Pool::new(opts(&tb.known_hosts, HostKeyPolicy::Refuse));
    let e = pool
        .connect(&resolver(&tb).route(&n[0]))
        .await
        .err()
        .expect("auth must fail");
    match &e {
        SshError::Auth { target, tried } => {
            assert_eq!(target, &format!("root@{}", tb.nodes[0].addr));
            assert_eq!(tried, &vec![other.display().to_string()]);
        }
        other => panic!("expected an auth error, got {other}"),
    }
    assert!(e.to_string().contains("authentication failed; tried"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_dying_mid_command_does_not_touch_the_others() {
    let Some(mut tb) = Testbed::new(3, 0) else { return };
    let pool = Pool::new(opts(&tb.known_hosts, HostKeyPolicy::Refuse));
    let (res, all) = (resolver(&tb), nodes(&tb));
    // Each node marks that its command started; node 1 dies once all three have (a fixed
    // wait could end before a slow connection was made, under a loaded machine), and the
    // commands finish only when told to after that (a fixed `sleep` could end on node 1
    // before the last node had started, under load: CI saw node 1 end with 0).
    let marks = tb.dir.path().join("started");
    let go = tb.dir.path().join("go");
    std::fs::create_dir_all(&marks).unwrap();
    let cmd = format!(
        "mktemp -p {} s.XXXXXX >/dev/null; i=0; until [ -e {} ] || [ $i -ge 600 ]; do sleep 0.05; i=$((i+1)); done; echo finished",
        marks.display(),
        go.display()
    );
    let h = tokio::spawn(run_all(pool, res, all, Box::leak(cmd.into_boxed_str())));
    let t0 = std::time::Instant::now();
    while std::fs::read_dir(&marks).unwrap().count() < 3 {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(20),
            "the commands never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    tb.kill_sshd(1);
    std::fs::write(&go, "").unwrap();
    let events = h.await.unwrap();
    assert_eq!(done(&events, 0).code, 0);
    assert_eq!(done(&events, 2).code, 0);
    assert_eq!(stdout(&events, 2), vec!["finished"]);
    let lost = done(&events, 1);
    assert_eq!(lost.code, exec::UNREACHABLE);
    assert!(lost.error.is_some());
}

fn keygen(dir: &Path, name: &str, kind: &[&str], pass: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    let mut args = vec!["-q"];
    args.extend(kind);
    args.extend(["-N", pass, "-f", path.to_str().unwrap()]);
    assert!(std::process::Command::new("ssh-keygen")
        .args(&args)
        .status()
        .unwrap()
        .success());
    path
}

fn authorize(tb: &Testbed, key: &Path) {
    use std::io::Write;
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(tb.dir.path().join("authorized_keys"))
        .unwrap();
    f.write_all(public.as_bytes()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rsa_ecdsa_encrypted_keys_and_the_agent() {
    let Some(tb) = Testbed::new(1, 0) else { return };
    let d = tb.dir.path();
    let rsa = keygen(d, "id_rsa_test", &["-t", "rsa", "-b", "2048"], "");
    let ecdsa = keygen(d, "id_ecdsa_test", &["-t", "ecdsa"], "");
    let enc = keygen(d, "id_enc_test", &["-t", "ed25519"], "correct horse");
    for k in [&rsa, &ecdsa, &enc] {
        authorize(&tb, k);
    }
    let res = resolver(&tb);
    let base = hosts(&tb)[0].clone();
    let with_key = |k: &Path| {
        let mut n = base.clone();
        n.identity_file = Some(k.display().to_string());
        n.proxy_jump = None;
        n
    };
    let direct_pool = |prompter: Arc<dyn flightdeck::ssh::client::Prompter>| {
        Pool::new(SshOptions {
            known_hosts: vec![tb.known_hosts.clone()],
            policy: HostKeyPolicy::Refuse,
            prompter,
            use_agent: false,
            agent_socket: None,
            keys: Default::default(),
        })
    };
    // Through the bastion for realism: the jump uses the testbed key, the node the one under test.
    let via = |k: &Path| {
        let mut n = with_key(k);
        n.proxy_jump = base.proxy_jump.clone();
        n
    };
    let pool = direct_pool(Arc::new(NoPrompt));
    for k in [&rsa, &ecdsa] {
        let c = pool
            .connect(&res.route(&via(k)))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", k.display()));
        let mut ch = c.exec("echo ok").await.unwrap();
        let mut out = vec![];
        let status = flightdeck::ssh::client::drain(&mut ch, |_, d| out.extend_from_slice(d)).await;
        assert_eq!(
            (status, out.as_slice()),
            (Some(0), &b"ok\n"[..]),
            "{}",
            k.display()
        );
    }
    // Encrypted: no one to ask -> a clear auth error; a passphrase -> in.
    let e = pool
        .connect(&res.route(&via(&enc)))
        .await
        .err()
        .expect("no passphrase, no login");
    assert!(e.to_string().contains("encrypted; no passphrase given"), "{e}");
    let asking = direct_pool(Arc::new(CountingPassphrase("correct horse", Default::default())));
    asking.connect(&res.route(&via(&enc))).await.unwrap();
    let wrong = direct_pool(Arc::new(CountingPassphrase("wrong", Default::default())));
    let e = wrong.connect(&res.route(&via(&enc))).await.err().unwrap();
    assert!(e.to_string().contains("cannot decrypt"), "{e}");

    // The agent: a key only the agent holds.
    let sock = d.join("agent.sock");
    let mut agent = std::process::Command::new("ssh-agent")
        .args(["-D", "-a", sock.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..100 {
        if sock.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let agent_key = keygen(d, "id_agent_only", &["-t", "ed25519"], "");
    authorize(&tb, &agent_key);
    let added = std::process::Command::new("ssh-add")
        .arg(&agent_key)
        .env("SSH_AUTH_SOCK", &sock)
        .output()
        .unwrap();
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    std::fs::remove_file(&agent_key).unwrap();
    // SAFETY-free in edition 2021: only this test reads SSH_AUTH_SOCK (the others disable the agent).
    std::env::set_var("SSH_AUTH_SOCK", &sock);
    let agent_pool = Pool::new(SshOptions {
        known_hosts: vec![tb.known_hosts.clone()],
        policy: HostKeyPolicy::Refuse,
        prompter: Arc::new(NoPrompt),
        use_agent: true,
        agent_socket: None,
        keys: Default::default(),
    });
    let mut n = base.clone();
    n.identity_file = None;
    n.proxy_jump = None;
    // Reach the node directly from the bastion's view is not possible; go through it with
    // the agent for both hops.
    n.proxy_jump = base.proxy_jump.clone().map(|mut j| {
        j.identity_file = None;
        j
    });
    let r = agent_pool.connect(&res.route(&n)).await;
    let _ = agent.kill();
    let _ = agent.wait();
    std::env::remove_var("SSH_AUTH_SOCK");
    r.expect("agent authentication through the bastion");
}

/// A prompter double that answers a fixed passphrase and counts the questions (the real
/// ones ask a person).
struct CountingPassphrase(&'static str, std::sync::atomic::AtomicUsize);

impl flightdeck::ssh::client::Prompter for CountingPassphrase {
    fn confirm_host_key<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
    ) -> flightdeck::ssh::client::BoxFuture<'a, bool> {
        Box::pin(async { false })
    }
    fn passphrase<'a>(&'a self, _: &'a Path) -> flightdeck::ssh::client::BoxFuture<'a, Option<String>> {
        self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async { Some(self.0.to_string()) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unprotected_key_is_refused_and_a_passphrase_is_asked_once_per_run() {
    let Some(tb) = Testbed::new(3, 0) else { return };
    let d = tb.dir.path();
    let res = resolver(&tb);
    let all = hosts(&tb);
    // The testbed's key, readable by others: refused as OpenSSH refuses it.
    let open = d.join("id_open");
    std::fs::copy(&tb.user_key, &open).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut n = all[0].clone();
    n.identity_file = Some(open.display().to_string());
    let pool = Pool::new(opts(&tb.known_hosts, HostKeyPolicy::Refuse));
    let e = pool
        .connect(&res.route(&n))
        .await
        .err()
        .expect("an unprotected key is not used");
    let msg = e.to_string();
    assert!(
        msg.contains("UNPROTECTED PRIVATE KEY FILE: permissions 0644")
            && msg.contains(&format!("chmod 600 {}", open.display())),
        "{msg}"
    );
    // An encrypted key: one question for three nodes.
    let enc = keygen(d, "id_enc_once", &["-t", "ed25519"], "correct horse");
    authorize(&tb, &enc);
    let prompter = Arc::new(CountingPassphrase("correct horse", Default::default()));
    let pool = Pool::new(SshOptions {
        prompter: prompter.clone(),
        ..opts(&tb.known_hosts, HostKeyPolicy::Refuse)
    });
    for node in &all {
        let mut n = node.clone();
        n.identity_file = Some(enc.display().to_string());
        pool.connect(&res.route(&n)).await.unwrap();
    }
    assert_eq!(prompter.1.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// Established SSH connections to node `i`'s sshd, counted in its namespace.
fn sessions_at(tb: &Testbed, i: usize) -> usize {
    tb.node_run(i, &["ss", "-Htn", "state", "established", "( sport = :22 )"])
        .unwrap()
        .lines()
        .count()
}

/// A channel's stdout and exit status. Its stderr is left out: the testbed's nodes share
/// the host's home, whose shell start-up files may print there (a pyenv rehash racing
/// another session's was seen), which says nothing about the channel.
async fn read_to_end(ch: &mut russh::Channel<russh::client::Msg>) -> (String, Option<u32>) {
    let mut out = Vec::new();
    let status = flightdeck::ssh::client::drain(ch, |stderr, d| {
        if !stderr {
            out.extend_from_slice(d)
        }
    })
    .await;
    (String::from_utf8_lossy(&out).into_owned(), status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodes_channels_share_one_connection_and_a_second_opens_at_max_sessions() {
    let Some(mut tb) = Testbed::new(1, 0) else { return };
    tb.set_max_sessions(0, 2);
    let pool = Pool::new(opts(&tb.known_hosts, HostKeyPolicy::Refuse));
    let route = resolver(&tb).route(&hosts(&tb)[0]);
    // A sampler-like exec and a pane's shell: one connection.
    let (c1, ch1) = pool.exec(&route, "sleep 60").await.unwrap();
    let (c2, ch2) = pool.shell(&route, "xterm-256color", 80, 24).await.unwrap();
    assert!(Arc::ptr_eq(&c1, &c2), "the shell rides the exec's connection");
    assert_eq!(sessions_at(&tb, 0), 1);
    // sshd refuses a third session on it (MaxSessions 2): a second connection carries it.
    let (c3, mut ch3) = pool.exec(&route, "echo third").await.unwrap();
    assert!(!Arc::ptr_eq(&c1, &c3));
    assert_eq!(read_to_end(&mut ch3).await, ("third\n".to_string(), Some(0)));
    assert_eq!(sessions_at(&tb, 0), 2);
    // The next channel goes back to the first connection with room: the second one's
    // session ended, so it has room again and nothing new is opened.
    drop(ch3);
    let (c4, mut ch4) = pool.exec(&route, "echo fourth").await.unwrap();
    assert!(Arc::ptr_eq(&c4, &c3), "the second connection had room again");
    assert_eq!(read_to_end(&mut ch4).await.0, "fourth\n");
    // When every user lets go, the connections close.
    drop((c1, c2, c3, c4, ch1, ch2, ch4));
    let start = std::time::Instant::now();
    while sessions_at(&tb, 0) > 0 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "connections still open after their users let go: {}",
            sessions_at(&tb, 0)
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // And a new user gets a fresh one.
    let (_c, mut ch) = pool.exec(&route, "echo again").await.unwrap();
    assert_eq!(read_to_end(&mut ch).await.0, "again\n");
}

/// A host that accepts the TCP connection but never sends its SSH banner: the error
/// says how long one attempt waited, how many were made and how long all took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_host_times_out_and_the_message_counts_the_attempts() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hold = tokio::spawn(async move {
        let mut held = vec![];
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let known = dir.path().join("known_hosts");
    let pool = Pool::new(opts(&known, HostKeyPolicy::Refuse));
    let res = Resolver::new(dir.path());
    let node = SshAddress {
        host: "127.0.0.1".into(),
        port: Some(port),
        user: Some("root".into()),
        identity_file: None,
        proxy_jump: None,
    };
    let mut route = res.route(&node);
    route.target.connect_timeout = std::time::Duration::from_millis(400);
    let e = pool
        .connect(&route)
        .await
        .err()
        .expect("no banner, no connection");
    let msg = e.to_string();
    assert!(matches!(e, SshError::Timeout { attempts: 3, .. }), "{msg}");
    assert!(
        msg.contains("connection timed out after 400ms (each of 3 attempts;"),
        "{msg}"
    );
    hold.abort();
}

/// The fault matrix's "the bastion dropped and back": commands through it fail at once
/// with the reason (no hang), and once it is back the same pool reaches every node again
/// (the dead jump connection is replaced).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bastion_dropped_and_back() {
    let Some(mut tb) = Testbed::new(2, 0) else { return };
    let pool = Pool::new(opts(&tb.known_hosts, HostKeyPolicy::Refuse));
    let res = resolver(&tb);
    let all = nodes(&tb);
    let events = run_all(pool.clone(), res.clone(), all.clone(), "echo up").await;
    for i in 0..2 {
        assert_eq!(done(&events, i).code, 0);
    }
    tb.kill_bastion();
    let events = run_all(pool.clone(), res.clone(), all.clone(), "echo up").await;
    for i in 0..2 {
        let r = done(&events, i);
        assert_eq!(r.code, exec::UNREACHABLE, "{r:?}");
        assert!(r.error.is_some(), "the reason is given");
    }
    tb.start_bastion();
    let events = run_all(pool.clone(), res.clone(), all.clone(), "echo back").await;
    for i in 0..2 {
        assert_eq!(done(&events, i).code, 0, "{:?}", done(&events, i));
        assert_eq!(stdout(&events, i), vec!["back"]);
    }
}
