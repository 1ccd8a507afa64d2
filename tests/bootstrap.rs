//! The GPUDirect bootstrap run for real on testbed nodes (sshd in network namespaces,
//! each node a machine of its own: tests/support/testbed.rs `new_machines`), through the
//! bastion, with the pieces that reach outside (Google's, Docker's and NVIDIA's apt
//! repositories and keys, container pulls, git, COS's GPU extension, modprobe, udev,
//! iptables) replaced by the recording shims of tests/support/bootstrap_shims.sh, which
//! refuse what the real tools refuse (unsigned repositories, a key file without the
//! expected key, a DKMS build without headers). Mounts, mktemp, runuser and the loader
//! are real. Needs root, like the testbed.

mod support;

use flightdeck::bootstrap::steps;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::testbed::Testbed;
use support::{flightdeck, text};

fn root(tb: &Testbed, i: usize) -> PathBuf {
    tb.nodes[i].root.clone().expect("a machine node")
}

/// The commands node `i` ran through the shims, one per line.
fn calls(tb: &Testbed, i: usize) -> Vec<String> {
    std::fs::read_to_string(root(tb, i).join("var/lib/fd-shim/calls.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The shims' calls on node `i` as `UID command args`.
fn uids(tb: &Testbed, i: usize) -> Vec<String> {
    std::fs::read_to_string(root(tb, i).join("var/lib/fd-shim/uids.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Set a fault of node `i`'s shim for `command` (`kind`: fail, sleep, wrongkey, digest,
/// githead; see bootstrap_shims.sh), or clear it.
fn fault(tb: &Testbed, i: usize, kind: &str, command: &str, value: Option<&str>) {
    let dir = root(tb, i).join("var/lib/fd-shim").join(kind);
    std::fs::create_dir_all(&dir).unwrap();
    match value {
        Some(v) => std::fs::write(dir.join(command), v).unwrap(),
        None => {
            let _ = std::fs::remove_file(dir.join(command));
        }
    }
}

/// Whether `err` names node lab-0's `step` as failed because the node was killed under
/// it: the connection lost (255), or the step's action killed (137) when the node's
/// script lived long enough to say so before its session went.
fn killed_in_step(err: &str, step: &str) -> bool {
    ["255", "137"]
        .iter()
        .any(|code| err.contains(&format!("lab-0: step {step} failed (exit {code})")))
}

fn position(calls: &[String], prefix: &str) -> usize {
    calls
        .iter()
        .position(|c| c.starts_with(prefix))
        .unwrap_or_else(|| panic!("no call `{prefix}` among\n{}", calls.join("\n")))
}

/// Calls that change a node (installs, runs, builds), as opposed to the checks' reads.
fn mutating(calls: &[String]) -> Vec<String> {
    calls
        .iter()
        .filter(|c| {
            !(c.starts_with("docker info")
                || c.starts_with("docker inspect")
                || c.starts_with("docker image inspect")
                || c.starts_with("dpkg -s")
                || c.starts_with("gpg --batch --show-keys")
                || c.starts_with("iptables -C"))
        })
        .cloned()
        .collect()
}

/// `nccl run lab --profile PROFILE -g 1 EXTRA...`: its exit code and stderr.
fn nccl_run(home: &Path, profile: &str, extra: &[&str]) -> (Option<i32>, String) {
    let mut args = vec!["nccl", "run", "lab", "--profile", profile, "-g", "1"];
    args.extend_from_slice(extra);
    let out = flightdeck(home, &args);
    (out.status.code(), text(&out.stderr))
}

fn bootstrap(home: &Path, args: &[&str]) -> (bool, String) {
    let mut full = vec!["fleet", "bootstrap"];
    full.extend_from_slice(args);
    let out = flightdeck(home, &full);
    (out.status.success(), text(&out.stderr))
}

/// The fingerprints a keyring the shims' gpg wrote holds.
fn keyring(r: &Path, name: &str) -> Vec<String> {
    let path = r.join(format!("etc/apt/keyrings/{name}.gpg"));
    let mode = std::fs::metadata(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644, "{name}");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("KEY "))
        .map(str::to_string)
        .collect()
}

/// The repository lines of the node's sources.list.d/*.list: every one signed-by a
/// keyring of /etc/apt/keyrings, none trusted=yes.
fn assert_sources_signed(r: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(r.join("etc/apt/sources.list.d")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "list") {
            continue;
        }
        for l in std::fs::read_to_string(&p)
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("deb "))
        {
            assert!(l.contains("signed-by=/etc/apt/keyrings/"), "{}: {l}", p.display());
            assert!(!l.contains("trusted=yes"), "{}: {l}", p.display());
            n += 1;
        }
    }
    n
}

/// Every key download went to a `mktemp -d` directory, gone after the step.
fn assert_downloads_private(c: &[String]) {
    let downloads: Vec<&String> = c.iter().filter(|l| l.starts_with("curl ")).collect();
    assert!(!downloads.is_empty());
    for l in downloads {
        let out = l.split(' ').skip_while(|w| *w != "-o").nth(1).unwrap_or("");
        let dir = Path::new(out).parent().unwrap();
        assert!(
            dir.to_str().unwrap().starts_with("/tmp/tmp.") && out.ends_with("/key"),
            "{l}"
        );
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
}

/// The private build directories of node `i`'s calls since `from` (`/tmp/tmp.X/...`):
/// a node killed mid-step (SIGKILL) leaves its own behind, as a machine would until it
/// reboots; the test removes them from this machine's /tmp.
fn remove_killed_tmpdirs(tb: &Testbed, i: usize, from: usize) {
    for c in &calls(tb, i)[from..] {
        for w in c.split(' ').filter(|w| w.starts_with("/tmp/tmp.")) {
            let dir: PathBuf = Path::new(w).iter().take(3).collect();
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// `ldd` loads it: a real shared object.
fn assert_loadable(path: &Path) {
    let out = std::process::Command::new("ldd").arg(path).output().unwrap();
    assert!(out.status.success(), "{}: {}", path.display(), text(&out.stderr));
}

/// Each image line of node `i`'s digest record, with its file's and folder's modes.
fn digests(r: &Path) -> Vec<(String, String)> {
    let file = r.join("var/lib/flightdeck/images.digests");
    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!((meta.permissions().mode() & 0o777, meta.uid()), (0o644, 0));
    let dir = std::fs::metadata(file.parent().unwrap()).unwrap();
    assert_eq!((dir.permissions().mode() & 0o777, dir.uid()), (0o755, 0));
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap();
            (a.to_string(), b.to_string())
        })
        .collect()
}

#[test]
fn tcpxo_runs_in_order_a_second_run_does_nothing_and_preflight_then_passes() {
    let Some(tb) = Testbed::new_machines(2, 8) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    // Before the bootstrap: the pre-flight refuses the run, naming node, check and fix.
    let (code, err) = nccl_run(home.path(), "tcpxo", &["--nodes", "0"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("lab-0: file /var/lib/tcpxo/lib64/libnccl-net.so: missing; fix: run `flightdeck fleet bootstrap FLEET`"), "{err}");
    assert!(
        err.contains("lab-0: aperture: /dev/aperture_devices missing or empty"),
        "{err}"
    );

    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "tcpxo"]);
    assert!(ok, "{err}");
    for step in [
        "docker",
        "container-toolkit",
        "apt-repos",
        "import-helper",
        "aperture-devices",
        "nccl-plugin",
        "rxdm",
        "nofile",
        "nccl-tests",
    ] {
        for n in ["lab-0", "lab-1"] {
            assert!(
                err.contains(&format!("{n}: {step}: running")),
                "{n} {step}\n{err}"
            );
            assert!(err.contains(&format!("{n}: {step}: done")), "{n} {step}\n{err}");
        }
    }
    assert!(err.contains("bootstrap tcpxo: 2 nodes ready"), "{err}");
    let kernel = text(
        &std::process::Command::new("uname")
            .arg("-r")
            .output()
            .unwrap()
            .stdout,
    );
    for i in 0..2 {
        let c = calls(&tb, i);
        // The references' order: docker, the container toolkit, the repositories, the
        // dmabuf helper (headers first), the udev rule, the plugin, the RxDM, nccl-tests.
        let order = [
            "apt-get install -y docker-ce docker-ce-cli containerd.io",
            "apt-get install -y nvidia-container-toolkit",
            "apt-get install -y apt-transport-artifact-registry dkms",
            &format!("apt-get install -y linux-headers-{}", kernel.trim()),
            "dkms build -m dmabuf-import-helper -v 1.1",
            "dkms install -m dmabuf-import-helper -v 1.1",
            "modprobe import-helper",
            "udevadm trigger --subsystem-match=pci --action=add",
            "docker run --rm --name nccl-installer --network=host -v /var/lib:/var/lib us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev@sha256:",
            "docker run --detach --restart=unless-stopped --name receive-datapath-manager",
            "make -C /tmp/tmp.",
        ];
        let at: Vec<usize> = order.iter().map(|p| position(&c, p)).collect();
        assert!(
            at.windows(2).all(|w| w[0] < w[1]),
            "order {at:?}\n{}",
            c.join("\n")
        );
        let r = root(&tb, i);
        assert!(
            std::fs::read_to_string(r.join("etc/udev/rules.d/00-a3-megagpu.rules"))
                .unwrap()
                .contains(r#"ATTR{vendor}=="0x1ae0", ATTR{device}=="0x0084""#)
        );
        // Google's own profile, with flightdeck's lines after it; sourced under bash with
        // LD_LIBRARY_PATH unset it leaves no empty entry.
        let file = r.join("var/lib/tcpxo/lib64/nccl-env-profile.sh");
        let profile = std::fs::read_to_string(&file).unwrap();
        assert!(profile.starts_with(include_str!(
            "fixtures/reference/nccl-plugin-gpudirect-tcpxo/tcpxo_scripts/nccl-env-profile.sh"
        )));
        assert!(
            profile.ends_with(&format!("{}\n", steps::tcpxo_profile_lines())),
            "{profile}"
        );
        let sourced = std::process::Command::new("bash")
            .arg("-c")
            .arg("set -u; NCCL_LIB_DIR=/var/lib/tcpxo/lib64; set +u; . \"$1\"; set -u; printf '%s|%s' \"$LD_LIBRARY_PATH\" \"$NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY\"")
            .arg("bash")
            .arg(&file)
            .env_remove("LD_LIBRARY_PATH")
            .output()
            .unwrap();
        assert_eq!(
            text(&sourced.stdout),
            "/var/lib/tcpxo/lib64:/var/lib/tcpxo/lib64|/dev/aperture_devices",
            "{}",
            text(&sourced.stderr)
        );
        for lib in ["libnccl-net.so", "libnccl.so.2", "libnccl-tuner.so"] {
            assert_loadable(&r.join("var/lib/tcpxo/lib64").join(lib));
        }
        // Keys checked and trimmed to the expected ones; every repository signed-by one.
        assert_eq!(
            keyring(&r, "docker"),
            ["9DC858229FC7DD38854AE2D88D81803C0EBFCD88"]
        );
        assert_eq!(
            keyring(&r, "nvidia-container-toolkit"),
            ["C95B321B61E88C1809C4F759DDCAE044F796ECB0"]
        );
        assert_eq!(keyring(&r, "cuda"), ["EB693B3035CD5710E231E123A4B469963BF863CC"]);
        assert_eq!(
            keyring(&r, "google-cloud"),
            [
                "A362B822F6DEDC652817EA46B53DC80D13EDEF05",
                "35BAA0B33E9EB396F59CA838C0BA5CE6DC6315A3"
            ],
            "the third key the file carries is left out"
        );
        assert_eq!(
            keyring(&r, "artifact-registry"),
            ["35BAA0B33E9EB396F59CA838C0BA5CE6DC6315A3"]
        );
        assert_eq!(assert_sources_signed(&r), 5);
        assert_downloads_private(&c);
        // The images run by the digests recorded at their first pull.
        let d = digests(&r);
        assert_eq!(
            d.iter().map(|(i, _)| i.as_str()).collect::<Vec<_>>(),
            [steps::TCPXO_PLUGIN_IMAGE, steps::TCPXO_RXDM_IMAGE]
        );
        for (_, digest) in &d {
            assert!(
                c.iter()
                    .any(|l| l.starts_with("docker run") && l.contains(digest.as_str())),
                "{digest}"
            );
        }
        assert!(!c.iter().any(|l| l.contains("--pull")), "{c:?}");
        assert!(r.join("opt/nccl-tests/build/all_reduce_perf").exists());
    }

    // A second run does nothing: every step is done already, nothing is installed.
    let before: Vec<usize> = (0..2).map(|i| calls(&tb, i).len()).collect();
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "tcpxo", "--nodes", "0-1"]);
    assert!(ok, "{err}");
    assert_eq!(err.matches(": done already").count(), 18, "{err}");
    assert!(!err.contains(": running"), "{err}");
    for (i, b) in before.iter().enumerate() {
        let new = calls(&tb, i)[*b..].to_vec();
        assert!(mutating(&new).is_empty(), "node {i} changed something: {new:?}");
    }

    // The pre-flight passes once the NICs the profile names are there with the data MTU.
    for i in 0..2 {
        support::testbed::a3_mega_nics(&tb, i);
    }
    let (_, err) = nccl_run(
        home.path(),
        "tcpxo",
        &["--nodes", "0", "--nccl-tests-dir", "/opt/nccl-tests/build"],
    );
    assert!(
        err.contains("pre-flight: GPUDirect-tcpxo pieces on 1 node"),
        "{err}"
    );
    assert!(!err.contains("pre-flight for"), "{err}");
    assert!(err.contains("flightdeck nccl attach"), "the run started: {err}");
    // One data NIC with the wrong MTU, one down: named with the fix.
    tb.node_run(1, &["ip", "link", "set", "enp7s0", "mtu", "1500"])
        .unwrap();
    tb.node_run(1, &["ip", "link", "set", "enp13s0", "down"]).unwrap();
    let (code, err) = nccl_run(
        home.path(),
        "tcpxo",
        &["--nccl-tests-dir", "/opt/nccl-tests/build"],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("failed on 1 node"), "{err}");
    assert!(
        err.contains(
            "lab-1: interface enp7s0: mtu 1500, expected 8244 to 8896; fix: make the data VPCs' MTU 8244 (fleet apply does; Cluster Toolkit's 8896 is accepted too), or edit the profile's interface names"
        ),
        "{err}"
    );
    assert!(err.contains("lab-1: interface enp13s0: down"), "{err}");
    // An RxDM that crashed and restarted keeps its earlier start's ready line in its log:
    // only what it logged since its current start counts (gpudirect review N8).
    let r = tb.nodes[0].root.clone().unwrap();
    std::fs::create_dir_all(r.join("var/lib/fd-shim/restarted")).unwrap();
    std::fs::write(r.join("var/lib/fd-shim/restarted/receive-datapath-manager"), "").unwrap();
    let (code, err) = nccl_run(
        home.path(),
        "tcpxo",
        &["--nodes", "0", "--nccl-tests-dir", "/opt/nccl-tests/build"],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("lab-0: rxdm-ready: container receive-datapath-manager's log since its start at 20"),
        "{err}"
    );
    drop(tb);
}

#[test]
fn a_failing_step_is_named_the_other_node_goes_on_and_a_rerun_finishes_it() {
    let Some(mut tb) = Testbed::new_machines(2, 0) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    fault(&tb, 1, "fail", "dkms", Some("10"));
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "tcpxo"]);
    assert!(!ok, "{err}");
    assert!(err.contains("lab-0: bootstrapped"), "{err}");
    assert!(
        err.contains("lab-1: step import-helper failed (exit 10): the action failed"),
        "{err}"
    );
    assert!(
        err.contains("    | dkms: simulated failure"),
        "the tail of its output: {err}"
    );
    assert!(
        err.contains("1 node ready, 1 failed: lab-1 (step import-helper, exit 10)"),
        "{err}"
    );
    assert!(
        !err.contains("lab-1: aperture-devices: running"),
        "the node stops at its failed step"
    );

    fault(&tb, 1, "fail", "dkms", None);
    let before = calls(&tb, 1).len();
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "tcpxo"]);
    assert!(ok, "{err}");
    assert!(err.contains("lab-1: apt-repos: done already"), "{err}");
    assert!(err.contains("lab-1: import-helper: running"), "{err}");
    let new = calls(&tb, 1)[before..].to_vec();
    assert!(
        !new.iter().any(|c| c.starts_with("apt-get install -y docker-ce")),
        "{new:?}"
    );
    assert!(
        !new.iter()
            .any(|c| c.starts_with("apt-get install -y apt-transport-artifact-registry")),
        "{new:?}"
    );

    // A node that dies mid-step (its sshd and everything it ran killed) is reported
    // with the step it was in; the half-built nccl-tests never reach /opt, and the next
    // run builds them afresh without redoing the rest.
    let r = root(&tb, 0);
    std::fs::remove_dir_all(r.join("opt/nccl-tests")).unwrap();
    fault(&tb, 0, "sleep", "make", Some("30"));
    let seen = calls(&tb, 0).len();
    let child = support::spawn_flightdeck(
        home.path(),
        &["fleet", "bootstrap", "lab", "--flavour", "tcpxo", "--nodes", "0"],
    );
    let start = Instant::now();
    while !calls(&tb, 0)[seen..].iter().any(|c| c.starts_with("make -C")) {
        assert!(start.elapsed() < Duration::from_secs(30), "make never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    tb.kill_sshd(0);
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(killed_in_step(&err, "nccl-tests"), "{err}");
    assert!(
        !r.join("opt/nccl-tests").exists(),
        "a cut-short build reached /opt"
    );
    remove_killed_tmpdirs(&tb, 0, seen);
    fault(&tb, 0, "sleep", "make", None);
    tb.start_sshd(0);
    let before = calls(&tb, 0).len();
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "tcpxo", "--nodes", "lab-0"]);
    assert!(ok, "{err}");
    assert_eq!(err.matches("lab-0: nccl-tests: running").count(), 1, "{err}");
    assert_eq!(err.matches(": done already").count(), 8, "{err}");
    let new = calls(&tb, 0)[before..].to_vec();
    assert!(
        new.iter()
            .any(|c| c.starts_with("git clone --quiet https://github.com/NVIDIA/nccl-tests.git /tmp/tmp.")),
        "cloned afresh: {new:?}"
    );
    assert!(r.join("opt/nccl-tests/build/all_gather_perf").exists());
}

