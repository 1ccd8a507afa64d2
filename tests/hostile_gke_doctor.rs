//! The hostile review of 2026-11-25 (../shared/reviews/2026-11-25/hostile-review.md),
//! its experiments re-run as written, for three defects:
//!
//! * D1 (G1, G2): a fleet file's `gke.kubeconfig` ran the kubeconfig's exec plugin as the
//!   operator on `fleet apply` while `validate` and `plan` showed nothing, and a relative
//!   path was read from the current folder of every later command. Against the
//!   Kubernetes API double (tests/support/k8s_double.rs), as the review's Python API
//!   server was; the plugin's proof of running is its marker file, as in the review.
//! * D9 (D4, D5): the doctor kept a node's whole output in memory, and `topo -m`
//!   parsing amplified it. The flightdeck process's peak RSS is read from /proc while
//!   it runs (and from wait4 at its end), and it is stopped past a bound, so the test
//!   fails rather than the machine.
//! * D17: the reach probe pinged whatever a node reported. On the SSH testbed, with a
//!   `ping` that records where it was sent.
//!
//! Needs root (the testbed, another user's file), as tests/doctor.rs and tests/gke.rs.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::k8s_double::{KubeDouble, NodeSpec, Options, Provisioning, TOKEN};
use support::testbed::Testbed;
use support::text;

/// flightdeck in `cwd` with a clean environment (PATH, HOME) plus `env`.
fn fd_in(home: &Path, cwd: &Path, args: &[&str], env: &[(&str, String)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_flightdeck"));
    c.args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run flightdeck")
}

fn pool_nodes() -> Vec<NodeSpec> {
    (0..2)
        .map(|i| NodeSpec {
            name: format!("gke-c-pool-1-{i}"),
            pool: "pool-1".into(),
            machine_type: "a3-ultragpu-8g".into(),
            accelerator: "nvidia-h200-141gb".into(),
            gpus: 8,
            provisioning: Provisioning::Standard,
            internal_ip: format!("10.0.0.{}", 10 + i),
        })
        .collect()
}

/// A kubeconfig for the double's cluster, context `team`, whose user is `user` (YAML
/// lines under `user:`).
fn kubeconfig(d: &KubeDouble, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\ncontexts:\n- name: team\n  context:\n    cluster: c\n    user: team\n    namespace: default\ncurrent-context: team\nusers:\n- name: team\n  user:\n{user}",
        d.url
    )
}

/// The review's plugin: `sh -c "id > MARKER; echo ExecCredential"`, its token the
/// double's.
fn plugin_user(marker: &Path) -> String {
    let cred = format!(
        r#"{{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{{"token":"{TOKEN}"}}}}"#
    );
    format!(
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: sh\n      args:\n      - -c\n      - \"id > {}; echo '{cred}'\"\n",
        marker.display(),
        cred = cred.replace('"', "\\\"")
    )
}

fn token_user() -> String {
    format!("    token: {TOKEN}\n")
}

