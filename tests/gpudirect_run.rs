//! GPUDirect runs as they start on Google's images: the scripts flightdeck writes for an
//! NCCL run and a job launch, run for real on testbed machine nodes (sshd in network
//! namespaces, each node with its own /etc, /var/lib, /usr/local, /dev) in a fresh exec
//! session (no LD_LIBRARY_PATH; this machine's /bin/sh is dash), sourcing the references'
//! own profiles where the bootstrap installs them:
//! - TCPXO: Google's `nccl-env-profile.sh`, byte for byte from
//!   google/nccl-plugin-gpudirect-tcpxo (tests/fixtures/reference/PROVENANCE.md), which
//!   reads an unset `LD_LIBRARY_PATH` and uses bash's `[[`;
//! - RDMA: a stand-in for gIB's `set_nccl_env.sh`, which is not public, at least as
//!   hostile (tests/fixtures/reference/stand-in/README.md).
//!
//! What is a double: the bootstrap's outside pieces (tests/support/bootstrap_shims.sh),
//! the plugin libraries (a real shared object under the plugin's name), nccl-tests and
//! mpirun (tests/support/nccl_double.rs, wrapped here to record the environment they were
//! started with), torchrun, and the container runtime on Container-Optimized OS (the
//! docker shim runs the container's command with only the variables passed to it).

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use support::testbed::{self, Testbed};
use support::{flightdeck, text};

fn root(tb: &Testbed, i: usize) -> PathBuf {
    tb.nodes[i].root.clone().expect("a machine node")
}

fn reference(path: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/reference")
            .join(path),
    )
    .unwrap()
}

fn write_exec(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// nccl-tests' double (a recorded H200 run replayed), its `all_reduce_perf` wrapped to
/// record the environment it starts with in `dir/env.PID`.
fn recording_nccl_tests(dir: &Path) {
    support::nccl_double::install(dir, "0");
    std::fs::rename(dir.join("all_reduce_perf"), dir.join("all_reduce_perf.double")).unwrap();
    write_exec(
        &dir.join("all_reduce_perf"),
        &format!(
            "#!/bin/sh\n# STAND-IN for nccl-tests' all_reduce_perf: records its environment, then replays a recorded run\n\
             env > '{d}/env.'$$\nexec '{d}/all_reduce_perf.double' \"$@\"\n",
            d = dir.display()
        ),
    );
}

/// The environments recorded in `dir` (files `PREFIX.*`).
fn recorded(dir: &Path, prefix: &str) -> Vec<BTreeMap<String, String>> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if !e.file_name().to_string_lossy().starts_with(prefix) {
            continue;
        }
        let t = std::fs::read_to_string(e.path()).unwrap();
        out.push(
            t.lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
    }
    out
}