#[test]
fn tcpx_on_cos_and_rdma_bootstrap_and_what_their_preflights_see() {
    let Some(tb) = Testbed::new_machines(1, 4) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "tcpx"]);
    assert!(ok, "{err}");
    let c = calls(&tb, 0);
    let order = [
        "cos-extensions install gpu -- --version=latest",
        "docker pull --quiet us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12",
        "docker run --detach --name receive-datapath-manager",
        "iptables -I INPUT -i eth1 -p tcp -j ACCEPT",
        "docker pull --quiet us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9-2.19.4-12.0",
        "docker run --rm -v /var/lib:/var/lib us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev@sha256:",
    ];
    let at: Vec<usize> = order.iter().map(|p| position(&c, p)).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{}", c.join("\n"));
    let rxdm = &c[at[2]];
    assert!(
        rxdm.ends_with(
            "--gpu_nic_preset a3vm --gpu_shmem_type fd --uds_path /run/tcpx --setup_param --verbose 128 2 0"
        ) && rxdm.contains(" us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev@sha256:"),
        "{rxdm}"
    );
    let r = root(&tb, 0);
    for lib in ["libnccl-net.so", "libnccl.so.2"] {
        assert_loadable(&r.join("var/lib/tcpx/lib64").join(lib));
    }
    // The exec remounts are real mounts in the node's namespace: the checks read them
    // from /proc/mounts, so a second run finds them done.
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "tcpx"]);
    assert!(ok, "{err}");
    assert!(err.contains("lab-0: nvidia-exec: done already"), "{err}");
    assert!(err.contains("lab-0: tcpx-exec: done already"), "{err}");
    assert!(err.contains("lab-0: nccl-tests: done already"), "{err}");
    // On COS (its os-release), with COS's NIC names (eth0, eth1..eth4) at the data MTU:
    // the pre-flight passes.
    support::testbed::a3_high_nics(&tb, 0);
    let (_, err) = nccl_run(home.path(), "tcpx", &[]);
    assert!(
        err.contains("pre-flight: GPUDirect-tcpx pieces on 1 node"),
        "{err}"
    );
    assert!(!err.contains("pre-flight for"), "{err}");
    // The loader's check ran in the run's container (its Ubuntu userland loads the
    // plugin, not COS's: gpudirect review N4), where the plugin is mounted at
    // /usr/local/tcpx/lib64.
    assert!(
        calls(&tb, 0)
            .iter()
            .any(|l| l.starts_with("container ") && l.contains("argv=/usr/bin/env bash -s")),
        "{:?}",
        calls(&tb, 0)
    );
    let plugin = r.join("var/lib/tcpx/lib64/libnccl-net.so");
    let kept = std::fs::read(&plugin).unwrap();
    std::fs::remove_file(&plugin).unwrap();
    let (code, err) = nccl_run(home.path(), "tcpx", &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("loader libnccl-net.so: not found by the loader (LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/tcpx/lib64"),
        "the container's path: {err}"
    );
    std::fs::write(&plugin, kept).unwrap();
    // Back to this machine's os-release (Ubuntu's stand-in) for the RDMA part.
    std::fs::write(
        r.join("etc/os-release"),
        std::fs::read_to_string("/etc/os-release").unwrap(),
    )
    .unwrap();

    // RDMA: gIB from Google's apt repository, the linker and memlock set up.
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "rdma"]);
    assert!(ok, "{err}");
    let c = calls(&tb, 0);
    let order = [
        "curl -fsSL --retry 3 -o /tmp/tmp.",
        "apt-get install -y apt-transport-artifact-registry",
        "apt-get install -y nccl-gib ibverbs-utils",
        "apt-mark hold nccl-gib",
        "ldconfig",
    ];
    let at: Vec<usize> = order.iter().map(|p| position(&c, p)).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{}", c.join("\n"));
    assert_eq!(
        std::fs::read_to_string(r.join("etc/ld.so.conf.d/000_nccl-gib.conf")).unwrap(),
        "/usr/local/gib/lib64\n"
    );
    assert!(
        std::fs::read_to_string(r.join("etc/security/limits.d/99-unlimited.conf"))
            .unwrap()
            .starts_with("* - memlock unlimited\n")
    );
    assert!(
        std::fs::read_to_string(r.join("etc/apt/sources.list.d/gpudirect-gib.list"))
            .unwrap()
            .contains("deb [signed-by=/etc/apt/keyrings/artifact-registry.gpg] ar+https://us-apt.pkg.dev/projects/gce-ai-infra gpudirect-gib-apt main")
    );
    assert_eq!(
        std::fs::read_to_string(r.join("usr/local/gib/scripts/set_nccl_env.sh")).unwrap(),
        include_str!("fixtures/reference/stand-in/set_nccl_env.sh")
    );
    assert_loadable(&r.join("usr/local/gib/lib64/libnccl-net.so"));
    assert_eq!(
        std::fs::read_to_string(r.join("etc/profile.d/nccl-gib.sh")).unwrap(),
        format!("{}\n", steps::gib_login_profile())
    );
    // gIB is there now, so NCCL_NET=gIB may be set; this node has no MRDMA NICs and
    // not the A3 Ultra's NIC names, and the pre-flight says exactly that.
    let (code, err) = nccl_run(home.path(), "rdma", &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(!err.contains("libnccl-net.so: missing"), "{err}");
    assert!(err.contains("lab-0: interface enp0s19: missing"), "{err}");
    assert!(
        err.contains("lab-0: rdma: no RDMA devices in /sys/class/infiniband"),
        "{err}"
    );
}