fn write(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The double's cluster, the operator's home `op` and a repository `repo` under `dir`.
fn team(dir: &Path) -> (KubeDouble, PathBuf, PathBuf) {
    let d = KubeDouble::start(Options {
        nodes: pool_nodes(),
        ..Options::default()
    });
    let (home, repo) = (dir.join("op"), dir.join("repo"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&repo).unwrap();
    (d, home, repo)
}

/// The review's G1 fleet file, as it wrote it.
const G1_FLEET: &str =
    "type: fleet\nname: gketeam\ngke: {context: team, kubeconfig: kubeconfig, node_pools: [pool-1]}\n";

#[test]
fn d1_g1_a_repositorys_kubeconfig_runs_its_plugin_only_when_the_fleet_file_allows_it() {
    let t = tempfile::tempdir().unwrap();
    let (d, home, repo) = team(t.path());
    let marker = t.path().join("PWNED-by-kubeconfig");
    write(
        &repo.join("kubeconfig"),
        &kubeconfig(&d, &plugin_user(&marker)),
        0o600,
    );
    write(&repo.join("gke-fleet.yaml"), G1_FLEET, 0o644);
    let kc = repo.join("kubeconfig").canonicalize().unwrap();
    let shown_kc = kc.display().to_string();

    // Step 1: validate and plan say what would run, and refuse it.
    for cmd in [
        &["fleet", "validate", "gke-fleet.yaml"][..],
        &["fleet", "plan", "gke-fleet.yaml"],
    ] {
        let out = fd_in(&home, &repo, cmd, &[]);
        let err = text(&out.stderr);
        // validate: the file is wrong input (2); plan: it could not plan (1).
        assert_eq!(
            out.status.code(),
            Some(if cmd[1] == "validate" { 2 } else { 1 }),
            "{cmd:?} must refuse:\n{}{err}",
            text(&out.stdout)
        );
        assert!(err.starts_with("gke-fleet.yaml:"), "FILE:LINE:COL first: {err}");
        assert!(
            err.contains(&format!("gke.kubeconfig: kubeconfig {shown_kc} (named by the fleet file), context `team`, user `team`: its exec credential plugin would run `sh -c 'id > {}; echo ", marker.display())),
            "{cmd:?}: the path and the plugin's command are said: {err}"
        );
        assert!(
            err.contains("unless you allow that command line in your own config (")
                && err.contains("a fleet file cannot allow it"),
            "{cmd:?}: the opt-in is named: {err}"
        );
    }
    // Step 2: apply refuses before anything is run or asked of the cluster.
    let out = fd_in(&home, &repo, &["fleet", "apply", "--yes", "gke-fleet.yaml"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        !marker.exists(),
        "the plugin ran: {:?}",
        std::fs::read_to_string(&marker)
    );
    assert!(d.requests().is_empty(), "{:?}", d.requests());

    // H1 (hostile review 3): the repository opts itself in. A fleet file cannot: validate
    // names the field, and apply runs nothing.
    write(
        &repo.join("gke-fleet.yaml"),
        "type: fleet\nname: gketeam\ngke: {context: team, kubeconfig: kubeconfig, node_pools: [pool-1], allow_exec_plugin: sh}\n",
        0o644,
    );
    let out = fd_in(&home, &repo, &["fleet", "validate", "gke-fleet.yaml"], &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("gke.allow_exec_plugin: a fleet file cannot allow the kubeconfig it names to run a program on your machine"),
        "{err}"
    );
    let out = fd_in(&home, &repo, &["fleet", "apply", "--yes", "gke-fleet.yaml"], &[]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!marker.exists(), "the self-opted-in plugin ran");

    // The operator's own config allows it, as its whole command line; the command alone
    // (`sh`) does not.
    write(&repo.join("gke-fleet.yaml"), G1_FLEET, 0o644);
    let config = home.join(".config/flightdeck/config.yaml");
    let cred = format!(
        r#"{{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{{"token":"{TOKEN}"}}}}"#
    );
    let arg = format!("id > {}; echo '{cred}'", marker.display());
    let line = format!("sh -c '{}'", arg.replace('\'', "'\\''"));
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    write(&config, "gke:\n  allow_exec_plugins: [sh]\n", 0o600);
    let out = fd_in(&home, &repo, &["fleet", "validate", "gke-fleet.yaml"], &[]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "the command alone: {}",
        text(&out.stderr)
    );
    write(
        &config,
        &serde_json::json!({"gke": {"allow_exec_plugins": [line]}}).to_string(),
        0o600,
    );
    let out = fd_in(&home, &repo, &["fleet", "validate", "gke-fleet.yaml"], &[]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning: gke.kubeconfig: kubeconfig ")
            && err.contains("(runs on this machine as you: allowed by your config's gke.allow_exec_plugins)"),
        "{err}"
    );
    let out = fd_in(&home, &repo, &["fleet", "plan", "gke-fleet.yaml"], &[]);
    // The plan (its notes too) is on stdout.
    let err = text(&out.stdout);
    assert!(out.status.success(), "{err}{}", text(&out.stderr));
    assert!(!marker.exists(), "plan runs nothing");
    assert!(
        err.contains(&format!("kubeconfig {shown_kc} (named by the fleet file), context `team`, user `team`: exec plugin `sh -c ")),
        "{err}"
    );
    let out = fd_in(&home, &repo, &["fleet", "apply", "--yes", "gke-fleet.yaml"], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(marker.exists(), "allowed, the plugin gives the token");
}

/// Hostile review 3, H2: a repository's kubeconfig whose user has `tokenFile:` naming
/// one of the operator's files (a Hugging Face token, no newline) would send it to the
/// repository's server as the bearer token. Refused at validate, plan and apply, before
/// any request, unless the operator's own config lists the file.
#[test]
fn h2_a_repositorys_kubeconfig_sends_no_file_of_the_operators() {
    let t = tempfile::tempdir().unwrap();
    let (d, home, repo) = team(t.path());
    std::fs::create_dir_all(home.join(".cache/huggingface")).unwrap();
    let secret = home.join(".cache/huggingface/token");
    write(&secret, "hf_OPERATOR_SECRET_TOKEN_123", 0o600);
    let secret = secret.canonicalize().unwrap();
    write(
        &repo.join("kubeconfig"),
        &kubeconfig(&d, &format!("    tokenFile: {}\n", secret.display())),
        0o600,
    );
    write(&repo.join("gke-fleet.yaml"), G1_FLEET, 0o644);
    for (cmd, code) in [
        (&["fleet", "validate", "gke-fleet.yaml"][..], 2),
        (&["fleet", "plan", "gke-fleet.yaml"], 1),
        (&["fleet", "apply", "--yes", "gke-fleet.yaml"], 1),
    ] {
        let out = fd_in(&home, &repo, cmd, &[]);
        let err = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{cmd:?}: {}{err}",
            text(&out.stdout)
        );
        assert!(
            err.contains(&format!("its tokenFile is {}, outside the kubeconfig's folder; kube-rs reads it and sends it to the server as your bearer token", secret.display())),
            "{cmd:?}: {err}"
        );
    }
    assert!(d.requests().is_empty(), "{:?}", d.requests());
    // The operator lists the file: plan says what is read, and apply uses it.
    let config = home.join(".config/flightdeck/config.yaml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    write(
        &config,
        &format!("gke:\n  allow_kubeconfig_files: [{}]\n", secret.display()),
        0o600,
    );
    let out = fd_in(&home, &repo, &["fleet", "plan", "gke-fleet.yaml"], &[]);
    let o = text(&out.stdout);
    assert!(out.status.success(), "{o}{}", text(&out.stderr));
    assert!(
        o.contains(&format!(
            "reads tokenFile {} (outside its folder: allowed by your config's gke.allow_kubeconfig_files)",
            secret.display()
        )),
        "{o}"
    );
}

#[test]
fn d1_g2_a_kubeconfig_planted_in_the_current_folder_is_never_read() {
    let t = tempfile::tempdir().unwrap();
    let (d, home, repo) = team(t.path());
    write(&repo.join("kubeconfig"), &kubeconfig(&d, &token_user()), 0o600);
    write(&repo.join("gke-fleet.yaml"), G1_FLEET, 0o644);
    let out = fd_in(&home, &repo, &["fleet", "apply", "--yes", "gke-fleet.yaml"], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    // Another user plants a `kubeconfig` with a plugin in a folder of theirs; the
    // operator runs a command there.
    let plant = t.path().join("hrplant");
    std::fs::create_dir_all(&plant).unwrap();
    let ran_as = t.path().join("ran-as.txt");
    write(
        &plant.join("kubeconfig"),
        &kubeconfig(&d, &plugin_user(&ran_as)),
        0o644,
    );
    std::os::unix::fs::chown(&plant, Some(65534), Some(65534)).unwrap();
    std::os::unix::fs::chown(plant.join("kubeconfig"), Some(65534), Some(65534)).unwrap();
    let out = fd_in(&home, &plant, &["exec", "gketeam", "--", "true"], &[]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!ran_as.exists(), "the planted plugin ran");

    // Recorded absolute, from the fleet file's folder.
    let out = fd_in(&home, &repo, &["fleet", "list", "--json"], &[]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let kc = repo.join("kubeconfig").canonicalize().unwrap();
    assert_eq!(
        v[0]["nodes"][0]["kube"]["cluster"]["kubeconfig"].as_str(),
        Some(kc.to_str().unwrap()),
        "{v:#}"
    );

    // A state an older flightdeck wrote (the path as written, relative, and no record
    // of the applied file) is refused, not read from the current folder.
    let state = find(&home, "state.json").expect("state.json");
    let mut s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    s["fleets"][0]
        .as_object_mut()
        .unwrap()
        .remove("applied")
        .expect("applied recorded");
    std::fs::write(
        &state,
        s.to_string()
            .replace(&format!("\"{}\"", kc.display()), "\"kubeconfig\""),
    )
    .unwrap();
    std::fs::remove_file(repo.join("gke-fleet.yaml")).unwrap();
    let out = fd_in(&home, &plant, &["exec", "gketeam", "--", "true"], &[]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("recorded as a relative path"), "{err}");
    assert!(!ran_as.exists(), "the planted plugin ran");
}

fn find(dir: &Path, name: &str) -> Option<PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.file_name().is_some_and(|n| n == name) {
            return Some(p);
        }
        if p.is_dir() && !p.is_symlink() {
            if let Some(f) = find(&p, name) {
                return Some(f);
            }
        }
    }
    None
}

#[test]
fn d1_a_kubeconfig_others_could_write_is_refused_and_the_operators_own_runs_its_plugin() {
    let t = tempfile::tempdir().unwrap();
    let (d, home, repo) = team(t.path());
    std::fs::create_dir_all(home.join(".kube")).unwrap();
    let marker = t.path().join("plugin-ran");
    let kc = repo.join("kubeconfig");
    write(&kc, &kubeconfig(&d, &token_user()), 0o664);
    write(&repo.join("gke-fleet.yaml"), G1_FLEET, 0o644);
    let out = fd_in(&home, &repo, &["fleet", "apply", "--yes", "gke-fleet.yaml"], &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let shown = kc.display();
    assert!(
        err.contains(&format!("gke.kubeconfig: Bad owner or permissions on {shown}: writable by group (mode 0664): `chmod go-w {shown}`")),
        "{err}"
    );
    std::fs::set_permissions(&kc, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::chown(&kc, Some(65534), None).unwrap();
    let out = fd_in(&home, &repo, &["fleet", "validate", "gke-fleet.yaml"], &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "Bad owner or permissions on {shown}: owned by uid 65534, not by you (uid 0) or root"
        )),
        "{err}"
    );
    assert!(d.requests().is_empty());

    // The operator's own kubeconfig, no `kubeconfig` in the fleet file: its plugin runs,
    // as kubectl runs it ...
    let own = home.join(".kube/config");
    write(&own, &kubeconfig(&d, &plugin_user(&marker)), 0o600);
    write(
        &repo.join("own.yaml"),
        "type: fleet\nname: own\ngke:\n  context: team\n  node_pools: [pool-1]\n",
        0o644,
    );
    let out = fd_in(&home, &repo, &["fleet", "plan", "own.yaml"], &[]);
    // The plan (its notes too) is on stdout.
    let err = text(&out.stdout);
    assert!(out.status.success(), "{err}{}", text(&out.stderr));
    assert!(
        err.contains(&format!(
            "kubeconfig {} (yours), context `team`, user `team`: exec plugin `sh -c ",
            own.display()
        )) && err.contains("(runs, as kubectl runs your own kubeconfig's plugins)"),
        "{err}"
    );
    let out = fd_in(&home, &repo, &["fleet", "apply", "--yes", "own.yaml"], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(marker.exists());
    std::fs::remove_file(&marker).unwrap();
    // ... but only while others cannot write it.
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = fd_in(&home, &repo, &["exec", "own", "--", "true"], &[]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "Bad owner or permissions on {}: writable by group and others (mode 0666)",
            own.display()
        )),
        "{err}"
    );
    assert!(!marker.exists());
}

/// Peak RSS in KiB of a running process, from /proc.
fn vm_hwm(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The most RSS a doctor run may reach: a functional bound (the review saw the output's
/// whole size, 800 MB to 3.2 GB), not a speed target.
const RSS_BOUND_KIB: u64 = 200 * 1024;

/// Run flightdeck with `env`, watching its peak RSS: stopped (and the test failed) past
/// [`RSS_BOUND_KIB`] or after `limit`. Returns its output and peak RSS in KiB.
// The child is reaped by wait4 (for its rusage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn run_bounded(home: &Path, args: &[&str], env: &[(&str, String)], limit: Duration) -> (Output, u64) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_flightdeck"));
    c.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().unwrap();
    let pid = child.id();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    use std::io::Read;
    let so = std::thread::spawn(move || {
        let mut b = vec![];
        let _ = out.read_to_end(&mut b);
        b
    });
    let se = std::thread::spawn(move || {
        let mut b = vec![];
        let _ = err.read_to_end(&mut b);
        b
    });
    let start = Instant::now();
    let mut peak = 0;
    let status = loop {
        let mut st = 0;
        // SAFETY: a zeroed rusage is a valid value for wait4 to fill.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: pid is our child's; st and ru are valid for writes.
        let r = unsafe { libc::wait4(pid as i32, &mut st, libc::WNOHANG, &mut ru) };
        if r == pid as i32 {
            peak = peak.max(ru.ru_maxrss as u64);
            break std::os::unix::process::ExitStatusExt::from_raw(st);
        }
        if let Some(h) = vm_hwm(pid) {
            peak = peak.max(h);
        }
        if peak > RSS_BOUND_KIB || start.elapsed() > limit {
            // SAFETY: pid is our child, not yet reaped.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            let _ = child.wait();
            panic!(
                "flightdeck {args:?} reached {} MiB of RSS after {:?} (bound {} MiB, limit {limit:?})",
                peak / 1024,
                start.elapsed(),
                RSS_BOUND_KIB / 1024
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let output = Output {
        status,
        stdout: so.join().unwrap(),
        stderr: se.join().unwrap(),
    };
    (output, peak)
}

/// Every evidence line of the findings.
fn evidence(v: &serde_json::Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["evidence"].as_array().cloned().unwrap_or_default())
        .filter_map(|e| e.as_str().map(str::to_string))
        .collect()
}

#[test]
fn d9_a_node_whose_nvidia_smi_prints_without_end_finishes_with_the_cut_said_in_bounded_memory() {
    let home = tempfile::tempdir().unwrap();
    support::apply_local_fleet(home.path());
    let bin = tempfile::tempdir().unwrap();
    let smi = bin.path().join("nvidia-smi");
    write(
        &smi,
        "#!/bin/sh\n# an nvidia-smi that prints without end\nexec yes 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)'\n",
        0o755,
    );
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let t = Instant::now();
    let (out, peak) = run_bounded(
        home.path(),
        &["doctor", "local", "--json", "--only", "gpus,sysctl"],
        &[("PATH", path)],
        Duration::from_secs(120),
    );
    let took = t.elapsed();
    eprintln!("endless nvidia-smi: {took:?}, peak RSS {} MiB", peak / 1024);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)));
    assert!(took < Duration::from_secs(30), "it finishes: {took:?}");
    let ev = evidence(&v);
    assert!(
        ev.iter()
            .any(|e| e == "smi: output cut at 256 KiB on the node … the rest not read"),
        "the cut is said: {v:#}"
    );
    // The sections after it ran, each cut in turn.
    assert!(
        ev.iter()
            .any(|e| e == "gpus: output cut at 256 KiB on the node … the rest not read"),
        "{v:#}"
    );
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["check"] == "sysctl"),
        "{v:#}"
    );
    assert!(peak < RSS_BOUND_KIB, "{peak} KiB");
}

