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
//! docker shim runs an image as Docker does: the recorded Dockerfile's ENTRYPOINT, Google's
//! own for the TCPX plugin image, unless `--entrypoint` replaces it, with only the
//! variables passed to it; it applies no `--volume`, so a container sees the node's
//! files).

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

/// `nccl run lab` on one GPU a node with the nccl-tests double in `d`, under `profile`
/// (the fleet's own without one), then `extra`; `mpirun`: through the double's mpirun
/// (several nodes).
fn nccl_run(
    home: &Path,
    d: &Path,
    profile: Option<&str>,
    mpirun: bool,
    extra: &[&str],
) -> std::process::Output {
    let tests = d.to_str().unwrap().to_string();
    let launcher = d.join("mpirun").to_str().unwrap().to_string();
    let mut args = vec!["nccl", "run", "lab"];
    if let Some(p) = profile {
        args.extend(["--profile", p]);
    }
    args.extend(["-g", "1"]);
    args.extend_from_slice(extra);
    args.extend(["--nccl-tests-dir", &tests]);
    if mpirun {
        args.extend(["--mpirun", &launcher]);
    }
    flightdeck(home, &args)
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
    let Some(tb) = Testbed::new_machines_with_homes(2, 8) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    bootstrap(home.path(), "tcpxo");
    testbed::a3_mega_nics(&tb, 0);
    testbed::a3_mega_nics(&tb, 1);
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
    let out = nccl_run(home.path(), &d, Some("tcpxo"), false, &["--nodes", "0"]);
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

    // Both nodes: the pre-flight on each, then mpirun on the head (its double) with the
    // profile's variables passed to every rank and its own TCP on the control NIC.
    let out = nccl_run(home.path(), &d, Some("tcpxo"), true, &[]);
    let err = text(&out.stderr);
    assert!(out.status.success() && err.contains("busbw"), "{err}");
    assert!(
        err.contains("pre-flight: GPUDirect-tcpxo pieces on 2 nodes"),
        "{err}"
    );
    let args = std::fs::read_to_string(d.join("mpirun.args")).unwrap();
    for piece in [
        "--mca btl tcp,self --mca btl_tcp_if_include enp0s12",
        "-x LD_LIBRARY_PATH",
        "-x NCCL_FASTRAK_IFNAME",
        "-x NCCL_TUNER_PLUGIN",
        "-x FLIGHTDECK_RUN_ID",
        "-np 2",
    ] {
        assert!(args.contains(piece), "{piece}: {args}");
    }

    // A two-node job with the TCPXO profile: each node's torchrun sees the same.
    for i in 0..2 {
        let bin = root(&tb, i).join("usr/local/bin/torchrun");
        let rec = tb.dir.path().join(format!("torchrun-env-{i}"));
        write_exec(
            &bin,
            &format!(
                "#!/bin/sh\n# STAND-IN for torchrun: records the environment it was started with\nenv > '{}'\necho \"torchrun $*\"\n",
                rec.display()
            ),
        );
    }
    let job = home.path().join("job.yaml");
    std::fs::write(
        &job,
        "type: task\nname: mega\nfleet: lab\nnodes: 2\nnccl_profile: tcpxo\nenv:\n  - HF_TOKEN=abc\ncommands:\n  - torchrun --nnodes=$NNODES --node-rank=$NODE_RANK train.py\n",
    )
    .unwrap();
    let out = flightdeck(home.path(), &["job", "run", job.to_str().unwrap()]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{all}");
    for rank in 0..2 {
        assert!(
            all.contains(&format!("torchrun --nnodes=2 --node-rank={rank} train.py")),
            "{all}"
        );
    }
    let envs = recorded(tb.dir.path(), "torchrun-env");
    assert_eq!(envs.len(), 2, "torchrun started on both nodes");
    let env = &envs[1];
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
    let Some(tb) = Testbed::new_machines_with_homes(2, 2) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    bootstrap(home.path(), "rdma");
    testbed::a3_ultra_nics(&tb, 0);
    testbed::a3_ultra_nics(&tb, 1);
    let d = tb.dir.path().join("nccl-tests");
    recording_nccl_tests(&d);
    let run = |home: &Path| nccl_run(home, &d, Some("rdma"), false, &["--nodes", "0"]);
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

    // Both nodes: mpirun (its double) with gIB's variables for every rank, pinned to the
    // control NIC; then a two-node job whose ranks see gIB's environment.
    let out = nccl_run(home.path(), &d, Some("rdma"), true, &[]);
    let err = text(&out.stderr);
    assert!(out.status.success() && err.contains("busbw"), "{err}");
    let args = std::fs::read_to_string(d.join("mpirun.args")).unwrap();
    for piece in [
        "--mca btl_tcp_if_include enp0s19",
        "-x NCCL_NET",
        "-x NCCL_IB_TC",
        "-x LD_LIBRARY_PATH",
        "-np 2",
    ] {
        assert!(args.contains(piece), "{piece}: {args}");
    }
    let job = home.path().join("job.yaml");
    std::fs::write(
        &job,
        "type: task\nname: ultra\nfleet: lab\nnodes: 2\nnccl_profile: rdma\ncommands:\n  - echo rank $NODE_RANK net=$NCCL_NET lib=${LD_LIBRARY_PATH%%:*}\n",
    )
    .unwrap();
    let out = flightdeck(home.path(), &["job", "run", job.to_str().unwrap()]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{all}");
    for rank in 0..2 {
        assert!(
            all.contains(&format!("rank {rank} net=gIB lib=/usr/local/gib/lib64")),
            "{all}"
        );
    }

    // The doctor on the first node: its RDMA and GPUDirect checks pass, then name the
    // port that went down.
    tb.nodes[0].add_gpu_double();
    let doctor = |home: &Path| {
        let out = flightdeck(
            home,
            &[
                "doctor",
                "lab",
                "--profile",
                "rdma",
                "--only",
                "rdma,gpudirect",
                "--nodes",
                "0",
                "--json",
            ],
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        (out.status.code(), v, text(&out.stderr))
    };
    let (code, v, err) = doctor(home.path());
    assert_eq!(code, Some(0), "{v}{err}");
    tb.nodes[0].set_rdma_port_state(3, "1: DOWN");
    let (code, v, err) = doctor(home.path());
    assert_eq!(code, Some(1), "{v}{err}");
    assert!(
        v["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|f| f["check"] == "rdma"
                && f["outcome"] == "fail"
                && f["what"].as_str().unwrap_or("").contains("mlx5_3")),
        "{v}"
    );
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
    let home_dir = home.path();
    tb.apply_fleet(home.path(), "lab");
    for i in 0..2 {
        let r = root(&tb, i);
        testbed::mark_cos(&tb, i);
        // The daemon mpirun starts through its launch agent (a stand-in: the double passes
        // it the command to run), in the image, not on the host.
        write_exec(
            &testbed::tcpx_image_bin(&r).join("orted"),
            "#!/bin/sh\n# STAND-IN for Open MPI's orted in the TCPX image: runs what the mpirun double gives it\nexec \"$@\"\n",
        );
    }
    bootstrap(home.path(), "tcpx");
    for i in 0..2 {
        testbed::a3_high_nics(&tb, i);
    }
    let d = tb.dir.path().join("nccl-tests");
    recording_nccl_tests(&d);
    let out = nccl_run(home.path(), &d, Some("tcpx"), true, &[]);
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

    // A two-node job in the TCPX image: each rank runs its commands in its node's
    // container (not the image's entrypoint) and the job succeeds.
    let f = home_dir.join("two.yaml");
    std::fs::write(
        &f,
        format!(
            "type: task\nname: two\nfleet: lab\nnodes: 2\nimage: {}\ncommands:\n  - echo rank $NODE_RANK of $NNODES in-the-image\n",
            "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9-2.19.4-12.0"
        ),
    )
    .unwrap();
    let out = flightdeck(home_dir, &["job", "run", f.to_str().unwrap()]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("rank 0 of 2 in-the-image") && all.contains("rank 1 of 2 in-the-image"),
        "{all}"
    );
    for i in 0..2 {
        assert!(
            calls(i)
                .lines()
                .any(|l| l.starts_with("container ") && l.contains("argv=/usr/bin/env sh -c")),
            "node {i} ran the job in a container: {}",
            calls(i)
        );
    }
}

/// A3 High on Container-Optimized OS, one node, through a container runtime that runs an
/// image as Docker does (the docker shim: the image's recorded ENTRYPOINT, that of Google's
/// TCPX plugin image, whose `/scripts/container_entry.sh` prints a usage text and exits
/// 0 for a command it does not know; `--entrypoint` replaces it): the run reaches
/// nccl-tests and its rows come back; a job whose commands exit 3 is `failed` with exit
/// code 3, and one that exits 0 `succeeded` with what it printed (gpudirect review N1:
/// without `--entrypoint` the image's entrypoint swallowed both, and the job said
/// `succeeded`).
///
/// Where the double stops: the container sees the node's filesystem (the nccl-tests
/// double at its --nccl-tests-dir path), not only its image and mounts.
#[test]
fn cos_runs_and_jobs_run_their_command_not_the_images_entrypoint() {
    let Some(tb) = Testbed::new_machines(1, 4) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    testbed::mark_cos(&tb, 0);
    bootstrap(home.path(), "tcpx");
    testbed::a3_high_nics(&tb, 0);
    let d = tb.dir.path().join("nccl-tests");
    recording_nccl_tests(&d);
    let out = nccl_run(home.path(), &d, Some("tcpx"), false, &[]);
    let err = text(&out.stderr);
    assert!(
        out.status.success() && err.contains("busbw"),
        "the rows came back:\n{err}"
    );
    assert_eq!(recorded(&d, "env.").len(), 1, "nccl-tests started once: {err}");
    let calls = std::fs::read_to_string(root(&tb, 0).join("var/lib/fd-shim/calls.log")).unwrap();
    assert!(
        calls
            .lines()
            .any(|l| l.starts_with("container ") && l.contains(" argv=/usr/bin/env sh -c ")),
        "the container ran its command through `env`: {calls}"
    );
    // The run's id is in the container (review N6: mpirun's `-x` of it named a variable
    // the container lacked), so the doctor knows its ranks.
    let envs: Vec<String> = std::fs::read_dir(root(&tb, 0).join("var/lib/fd-shim"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("container-env."))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert!(
        envs.iter().any(|e| e
            .lines()
            .any(|l| l.starts_with("FLIGHTDECK_RUN_ID=nccl-all_reduce-"))),
        "{envs:?}"
    );

    // The doctor on the COS node: its GPUDirect pieces pass (the RxDM container, the
    // plugin, the run's environment), then the RxDM gone is named.
    let doctor = || {
        let out = flightdeck(
            home.path(),
            &[
                "doctor",
                "lab",
                "--profile",
                "tcpx",
                "--only",
                "gpudirect",
                "--json",
            ],
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        (out.status.code(), v)
    };
    let (code, v) = doctor();
    assert_eq!(code, Some(0), "{v}");
    let rxdm = root(&tb, 0).join("var/lib/fd-shim/containers/receive-datapath-manager");
    let kept = std::fs::read(&rxdm).unwrap();
    std::fs::remove_file(&rxdm).unwrap();
    let (code, v) = doctor();
    assert_eq!(code, Some(1), "{v}");
    assert!(v.to_string().contains("rxdm"), "{v}");
    std::fs::write(&rxdm, kept).unwrap();

    // Jobs in the same image: the commands' own exit code decides.
    let job = |name: &str, last: &str| {
        let f = home.path().join(format!("{name}.yaml"));
        std::fs::write(
            &f,
            format!(
                "type: task\nname: {name}\nfleet: lab\nimage: us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9-2.19.4-12.0\ncommands:\n  - echo in-the-image rank $NODE_RANK\n  - {last}\n"
            ),
        )
        .unwrap();
        flightdeck(home.path(), &["job", "run", f.to_str().unwrap()])
    };
    let show = |name: &str| -> serde_json::Value {
        let out = flightdeck(home.path(), &["job", "show", name, "--json"]);
        serde_json::from_slice(&out.stdout).unwrap_or_default()
    };
    let out = job("three", "exit 3");
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains("in-the-image rank 0") && !all.contains("Usage:"),
        "{all}"
    );
    let v = show("three");
    assert_eq!(v["state"], "failed", "{v}");
    assert_eq!(v["nodes"][0]["exit_code"], 3, "{v}");
    let out = job("zero", "true");
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{all}");
    assert_eq!(show("zero")["state"], "succeeded");
}

/// A command that never started is never `succeeded`: a job on COS in an image whose
/// entrypoint swallows any command (the TCPX image's, run without flightdeck's
/// `--entrypoint`, as a node whose docker drops the flag would) exits 0 with a usage
/// text; the wrapper sees no report of the command's start and records the job as
/// failed, its cause in words.
#[test]
fn a_job_whose_command_never_started_is_failed_with_its_cause() {
    let Some(tb) = Testbed::new_machines(1, 0) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    testbed::mark_cos(&tb, 0);
    // docker on this node drops --entrypoint: the image's own entrypoint runs.
    let bin = root(&tb, 0).join("usr/local/bin");
    let alt = root(&tb, 0).join("usr/local/lib/fd-alt");
    std::fs::create_dir_all(&alt).unwrap();
    std::os::unix::fs::symlink("/usr/local/bin/fdshim", alt.join("docker")).unwrap();
    std::fs::remove_file(bin.join("docker")).unwrap();
    write_exec(
        &bin.join("docker"),
        "#!/bin/bash\n# Drops --entrypoint=..., then the docker shim\na=(); for x in \"$@\"; do case \"$x\" in --entrypoint=*) ;; *) a+=(\"$x\") ;; esac; done\nexec /usr/local/lib/fd-alt/docker \"${a[@]}\"\n",
    );
    let f = home.path().join("swallowed.yaml");
    std::fs::write(
        &f,
        "type: task\nname: swallowed\nfleet: lab\nimage: us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9-2.19.4-12.0\ncommands:\n  - echo never\n",
    )
    .unwrap();
    let out = flightdeck(home.path(), &["job", "run", f.to_str().unwrap()]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains("Usage:") && !all.contains("never\n"),
        "the image's entrypoint ran: {all}"
    );
    assert!(all.contains("the command never started"), "{all}");
    let out = flightdeck(home.path(), &["job", "show", "swallowed", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(v["state"], "failed", "{v}");
    assert_eq!(v["nodes"][0]["exit_code"], 125, "{v}");
    assert!(
        v["nodes"][0]["cause"]
            .as_str()
            .is_some_and(|c| c.starts_with("the command never started")),
        "{v}"
    );
    let out = flightdeck(home.path(), &["job", "show", "swallowed"]);
    assert!(
        text(&out.stdout).contains("rank 0: the command never started"),
        "{}",
        text(&out.stdout)
    );
}

/// Multi-node on a shared home (gpudirect review N2: Google's A4 and A3 Mega blueprints
/// put /home on Filestore): the node-to-node SSH setup runs on both nodes at once in one
/// `~/.ssh`, ten times, and mpirun spans both nodes every time.
#[test]
fn multi_node_setup_on_a_shared_home_succeeds_ten_times_of_ten() {
    let Some(tb) = Testbed::new_machines_shared_home(2, 0) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    let d = tb.dir.path().join("nccl-tests");
    recording_nccl_tests(&d);
    for attempt in 0..10 {
        let out = nccl_run(home.path(), &d, None, true, &["--no-preflight"]);
        let err = text(&out.stderr);
        assert!(
            out.status.success() && err.contains("busbw"),
            "attempt {attempt}:\n{err}"
        );
        // mpirun (its double) reached both hosts over the nodes' own SSH, or it failed.
        assert!(
            err.contains("setting up SSH between the 2 nodes") && err.contains("started on 2 nodes"),
            "attempt {attempt}:\n{err}"
        );
    }
    let shared = tb.nodes[0].home.clone().unwrap();
    assert_eq!(Some(&shared), tb.nodes[1].home.as_ref());
    let auth = std::fs::read_to_string(shared.join(".ssh/authorized_keys")).unwrap();
    assert_eq!(
        auth.lines()
            .filter(|l| l.contains("flightdeck-fleet:lab:"))
            .count(),
        2,
        "{auth}"
    );
}