#[test]
fn show_prints_the_exact_script_and_it_is_valid_bash() {
    let home = tempfile::tempdir().unwrap();
    for f in ["tcpx", "tcpxo", "rdma"] {
        let out = flightdeck(home.path(), &["fleet", "bootstrap", "--show", f]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let script = text(&out.stdout);
        assert!(
            script.starts_with("#!/usr/bin/env bash\n# flightdeck GPUDirect bootstrap: "),
            "{script}"
        );
        assert!(script.contains("# source: "), "{script}");
        let check = std::process::Command::new("bash")
            .args(["-n", "-c", &script])
            .output()
            .unwrap();
        assert!(check.status.success(), "{f}: {}", text(&check.stderr));
    }
    let out = flightdeck(home.path(), &["fleet", "bootstrap", "--show", "nvlink"]);
    assert_eq!(out.status.code(), Some(2));
    let out = flightdeck(home.path(), &["fleet", "bootstrap", "nosuch"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no fleet `nosuch`"),
        "{}",
        text(&out.stderr)
    );
}

/// Hostile review D10 and D11, read from the scripts as `--show` prints them: nothing
/// downloaded to a fixed name in /tmp, nothing piped to a shell (no get.docker.com),
/// every repository signed-by a keyring and none trusted=yes, no `:latest` and no
/// `--pull=always`, nccl-tests at a commit, the TCPX firewall on the data NICs only.
#[test]
fn the_scripts_fetch_nothing_unpinned_unsigned_or_to_a_fixed_name() {
    let home = tempfile::tempdir().unwrap();
    for f in ["tcpx", "tcpxo", "rdma"] {
        let out = flightdeck(home.path(), &["fleet", "bootstrap", "--show", f]);
        let script = text(&out.stdout);
        for bad in [
            "/tmp/",
            "| sh",
            "get.docker.com",
            ":latest",
            "--pull=always",
            "git clone --depth 1",
            "-o /etc/apt/trusted.gpg.d",
            "iptables -I INPUT -p tcp -m tcp -j ACCEPT",
        ] {
            assert!(!script.contains(bad), "{f}: {bad}");
        }
        for l in script.lines().filter(|l| l.contains("deb ") && l.contains("://")) {
            assert!(
                l.contains("signed-by=/etc/apt/keyrings/") && !l.contains("trusted=yes"),
                "{f}: {l}"
            );
        }
        if f != "tcpx" {
            assert!(
                script.contains(&format!("checkout --quiet --detach {}", steps::NCCL_TESTS_COMMIT)),
                "{f}"
            );
        }
    }
}

/// Hostile review D11 (keys) and the GPUDirect review's D4: a key file that lacks the
/// expected key stops the step, naming the URL and the fingerprint, and leaves no
/// keyring; once the right key is served the step finishes and replaces what an earlier
/// bootstrap wrote (an unsigned repository, a key trusted for every repository).
#[test]
fn a_wrong_apt_key_stops_the_step_naming_the_url_and_the_fingerprint() {
    let Some(tb) = Testbed::new_machines(1, 0) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    let r = root(&tb, 0);
    // What today's code wrote on an earlier bootstrap.
    std::fs::create_dir_all(r.join("etc/apt/trusted.gpg.d")).unwrap();
    std::fs::write(
        r.join("etc/apt/trusted.gpg.d/artifact-registry.gpg"),
        "KEY 35BAA0B33E9EB396F59CA838C0BA5CE6DC6315A3\n",
    )
    .unwrap();
    std::fs::write(
        r.join("etc/apt/sources.list.d/gpudirect-gib.list"),
        "deb ar+https://us-apt.pkg.dev/projects/gce-ai-infra gpudirect-gib-apt main\n",
    )
    .unwrap();
    fault(
        &tb,
        0,
        "wrongkey",
        "curl",
        Some("us-apt.pkg.dev/doc/repo-signing-key.gpg"),
    );
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "rdma"]);
    assert!(!ok, "{err}");
    assert!(err.contains("lab-0: step apt-repos failed (exit 1)"), "{err}");
    assert!(
        err.contains("flightdeck: the key file at https://us-apt.pkg.dev/doc/repo-signing-key.gpg lacks the expected key 35BAA0B33E9EB396F59CA838C0BA5CE6DC6315A3 (it holds: DEADBEEFDEADBEEFDEADBEEFDEADBEEFDEADBEEF)"),
        "{err}"
    );
    assert!(!r.join("etc/apt/keyrings/artifact-registry.gpg").exists());
    assert!(
        !calls(&tb, 0).iter().any(|c| c.starts_with("apt-get install")),
        "nothing installed"
    );
    assert_downloads_private(&calls(&tb, 0));

    // The same wrong key for Docker's repository stops TCPXO's first step.
    fault(&tb, 0, "wrongkey", "curl", Some("download.docker.com"));
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "tcpxo"]);
    assert!(!ok, "{err}");
    assert!(
        err.contains("lab-0: step docker failed (exit 1)")
            && err.contains("the key file at https://download.docker.com/linux/ubuntu/gpg lacks the expected key 9DC858229FC7DD38854AE2D88D81803C0EBFCD88"),
        "{err}"
    );
    assert!(!r.join("etc/apt/sources.list.d/docker.list").exists());

    fault(&tb, 0, "wrongkey", "curl", None);
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "rdma"]);
    assert!(ok, "{err}");
    assert!(!r.join("etc/apt/trusted.gpg.d/artifact-registry.gpg").exists());
    assert_eq!(
        keyring(&r, "artifact-registry"),
        ["35BAA0B33E9EB396F59CA838C0BA5CE6DC6315A3"]
    );
    assert_eq!(assert_sources_signed(&r), 3);
    // An unsigned line is refused by apt (the double as the real one): it is gone.
    assert!(
        std::fs::read_to_string(r.join("etc/apt/sources.list.d/gpudirect-gib.list"))
            .unwrap()
            .starts_with("deb [signed-by=/etc/apt/keyrings/artifact-registry.gpg] ar+https://")
    );
}