/// The review's hostile node: its `sh` (what the doctor's `sh -s` starts, through
/// `timeout`) is a wrapper whose mode file picks what it sends: `flood` N bytes of
/// base64, `topo` an N×N `nvidia-smi topo -m` matrix in the node script's markers.
const HOSTILE_SH: &str = r#"#!/bin/bash
m=$(cat /var/lib/fd-hostile/mode 2>/dev/null); n=$(cat /var/lib/fd-hostile/n 2>/dev/null)
case "$m" in
flood) cat > /dev/null; head -c "$n" /dev/zero | base64 -w 76 ;;
topo)
  cat > /dev/null
  echo "@@fd-doctor begin time"; date +%s%N; echo "@@fd-doctor end time 0"
  echo "@@fd-doctor begin smi"; echo "| NVIDIA-SMI 580.159.04    Driver Version: 580.159.04     CUDA Version: 13.0 |"; echo "@@fd-doctor end smi 0"
  echo "@@fd-doctor begin topo"
  printf '\tGPU%s' $(seq 0 $((n - 1))); echo
  row=$(printf '\tX%.0s' $(seq 1 "$n"))
  for i in $(seq 0 $((n - 1))); do printf 'GPU%s%s\n' "$i" "$row"; done
  echo "@@fd-doctor end topo 0" ;;