fn bootstrap(home: &Path, flavour: &str) {
    let out = flightdeck(home, &["fleet", "bootstrap", "lab", "--flavour", flavour]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// LD_LIBRARY_PATH as NCCL sees it: `first` first, no empty entry (the current
/// directory), nothing unexpanded.
fn assert_library_path(env: &BTreeMap<String, String>, first: &str) {
    let l = env.get("LD_LIBRARY_PATH").expect("LD_LIBRARY_PATH set");
    assert!(!l.contains("${") && !l.contains('$'), "{l}");
    assert!(l.split(':').all(|e| !e.is_empty()), "an empty entry: {l}");
    assert_eq!(l.split(':').next(), Some(first), "{l}");
}

fn sh_is_dash() -> bool {
    std::fs::read_link("/bin/sh").is_ok_and(|t| t.to_string_lossy().contains("dash"))
}

/// A3 Mega: the run's script sources Google's real `nccl-env-profile.sh` (which stops a
/// POSIX `sh -u` on its unset `LD_LIBRARY_PATH`), the pre-flight passes on a bootstrapped
/// node with every new check (the run's environment under bash, the loader finding the
/// plugin and the tuner the profile names, the import helper, the RxDM's ready line), and
/// nccl-tests starts with the plugin directory first, the profile's variables and the
/// Ubuntu NIC names; a job's torchrun likewise.
#[test]
fn tcpxo_runs_and_jobs_source_googles_profile_and_nccl_sees_the_plugin_first() {
    assert!(
        sh_is_dash(),
        "this test is about /bin/sh being dash, as on Ubuntu"
    );
    let Some(tb) = Testbed::new_machines(1, 8) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    bootstrap(home.path(), "tcpxo");
    testbed::a3_mega_nics(&tb, 0);
    // The node's profile is Google's own, with the bootstrap's lines after it.
    let profile =
        std::fs::read_to_string(root(&tb, 0).join("var/lib/tcpxo/lib64/nccl-env-profile.sh")).unwrap();
    assert!(
        profile.starts_with(&reference(
            "nccl-plugin-gpudirect-tcpxo/tcpxo_scripts/nccl-env-profile.sh"
        )),
        "{profile}"
    );

    let d = tb.dir.path().join("nccl-tests");
    recording_nccl_tests(&d);
    let out = flightdeck(
        home.path(),
        &[
            "nccl",
            "run",
            "lab",
            "--profile",
            "tcpxo",
            "-g",
            "1",
            "--nccl-tests-dir",
            d.to_str().unwrap(),
        ],
    );
    let err = text(&out.stderr);
    assert!(
        err.contains("pre-flight: GPUDirect-tcpxo pieces on 1 node"),
        "{err}"
    );
    assert!(!err.contains("pre-flight for"), "{err}");
    // What `nccl run` prints of the profile holds no single-quoted `${`.
    for l in err.lines().filter(|l| l.trim_start().starts_with("export ")) {
        assert!(!l.split('\'').skip(1).step_by(2).any(|q| q.contains("${")), "{l}");
    }
    let envs = recorded(&d, "env.");
    assert_eq!(envs.len(), 1, "nccl-tests started once: {err}");
    let env = &envs[0];
    assert_library_path(env, "/var/lib/tcpxo/lib64");
    for (k, v) in [
        // flightdeck's own, after the profile: the Ubuntu NIC names.
        ("NCCL_FASTRAK_CTRL_DEV", "enp0s12"),
        (
            "NCCL_FASTRAK_IFNAME",
            "enp6s0,enp7s0,enp13s0,enp14s0,enp134s0,enp135s0,enp141s0,enp142s0",
        ),
        ("NCCL_SOCKET_IFNAME", "enp0s12"),
        ("NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", "/dev/aperture_devices"),
        // Google's profile's own.
        ("NCCL_TUNER_PLUGIN", "libnccl-tuner.so"),
        ("NCCL_FASTRAK_USE_SNAP", "1"),
        ("NCCL_FASTRAK_USE_LLCM", "1"),
        (
            "NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE",
            "/var/lib/tcpxo/lib64/a3plus_guest_config.textproto",
        ),
        ("NCCL_LIB_DIR", "/var/lib/tcpxo/lib64"),
        // The run's debug setting wins over the profile's WARN.
        ("NCCL_DEBUG", "INFO"),
        ("NCCL_DEBUG_SUBSYS", "INIT,NET"),
    ] {
        assert_eq!(env.get(k).map(String::as_str), Some(v), "{k}");
    }
    assert!(out.status.code().is_some(), "{err}");
    assert!(
        err.contains("busbw") && out.status.success(),
        "the rows came back:\n{err}"
    );

    // A job on the same node, with the TCPXO profile: its torchrun sees the same.
    let bin = root(&tb, 0).join("usr/local/bin/torchrun");
    let rec = tb.dir.path().join("torchrun-env");
    write_exec(
        &bin,
        &format!(
            "#!/bin/sh\n# STAND-IN for torchrun: records the environment it was started with\nenv > '{}'\necho \"torchrun $*\"\n",
            rec.display()
        ),
    );
    let job = home.path().join("job.yaml");
    std::fs::write(
        &job,
        "type: task\nname: mega\nfleet: lab\nnccl_profile: tcpxo\nenv:\n  - HF_TOKEN=abc\ncommands:\n  - torchrun --nnodes=$NNODES --node-rank=$NODE_RANK train.py\n",
    )
    .unwrap();
    let out = flightdeck(home.path(), &["job", "run", job.to_str().unwrap()]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("torchrun --nnodes=1 --node-rank=0 train.py"),
        "{all}"
    );
    let env = &recorded(tb.dir.path(), "torchrun-env")[0];
    assert_library_path(env, "/var/lib/tcpxo/lib64");
    assert_eq!(
        env.get("NCCL_FASTRAK_IFNAME").map(String::as_str),
        Some("enp6s0,enp7s0,enp13s0,enp14s0,enp134s0,enp135s0,enp141s0,enp142s0")
    );
    assert_eq!(
        env.get("NCCL_TUNER_PLUGIN").map(String::as_str),
        Some("libnccl-tuner.so")
    );
    assert_eq!(env.get("HF_TOKEN").map(String::as_str), Some("abc"));
}

/// A3 Ultra / A4: the run sources (a stand-in of) gIB's `set_nccl_env.sh`, then sets
/// `NCCL_NET=gIB` and the gVNIC names; nccl-tests starts with gIB's directory first.
/// The pre-flight names an RDMA port that is not ACTIVE.
#[test]
fn rdma_runs_source_set_nccl_env_and_the_preflight_reads_the_ports() {
    let Some(tb) = Testbed::new_machines(1, 2) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    bootstrap(home.path(), "rdma");
    testbed::a3_ultra_nics(&tb, 0);
    let d = tb.dir.path().join("nccl-tests");
    recording_nccl_tests(&d);
    let run = |home: &Path| {
        flightdeck(
            home,
            &[
                "nccl",
                "run",
                "lab",
                "--profile",
                "rdma",
                "-g",
                "1",
                "--nccl-tests-dir",
                d.to_str().unwrap(),
            ],
        )
    };
    let out = run(home.path());
    let err = text(&out.stderr);
    assert!(!err.contains("pre-flight for"), "{err}");
    let envs = recorded(&d, "env.");
    assert_eq!(envs.len(), 1, "{err}");
    let env = &envs[0];
    assert_library_path(env, "/usr/local/gib/lib64");
    for (k, v) in [
        ("NCCL_NET", "gIB"),
        ("NCCL_SOCKET_IFNAME", "enp0s19,enp192s20"),
        ("NCCL_IB_TC", "52"),
        (
            "NCCL_TUNER_CONFIG_PATH",
            "/usr/local/gib/configs/tuner_config_a3u.txtpb",
        ),
        ("NCCL_DEBUG", "INFO"),
    ] {
        assert_eq!(env.get(k).map(String::as_str), Some(v), "{k}");
    }

    tb.nodes[0].set_rdma_port_state(3, "1: DOWN");
    let out = run(home.path());
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("lab-0: rdma-ports: not ACTIVE: mlx5_3 port 1 1: DOWN;"),
        "{err}"
    );
}

/// A3 High on Container-Optimized OS, two nodes: mpirun runs in the head node's
/// container, which gets only the variables passed to it; it reaches the other node over
/// SSH with flightdeck's node-to-node files (absolute paths, the login's user) and starts
/// its daemon there through the same container, pinned to the control NIC.
#[test]
fn cos_multi_node_mpirun_reaches_the_other_nodes_container() {
    let Some(tb) = Testbed::new_machines_with_homes(2, 4) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    for i in 0..2 {
        let r = root(&tb, i);
        testbed::mark_cos(&tb, i);
        // The daemon mpirun starts through its launch agent (a stand-in: the double passes
        // it the command to run).
        write_exec(
            &r.join("usr/local/bin/orted"),
            "#!/bin/sh\n# STAND-IN for Open MPI's orted in the TCPX image: runs what the mpirun double gives it\nexec \"$@\"\n",
        );
    }
    bootstrap(home.path(), "tcpx");
    for i in 0..2 {
        testbed::a3_high_nics(&tb, i);
    }
    let d = tb.dir.path().join("nccl-tests");
    recording_nccl_tests(&d);
    let out = flightdeck(
        home.path(),
        &[
            "nccl",
            "run",
            "lab",
            "--profile",
            "tcpx",
            "-g",
            "1",
            "--nccl-tests-dir",
            d.to_str().unwrap(),
            "--mpirun",
            d.join("mpirun").to_str().unwrap(),
        ],
    );
    let err = text(&out.stderr);
    assert!(!err.contains("pre-flight for"), "{err}");
    assert!(!err.contains("ssh to") && !err.contains("failed"), "{err}");
    let args = std::fs::read_to_string(d.join("mpirun.args")).unwrap();
    assert!(
        args.contains("--mca btl tcp,self --mca btl_tcp_if_include eth0"),
        "{args}"
    );
    assert!(args.contains("--launch-agent docker run --rm"), "{args}");
    // The head node ran mpirun in a container; the other node ran the daemon in one.
    let calls = |i: usize| std::fs::read_to_string(root(&tb, i).join("var/lib/fd-shim/calls.log")).unwrap();
    assert!(
        calls(0)
            .lines()
            .any(|l| l.starts_with("docker run --rm --name fd-")
                && l.contains("nccl-plugin-gpudirecttcpx-dev@sha256:")),
        "the head's container, by the digest the bootstrap recorded: {}",
        calls(0)
    );
    assert!(
        calls(1)
            .lines()
            .any(|l| l.starts_with("docker run --rm") && l.contains(" orted ")),
        "the other node's container: {}",
        calls(1)
    );
    // The head's container had mpirun's SSH options and its pinning, and no more than it
    // was given.
    let envs: Vec<String> = std::fs::read_dir(root(&tb, 0).join("var/lib/fd-shim"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("container-env."))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    let head = envs
        .iter()
        .find(|e| e.contains("OMPI_MCA_plm_rsh_args="))
        .unwrap_or_else(|| panic!("no container had mpirun's ssh options: {envs:?}"));
    assert!(head.contains("OMPI_MCA_oob_tcp_if_include=eth0"), "{head}");
    assert!(
        head.contains("NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=eth1,eth2,eth3,eth4"),
        "{head}"
    );
    assert!(
        !head.contains("SSH_CONNECTION="),
        "the session's variables stay out: {head}"
    );
    // The node-to-node config names its files by absolute path and its user.
    let home = tb.nodes[0].home.clone().expect("a home of its own");
    let cfg = std::fs::read_to_string(home.join(".flightdeck/ssh/config")).unwrap();
    assert!(
        !cfg.contains("~/") && cfg.contains("IdentityFile /root/.flightdeck/ssh/id_ed25519"),
        "{cfg}"
    );
    assert!(cfg.contains("\n  User root\n"), "{cfg}");
}