/// Hostile review D11 (images) and the GPUDirect review's D18: images by a pinned tag,
/// run by the digest recorded at their first pull; an image whose tag brings another
/// digest later is refused, naming it, both digests and how to accept it.
#[test]
fn images_are_pinned_by_digest_at_the_first_pull_and_a_changed_digest_is_refused() {
    let Some(tb) = Testbed::new_machines(1, 4) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "tcpx"]);
    assert!(ok, "{err}");
    let r = root(&tb, 0);
    let first = digests(&r);
    assert_eq!(
        first.iter().map(|(i, _)| i.as_str()).collect::<Vec<_>>(),
        [steps::TCPX_RXDM_IMAGE, steps::TCPX_PLUGIN_IMAGE]
    );
    let c = calls(&tb, 0);
    for (image, digest) in &first {
        let repo = image.rsplit_once(':').unwrap().0;
        assert!(
            digest.starts_with(&format!("{repo}@sha256:")) && digest.len() == repo.len() + 72,
            "{digest}"
        );
        assert!(
            c.iter()
                .any(|l| l.starts_with("docker run") && l.contains(digest.as_str())),
            "{digest}"
        );
    }
    assert!(!c.iter().any(|l| l.contains("--pull")), "{c:?}");

    // The registry's tags move; the RxDM container is gone (a reboot): the step pulls
    // again and refuses what it got.
    fault(&tb, 0, "digest", "docker", Some("moved"));
    std::fs::remove_file(r.join("var/lib/fd-shim/containers/receive-datapath-manager")).unwrap();
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "tcpx"]);
    assert!(!ok, "{err}");
    assert!(err.contains("lab-0: step rxdm failed (exit 1)"), "{err}");
    let (image, recorded) = &first[0];
    let now = err
        .split(", now ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        err.contains(&format!(
            "flightdeck: refused {image}: its digest changed since this node first pulled it (recorded {recorded}, now {now}). To accept the new image, delete its line from /var/lib/flightdeck/images.digests and bootstrap again."
        )) && now != recorded,
        "{err}"
    );
    assert_eq!(digests(&r), first, "the record stays");
    assert!(!r
        .join("var/lib/fd-shim/containers/receive-datapath-manager")
        .exists());
    // The tag on the node points at the recorded image again.
    let tag = r
        .join("var/lib/fd-shim/images")
        .join(image.replace(['/', ':'], "_"));
    assert_eq!(std::fs::read_to_string(tag).unwrap().trim(), recorded);

    // Accepting it: the line deleted, the next bootstrap records the new digest.
    let file = r.join("var/lib/flightdeck/images.digests");
    let kept: String = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with(&format!("{image} ")))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&file, kept).unwrap();
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "tcpx"]);
    assert!(ok, "{err}");
    let after = digests(&r);
    assert_eq!(after[0], first[1], "the plugin's record is untouched");
    assert_eq!(after[1], (image.clone(), now.to_string()));
}

