//! The GPUDirect bootstrap run for real on testbed nodes (sshd in network namespaces,
//! each node a machine of its own: tests/support/testbed.rs `new_machines`), through the
//! bastion, with the pieces that reach outside (Google's apt repositories, container
//! pulls, COS's GPU extension, modprobe, udev, iptables) replaced by the recording shims
//! of tests/support/bootstrap_shims.sh. Mounts are real. Needs root, like the testbed.

mod support;

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

/// Make node `i`'s shim for `command` fail with `code` (`kind` fail) or sleep (`sleep`).
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
    for i in 0..2 {
        let c = calls(&tb, i);
        // The references' order: docker, the container toolkit, the repositories, the
        // dmabuf helper, the udev rule, the plugin, the RxDM, nccl-tests.
        let order = [
            "curl -fsSL https://get.docker.com",
            "apt-get install -y nvidia-container-toolkit",
            "apt-get install -y apt-transport-artifact-registry dkms",
            "dkms install -m dmabuf-import-helper -v 1.1",
            "modprobe import-helper",
            "udevadm trigger --subsystem-match=pci --action=add",
            "docker run --rm --name nccl-installer --network=host -v /var/lib:/var/lib us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.17 install --install-nccl",
            "docker run --detach --pull=always --restart=unless-stopped --name receive-datapath-manager",
            "make -C /opt/nccl-tests",
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
        let profile = std::fs::read_to_string(r.join("var/lib/tcpxo/lib64/nccl-env-profile.sh")).unwrap();
        assert!(profile.ends_with(
            "export NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY=/dev/aperture_devices\nexport LD_LIBRARY_PATH=/var/lib/tcpxo/lib64:${LD_LIBRARY_PATH}\n"
        ));
        assert!(r.join("opt/nccl-tests/build/all_reduce_perf").exists());
    }

    // A second run does nothing: every step is done already, nothing is installed.
    let before: Vec<usize> = (0..2).map(|i| calls(&tb, i).len()).collect();
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "tcpxo", "--nodes", "0-1"]);
    assert!(ok, "{err}");
    assert_eq!(err.matches(": done already").count(), 16, "{err}");
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
            "lab-1: interface enp7s0: mtu 1500, expected 8244; fix: create the data VPCs with MTU 8244"
        ),
        "{err}"
    );
    assert!(err.contains("lab-1: interface enp13s0: down"), "{err}");
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
        !new.iter()
            .any(|c| c.starts_with("curl -fsSL https://get.docker.com")),
        "{new:?}"
    );
    assert!(
        !new.iter()
            .any(|c| c.starts_with("apt-get install -y apt-transport-artifact-registry")),
        "{new:?}"
    );

    // A node that dies mid-step (its sshd and everything it ran killed) is reported
    // with the step it was in; the next run finishes it without redoing the rest.
    let r = root(&tb, 0);
    std::fs::remove_dir_all(r.join("opt/nccl-tests/build")).unwrap();
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
    assert!(err.contains("lab-0: step nccl-tests failed (exit 255)"), "{err}");
    fault(&tb, 0, "sleep", "make", None);
    tb.start_sshd(0);
    let before = calls(&tb, 0).len();
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "tcpxo", "--nodes", "lab-0"]);
    assert!(ok, "{err}");
    assert_eq!(err.matches("lab-0: nccl-tests: running").count(), 1, "{err}");
    let new = calls(&tb, 0)[before..].to_vec();
    assert!(
        !new.iter().any(|c| c.starts_with("git clone")),
        "the clone was kept: {new:?}"
    );
    assert!(
        new.iter().any(|c| c.starts_with("make -C /opt/nccl-tests")),
        "{new:?}"
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
        "docker run --detach --pull=always --name receive-datapath-manager",
        "iptables -I INPUT -p tcp -m tcp -j ACCEPT",
        "docker run --rm -v /var/lib:/var/lib us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx install --install-nccl",
        "docker pull us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx",
    ];
    let at: Vec<usize> = order.iter().map(|p| position(&c, p)).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{}", c.join("\n"));
    let rxdm = &c[at[1]];
    assert!(
        rxdm.ends_with(
            "--gpu_nic_preset a3vm --gpu_shmem_type fd --uds_path /run/tcpx --setup_param --verbose 128 2 0"
        ),
        "{rxdm}"
    );
    // The exec remounts are real mounts in the node's namespace: the checks read them
    // from /proc/mounts, so a second run finds them done.
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "tcpx"]);
    assert!(ok, "{err}");
    assert!(err.contains("lab-0: nvidia-exec: done already"), "{err}");
    assert!(err.contains("lab-0: tcpx-exec: done already"), "{err}");
    // COS's NIC names (eth0, eth1..eth4) with the data MTU: the pre-flight passes.
    support::testbed::a3_high_nics(&tb, 0);
    let (_, err) = nccl_run(home.path(), "tcpx", &[]);
    assert!(
        err.contains("pre-flight: GPUDirect-tcpx pieces on 1 node"),
        "{err}"
    );
    assert!(!err.contains("pre-flight for"), "{err}");

    // RDMA: gIB from Google's apt repository, the linker and memlock set up.
    let (ok, err) = bootstrap(home.path(), &["lab", "--flavour", "rdma"]);
    assert!(ok, "{err}");
    let c = calls(&tb, 0);
    let order = [
        "curl -fsSL https://us-apt.pkg.dev/doc/repo-signing-key.gpg",
        "apt-get install -y apt-transport-artifact-registry",
        "apt-get install -y nccl-gib ibverbs-utils",
        "apt-mark hold nccl-gib",
        "ldconfig",
    ];
    let at: Vec<usize> = order.iter().map(|p| position(&c, p)).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{}", c.join("\n"));
    let r = root(&tb, 0);
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
            .contains("deb ar+https://us-apt.pkg.dev/projects/gce-ai-infra gpudirect-gib-apt main")
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
fn show_prints_the_exact_script_and_it_is_valid_sh() {
    let home = tempfile::tempdir().unwrap();
    for f in ["tcpx", "tcpxo", "rdma"] {
        let out = flightdeck(home.path(), &["fleet", "bootstrap", "--show", f]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let script = text(&out.stdout);
        assert!(
            script.starts_with("#!/bin/sh\n# flightdeck GPUDirect bootstrap: "),
            "{script}"
        );
        assert!(script.contains("# source: "), "{script}");
        let check = std::process::Command::new("sh")
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

/// On a Container-Optimized OS node (its /etc/os-release says so) there is nothing but
/// docker: `nccl run` and `job run` run their work in the TCPX container with the mounts,
/// devices and NCCL variables of SkyPilot's TCPX options, by themselves. The docker shim
/// runs the container's command here (the nccl-tests double, the job's commands).
#[test]
fn on_cos_nodes_runs_and_jobs_go_into_the_tcpx_container() {
    let Some(tb) = Testbed::new_machines(1, 4) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    // (Debian's /etc/os-release is a link into /usr/lib, which the node shares.)
    let _ = std::fs::remove_file(root(&tb, 0).join("etc/os-release"));
    std::fs::write(
        root(&tb, 0).join("etc/os-release"),
        "NAME=\"Container-Optimized OS\"\nID=cos\nVERSION_ID=105\n",
    )
    .unwrap();
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
    let inside = c.iter().find(|l| l.starts_with("container ")).unwrap();
    assert!(
        inside.contains("NCCL_NET=GPUDirectTCPX_v7 NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=eth1,eth2,eth3,eth4 LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/tcpx/lib64:"),
        "{inside}"
    );

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