*) exec /bin/sh "$@" ;;
esac
"#;

#[test]
fn d9_a_hostile_nodes_flood_and_topo_matrix_are_read_in_bounded_memory() {
    let Some(tb) = Testbed::new_machines(2, 1) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "hostile");
    let root = tb.nodes[0].root.clone().expect("a machine node");
    std::fs::create_dir_all(root.join("var/lib/fd-hostile")).unwrap();
    write(&root.join("usr/local/bin/sh"), HOSTILE_SH, 0o755);
    let mode = |m: &str, n: &str| {
        std::fs::write(root.join("var/lib/fd-hostile/mode"), m).unwrap();
        std::fs::write(root.join("var/lib/fd-hostile/n"), n).unwrap();
    };
    let node0 = "hostile-0";

    // D4: 400 MB of base64 (the review sent 800 MB and 3.2 GB; RSS followed).
    mode("flood", "300000000");
    let t = Instant::now();
    let (out, peak) = run_bounded(
        home.path(),
        &["doctor", "hostile", "--json", "--only", "gpus,sysctl"],
        &[],
        Duration::from_secs(120),
    );
    eprintln!("flood: {:?}, peak RSS {} MiB", t.elapsed(), peak / 1024);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)));
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["node"] == node0)
        .unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(f["outcome"], "fail", "{f}");
    assert!(
        f["what"].as_str().unwrap().starts_with("its output passed 4 MiB"),
        "{f}"
    );
    let said = f["evidence"][0].as_str().unwrap();
    let more: u64 = said
        .strip_prefix("the node's output passed 4 MiB … ")
        .and_then(|r| r.strip_suffix(" bytes more not read"))
        .unwrap_or_else(|| panic!("{said}"))
        .parse()
        .unwrap();
    assert!(more > 390_000_000, "{said}");
    assert!(peak < RSS_BOUND_KIB, "{peak} KiB");
    // The other node was judged as usual.
    assert!(v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["node"] == "hostile-1" && f["check"] == "sysctl"));

    // D5: a 7000-GPU `topo -m` of 98 MB (the review saw 3.0 GB of RSS).
    mode("topo", "7000");
    let t = Instant::now();
    let (out, peak) = run_bounded(
        home.path(),
        &["doctor", "hostile", "--json", "--only", "gpus,nvlink,numa"],
        &[],
        Duration::from_secs(120),
    );
    eprintln!("topo: {:?}, peak RSS {} MiB", t.elapsed(), peak / 1024);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)));
    let ev = evidence(&v);
    assert!(
        ev.iter().any(|e| e.starts_with("topo: output cut at 256 KiB … ")),
        "{v:#}"
    );
    assert!(peak < RSS_BOUND_KIB, "{peak} KiB");
}