/// Hostile review D14 and D11 (nccl-tests): nccl-tests at the pinned commit, cloned,
/// checked and built by nobody in a private directory; a clone or a build cut short
/// leaves nothing in /opt/nccl-tests, and the next bootstrap succeeds; a checkout that
/// is not the commit is refused.
#[test]
fn nccl_tests_are_built_at_the_pinned_commit_by_nobody_and_a_cut_short_build_leaves_nothing() {
    let Some(mut tb) = Testbed::new_machines(1, 0) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    let r = root(&tb, 0);
    for (cmd, call) in [("git", "git clone"), ("make", "make -C")] {
        fault(&tb, 0, "sleep", cmd, Some("30"));
        let seen = calls(&tb, 0).len();
        let child =
            support::spawn_flightdeck(home.path(), &["fleet", "bootstrap", "lab", "--flavour", "rdma"]);
        let start = Instant::now();
        while !calls(&tb, 0)[seen..].iter().any(|c| c.starts_with(call)) {
            assert!(start.elapsed() < Duration::from_secs(60), "{call} never started");
            std::thread::sleep(Duration::from_millis(50));
        }
        tb.kill_sshd(0);
        let out = child.wait_with_output().unwrap();
        let err = text(&out.stderr);
        assert!(killed_in_step(&err, "nccl-tests"), "{cmd}: {err}");
        assert!(
            !r.join("opt/nccl-tests").exists(),
            "{cmd} cut short, yet /opt/nccl-tests"
        );
        remove_killed_tmpdirs(&tb, 0, seen);
        fault(&tb, 0, "sleep", cmd, None);
        tb.start_sshd(0);
    }
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "rdma"]);
    assert!(ok, "{err}");
    assert!(err.contains("lab-0: nccl-tests: done"), "{err}");
    let commit = steps::NCCL_TESTS_COMMIT;
    assert_eq!(
        std::fs::read_to_string(r.join("opt/nccl-tests/.flightdeck-commit")).unwrap(),
        format!("{commit}\n")
    );
    let c = calls(&tb, 0);
    assert!(
        c.iter().any(|l| l.starts_with("git -C /tmp/tmp.")
            && l.ends_with(&format!("/nccl-tests checkout --quiet --detach {commit}"))),
        "{c:?}"
    );
    // git and make ran as nobody; what landed in /opt is root's.
    let u = uids(&tb, 0);
    for call in ["git clone", "git -C", "make -C"] {
        let ran: Vec<&String> = u
            .iter()
            .filter(|l| l.split_once(' ').unwrap().1.starts_with(call))
            .collect();
        assert!(
            !ran.is_empty() && ran.iter().all(|l| l.starts_with("65534 ")),
            "{call}: {ran:?}"
        );
    }
    for p in [
        "opt/nccl-tests",
        "opt/nccl-tests/build",
        "opt/nccl-tests/build/all_reduce_perf",
    ] {
        assert_eq!(std::fs::metadata(r.join(p)).unwrap().uid(), 0, "{p}");
    }
    assert!(!r.join("opt/nccl-tests.partial").exists());

    // A clone whose HEAD is not the commit is refused, and nothing replaces /opt.
    std::fs::remove_dir_all(r.join("opt/nccl-tests")).unwrap();
    fault(
        &tb,
        0,
        "githead",
        "git",
        Some("2222222222222222222222222222222222222222"),
    );
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "rdma"]);
    assert!(!ok, "{err}");
    assert!(
        err.contains(&format!(
            "flightdeck: nccl-tests: HEAD is 2222222222222222222222222222222222222222 after checking out {commit}: refused"
        )),
        "{err}"
    );
    assert!(!r.join("opt/nccl-tests").exists());
}

/// Hostile review D11 (firewall): on COS, TCP is accepted on the data NICs eth1..eth4
/// only, each rule checked; the rule that opened every port on every NIC (dstack's and
/// SkyPilot's, an earlier bootstrap's) is removed.
#[test]
fn the_tcpx_firewall_opens_tcp_on_the_data_nics_only() {
    let Some(tb) = Testbed::new_machines(1, 4) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    let rules = root(&tb, 0).join("var/lib/fd-shim/iptables.rules");
    std::fs::write(&rules, "INPUT -p tcp -m tcp -j ACCEPT\n").unwrap();
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "tcpx"]);
    assert!(ok, "{err}");
    let mut have: Vec<String> = std::fs::read_to_string(&rules)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    have.sort();
    let mut want: Vec<String> = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
        .iter()
        .map(|s| format!("INPUT -i eth0 -s {s} -p tcp -j ACCEPT"))
        .chain((1..=4).map(|k| format!("INPUT -i eth{k} -p tcp -j ACCEPT")))
        .collect();
    want.sort();
    assert_eq!(have, want, "the data NICs, and eth0 from private addresses only");
    let c = calls(&tb, 0);
    for k in 1..=4 {
        position(&c, &format!("iptables -C INPUT -i eth{k} -p tcp -j ACCEPT"));
    }
    position(&c, "iptables -D INPUT -p tcp -m tcp -j ACCEPT");
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "tcpx"]);
    assert!(ok && err.contains("lab-0: firewall: done already"), "{err}");
    // One rule gone (a flushed table): the step puts it back.
    std::fs::write(&rules, "INPUT -i eth1 -p tcp -j ACCEPT\n").unwrap();
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "tcpx"]);
    assert!(ok && err.contains("lab-0: firewall: done"), "{err}");
    assert_eq!(std::fs::read_to_string(&rules).unwrap().lines().count(), 7);
}