#[test]
fn d17_the_reach_probe_pings_only_unicast_addresses_in_the_probers_own_subnet() {
    let Some(tb) = Testbed::new_machines(3, 1) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    // Every node's ping records where it was sent.
    for n in &tb.nodes {
        let root = n.root.clone().expect("a machine node");
        write(
            &root.join("usr/local/bin/ping"),
            "#!/bin/sh\necho \"$*\" >> /var/lib/fd-ping.log\nexec /usr/bin/ping \"$@\"\n",
            0o755,
        );
    }
    // Node 1 reports 8.8.8.8 for its eth1 (a DNS leak, a host outside the rail).
    let root1 = tb.nodes[1].root.clone().unwrap();
    write(
        &root1.join("usr/local/bin/ip"),
        "#!/bin/sh\nif [ \"$*\" = '-o -4 addr show' ]; then /usr/sbin/ip -o -4 addr show | sed 's#inet 10[.]88[.]1[.][0-9]*/24#inet 8.8.8.8/24#'; exit 0; fi\nexec /usr/sbin/ip \"$@\"\n",
        0o755,
    );
    let out = support::flightdeck(home.path(), &["doctor", "lab", "--json", "--only", "reach"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)));
    let pinged: String = tb
        .nodes
        .iter()
        .map(|n| {
            std::fs::read_to_string(n.root.as_ref().unwrap().join("var/lib/fd-ping.log")).unwrap_or_default()
        })
        .collect();
    assert!(
        pinged.contains("10.88.1."),
        "the other pairs were probed: {pinged}"
    );
    assert!(
        !pinged.contains("8.8.8.8"),
        "pinged what node 1 reported:\n{pinged}"
    );
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["node"] == "lab-1" && f["check"] == "reach")
        .unwrap_or_else(|| panic!("the skip is said: {v:#}"));
    assert_eq!(
        f["what"],
        "eth1: its address `8.8.8.8` was not probed by 2 nodes: 8.8.8.8 is outside the prober's subnets on eth1 (10.88.1.0/24)",
        "{f}"
    );
    assert_eq!(
        f["evidence"][0],
        "lab-0: skipped: 8.8.8.8 is outside the prober's subnets on eth1 (10.88.1.0/24)"
    );
}