/// On a Container-Optimized OS node (its /etc/os-release says so) there is nothing but
/// docker: `nccl run` and `job run` run their work in the TCPX container with the mounts,
/// devices and NCCL variables of SkyPilot's TCPX options, by themselves. The docker shim
/// runs the container's command here (the nccl-tests double, the job's commands), with
/// only the environment docker would give the container.
#[test]
fn on_cos_nodes_runs_and_jobs_go_into_the_tcpx_container() {
    let Some(tb) = Testbed::new_machines(1, 4) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    support::testbed::mark_cos(&tb, 0);
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "tcpx"]);
    assert!(ok, "{err}");
    support::testbed::a3_high_nics(&tb, 0);
    let doubles = tb.dir.path().join("nccl-tests");
    support::nccl_double::install(&doubles, "0");
    let out = flightdeck(
        home.path(),
        &[
            "nccl",
            "run",
            "lab",
            "--profile",
            "tcpx",
            "-g",
            "2",
            "--nccl-tests-dir",
            doubles.to_str().unwrap(),
            "--machine-type",
            "2xH200",
            "--json",
        ],
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["peak_busbw"], 347.71, "the double's rows came back: {doc}");
    let c = calls(&tb, 0);
    let run = c
        .iter()
        .find(|l| l.starts_with("docker run --rm --name fd-"))
        .unwrap_or_else(|| panic!("{}", c.join("\n")));
    for piece in [
        "--network=host",
        "--volume /var/lib/tcpx/lib64:/usr/local/tcpx/lib64",
        "--volume /run/tcpx:/run/tcpx",
        "--device /dev/nvidia0:/dev/nvidia0",
        "--env NCCL_GPUDIRECTTCPX_SOCKET_IFNAME",
        "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx",
        "all_reduce_perf -b 8 -e 8589934592 -f 2 -g 2",
    ] {
        assert!(run.contains(piece), "{piece}: {run}");
    }
    // (The pre-flight's loader check ran in a container of its own before it.)
    let inside = c
        .iter()
        .find(|l| l.starts_with("container ") && l.contains("all_reduce_perf"))
        .unwrap();
    assert!(
        inside.contains("NCCL_NET=GPUDirectTCPX_v7 NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=eth1,eth2,eth3,eth4 LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/tcpx/lib64 "),
        "{inside}"
    );
    // The container's environment is what the run passed, nothing of the SSH session.
    let envs: Vec<String> = (1..10)
        .filter_map(|n| {
            std::fs::read_to_string(root(&tb, 0).join(format!("var/lib/fd-shim/container-env.{n}.log"))).ok()
        })
        .collect();
    let env = envs
        .iter()
        .find(|e| e.lines().any(|l| l == "NCCL_NET=GPUDirectTCPX_v7"))
        .unwrap_or_else(|| panic!("no container had the run's NCCL_NET: {envs:?}"));
    for leak in ["SSH_CONNECTION=", "SSH_CLIENT=", "USER=", "SHELL="] {
        assert!(!env.lines().any(|l| l.starts_with(leak)), "{leak} leaked: {env}");
    }

    // A job on COS needs an image: without one it stops, saying so.
    let write_job = |extra: &str| {
        let file = home.path().join("job.yaml");
        std::fs::write(
            &file,
            format!(
                "type: task\nname: cosjob\nfleet: lab\n{extra}commands:\n  - echo \"rank $NODE_RANK net $NCCL_NET in $(pwd)\"\n"
            ),
        )
        .unwrap();
        file
    };
    let file = write_job("");
    let out = flightdeck(
        home.path(),
        &["job", "run", file.to_str().unwrap(), "--no-preflight"],
    );
    assert!(!out.status.success());
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(all.contains("give the job an image:"), "{all}");
    let file = write_job("image: nvcr.io/nvidia/pytorch:24.04-py3\nnccl_profile: tcpx\n");
    let out = flightdeck(home.path(), &["job", "run", file.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("rank 0 net GPUDirectTCPX_v7 in "), "{stdout}");
    assert!(calls(&tb, 0)
        .iter()
        .any(|l| l.starts_with("container nvcr.io/nvidia/pytorch:24.04-py3: NCCL_NET=GPUDirectTCPX_v7")));
}

/// The fault matrix's "SIGKILL of flightdeck mid-bootstrap, then the same command again":
/// the operator's flightdeck dies while a node builds nccl-tests; the next run finishes
/// that step and redoes nothing before it.
#[test]
fn flightdeck_killed_mid_bootstrap_then_run_again_finishes() {
    let Some(tb) = Testbed::new_machines(1, 0) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    fault(&tb, 0, "sleep", "make", Some("5"));
    let mut child =
        support::spawn_flightdeck(home.path(), &["fleet", "bootstrap", "lab", "--flavour", "rdma"]);
    let start = Instant::now();
    while !calls(&tb, 0).iter().any(|c| c.starts_with("make -C")) {
        assert!(start.elapsed() < Duration::from_secs(30), "make never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    fault(&tb, 0, "sleep", "make", None);
    // The node's script may go on without its flightdeck (a session without a terminal
    // is not hung up): the next run waits for it (one bootstrap at a time per node), then
    // finds its steps done.
    let before = calls(&tb, 0).len();
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "rdma"]);
    assert!(ok, "{err}");
    for step in ["apt-repos", "nccl-gib", "ld-so-conf", "memlock", "nccl-env"] {
        assert!(
            err.contains(&format!("lab-0: {step}: done already")),
            "{step}: {err}"
        );
    }
    assert!(err.contains("lab-0: nccl-tests: done"), "{err}");
    let new = calls(&tb, 0)[before..].to_vec();
    assert!(
        !new.iter().any(|c| c.starts_with("apt-get install -y nccl-gib")),
        "{new:?}"
    );
}
