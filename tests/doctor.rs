//! The doctor on the testbed (sshd in network namespaces, each node a machine of its own
//! with the nvidia-smi double replaying outputs recorded on 2x H200), through the
//! bastion: a healthy fleet has no failure; planted faults are each named, on their node,
//! within 60 s. Needs root, like the testbed.
//!
//! Delay and loss are planted with `tc netem` where the kernel has it. This machine's
//! kernel is built without netem (CONFIG_NET_SCH_NETEM is off), so there the delay is a
//! tbf rate limit on the NIC (a throttled NIC: its packets queue) and the loss an
//! nftables rule dropping 2% of the NIC's outgoing probes.

mod support;

use serde_json::Value;
use std::time::{Duration, Instant};
use support::testbed::Testbed;
use support::{flightdeck, text};

/// The tests whose verdicts rest on probe loss hold this and run one at a time: testbeds
/// side by side on a 2-core machine drop packets of their own (BENCHMARKS.md, the doctor),
/// which would make a planted fault's figures depend on what else runs.
static PROBING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn doctor(home: &std::path::Path, extra: &[&str]) -> (Option<i32>, Value, String, Duration) {
    let mut args = vec!["doctor", "lab", "--json"];
    args.extend_from_slice(extra);
    let t = Instant::now();
    let out = flightdeck(home, &args);
    let took = t.elapsed();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)));
    (out.status.code(), v, text(&out.stderr), took)
}

/// (node, check, outcome, what) of every finding worse than a pass or skip.
fn problems(v: &Value) -> Vec<(String, String, String, String)> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["outcome"] == "fail" || f["outcome"] == "warn")
        .map(|f| {
            (
                f["node"].as_str().unwrap_or("fleet").to_string(),
                f["check"].as_str().unwrap().to_string(),
                f["outcome"].as_str().unwrap().to_string(),
                f["what"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn find<'a>(
    p: &'a [(String, String, String, String)],
    node: &str,
    check: &str,
    has: &str,
) -> &'a (String, String, String, String) {
    p.iter()
        .find(|(n, c, _, w)| n == node && c == check && w.contains(has))
        .unwrap_or_else(|| panic!("no {check} on {node} with `{has}` among {p:#?}"))
}

/// Delay on node `i`'s NIC: netem's 5 ms, else a tbf rate limit under what the probes
/// send through the NIC (its own pings and its replies to its 3 peers', each some 60
/// probes of 98 bytes a second: about 560 kbit/s), with a short queue: some 50 ms of
/// delay, and drops past it (slow, or lossy and slow). The queue must stay short on
/// this testbed: the kernel's echo replies are sent from one ICMP socket per CPU shared
/// by every namespace (net/ipv4/icmp.c), so a long one (`latency 2s`) held enough of
/// the node's replies to fill that socket's send buffer, and every node's replies were
/// dropped with it (`IcmpOutErrors`; 10–20% loss between healthy nodes).
fn plant_delay(tb: &Testbed, i: usize, nic: &str) -> &'static str {
    if tb
        .node_run(
            i,
            &["tc", "qdisc", "add", "dev", nic, "root", "netem", "delay", "5ms"],
        )
        .is_ok()
    {
        return "netem delay 5ms";
    }
    tb.node_run(
        i,
        &[
            "tc", "qdisc", "add", "dev", nic, "root", "tbf", "rate", "400kbit", "burst", "1540", "latency",
            "50ms",
        ],
    )
    .unwrap();
    "tbf rate 400kbit"
}

/// 2% loss on node `i`'s NIC: netem's, else an nftables drop of 2% of its echo requests
/// and replies.
fn plant_loss(tb: &Testbed, i: usize, nic: &str) -> &'static str {
    if tb
        .node_run(
            i,
            &["tc", "qdisc", "add", "dev", nic, "root", "netem", "loss", "2%"],
        )
        .is_ok()
    {
        return "netem loss 2%";
    }
    tb.node_run(i, &["nft", "add", "table", "inet", "fdloss"])
        .unwrap();
    tb.node_run(
        i,
        &[
            "nft",
            "add",
            "chain",
            "inet",
            "fdloss",
            "out",
            "{ type filter hook output priority 0; }",
        ],
    )
    .unwrap();
    let rule = format!("oifname \"{nic}\" meta l4proto icmp numgen random mod 1000 < 20 drop");
    tb.node_run(i, &["nft", "add", "rule", "inet", "fdloss", "out", &rule])
        .unwrap();
    "nftables drop 2%"
}

#[test]
fn a_healthy_fleet_passes_and_every_planted_fault_is_named() {
    let _probing = PROBING.lock().unwrap_or_else(|p| p.into_inner());
    let Some(tb) = Testbed::new_machines(4, 2) else {
        return;
    };
    for n in &tb.nodes {
        n.add_gpu_double();
    }
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");

    // Healthy: no failure, every node's GPUs read from the recording.
    let (code, v, err, took) = doctor(home.path(), &[]);
    let p = problems(&v);
    assert!(
        p.iter().all(|(_, _, o, _)| o != "fail"),
        "a healthy fleet has no failure: {p:#?}\n{err}"
    );
    assert_eq!(code, Some(0), "{err}");
    let gpus: Vec<&Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "gpus")
        .collect();
    assert_eq!(gpus.len(), 4);
    assert!(gpus.iter().all(|f| f["what"] == "2× NVIDIA H200"), "{gpus:#?}");
    let reach: Vec<&Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "reach")
        .collect();
    assert_eq!(reach.len(), 2, "one pass per data NIC: {reach:#?}");
    assert!(
        reach[0]["what"]
            .as_str()
            .unwrap()
            .starts_with("eth1: 12 probes, 2400/2400 answered"),
        "{reach:#?}"
    );
    eprintln!("healthy: {took:?}");

    // Plant: node1 another driver and eth1 at MTU 1400; node2 a GPU gone after an Xid 79
    // and eth2 down; node3 an NVLink inactive and its eth1 slow; node0's eth2 lossy.
    let n1 = &tb.nodes[1];
    for f in ["nvidia-smi.txt", "query-gpu.csv"] {
        let t = std::fs::read_to_string(n1.gpu_file(f)).unwrap();
        std::fs::write(n1.gpu_file(f), t.replace("580.159.04", "575.57.08")).unwrap();
    }
    tb.node_run(1, &["ip", "link", "set", "eth1", "mtu", "1400"])
        .unwrap();
    let n2 = &tb.nodes[2];
    let csv = std::fs::read_to_string(n2.gpu_file("query-gpu.csv")).unwrap();
    std::fs::write(
        n2.gpu_file("query-gpu.csv"),
        csv.lines().take(2).map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
    n2.plant_dmesg("[  812.113418] NVRM: Xid (PCI:0000:00:07): 79, pid=4242, name=python3, GPU has fallen off the bus.\n");
    tb.node_run(2, &["ip", "link", "set", "eth2", "down"]).unwrap();
    let n3 = &tb.nodes[3];
    let l = std::fs::read_to_string(n3.gpu_file("nvlink-s.txt")).unwrap();
    std::fs::write(
        n3.gpu_file("nvlink-s.txt"),
        l.replacen("Link 7: 26.562 GB/s", "Link 7: <inactive>", 1),
    )
    .unwrap();
    let delay = plant_delay(&tb, 3, "eth1");
    let loss = plant_loss(&tb, 0, "eth2");
    eprintln!("planted {delay} on node3 eth1, {loss} on node0 eth2");

    let (code, v, err, took) = doctor(home.path(), &[]);
    assert!(took < Duration::from_secs(60), "the doctor took {took:?}");
    eprintln!("with faults: {took:?}\n{err}");
    assert_eq!(code, Some(1), "{err}");
    let p = problems(&v);
    let names = |node: usize| format!("lab-{node}");
    let (n0, n1, n2, n3) = (names(0), names(1), names(2), names(3));
    find(
        &p,
        &n1,
        "versions",
        "driver 575.57.08 where 3 other nodes have 580.159.04",
    );
    find(&p, &n1, "nics", "eth1 MTU 1400 where 3 other nodes have 1500");
    find(
        &p,
        &n2,
        "gpus",
        "1× NVIDIA H200 where 3 other nodes have 2× NVIDIA H200",
    );
    find(&p, &n2, "xid", "Xid 79 (GPU has fallen off the bus)");
    find(&p, &n2, "nics", "eth2 down");
    find(&p, &n2, "reach", "eth2 unreachable");
    find(&p, &n3, "nvlink", "GPU 0 link 7 inactive");
    // netem's delay makes the NIC slow; a tbf throttle queues (slow) and, past its short
    // queue, drops (lossy and slow).
    if delay.starts_with("netem") {
        find(&p, &n3, "reach", "eth1 slow");
    } else {
        let f = p.iter().find(|(n, c, _, w)| {
            *n == n3 && c == "reach" && (w.starts_with("eth1 slow") || w.starts_with("eth1 lossy and slow"))
        });
        assert!(f.is_some(), "node 3's eth1 named slow: {p:#?}");
    }
    find(&p, &n0, "reach", "eth2 lossy");
    // Nobody else is blamed for the network: node 3's peers are not slow, node 0's are
    // not lossy, node 2's not unreachable.
    let reach: Vec<&(String, String, String, String)> =
        p.iter().filter(|(_, c, _, _)| c == "reach").collect();
    assert_eq!(reach.len(), 3, "{reach:#?}");

    // Causes first: the summary leads with node2's NIC, and its unreachability follows.
    let summary: Vec<String> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    let nic = summary
        .iter()
        .position(|l| l.starts_with(&format!("FAIL {n2} nics: eth2 down")))
        .expect("nics line");
    assert!(
        summary[nic + 1].starts_with(&format!("  └ {n2} reach: eth2 unreachable")),
        "{summary:#?}"
    );
    let gpus = summary
        .iter()
        .position(|l| l.starts_with(&format!("FAIL {n2} xid: Xid 79")))
        .expect("xid line");
    assert!(
        summary[gpus + 1].starts_with(&format!("  └ {n2} gpus: 1× NVIDIA H200")),
        "{summary:#?}"
    );

    // The text report of some nodes and checks: the same problems, with their fixes.
    let out = flightdeck(
        home.path(),
        &["doctor", "lab", "--only", "nics,gpus", "--nodes", "0,1"],
    );
    let s = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "two nodes, one MTU each: no majority to blame\n{s}"
    );
    let out = flightdeck(
        home.path(),
        &["doctor", "lab", "--only", "nics,gpus", "--nodes", "0,1,3"],
    );
    let s = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{s}{}", text(&out.stderr));
    assert!(
        s.contains(&format!(
            "FAIL {n1} nics: eth1 MTU 1400 where 2 other nodes have 1500"
        )),
        "{s}"
    );
    assert!(s.contains("    fix: set the NIC's MTU"), "{s}");
    assert!(
        !s.contains("versions") && !s.contains("reach"),
        "only the checks asked for: {s}"
    );
    // A check that does not exist.
    let out = flightdeck(home.path(), &["doctor", "lab", "--only", "nic"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--only nic: no such check; did you mean `nics`?"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_gpudirect_fleet_whose_rxdm_is_not_running_is_named() {
    let Some(tb) = Testbed::new_machines(2, 8) else {
        return;
    };
    for i in 0..2 {
        support::testbed::a3_mega_nics(&tb, i);
        // nic0 carries the default route, as on GCP.
        tb.node_run(
            i,
            &[
                "ip",
                "route",
                "add",
                "default",
                "via",
                "10.88.0.254",
                "dev",
                "enp0s12",
            ],
        )
        .unwrap();
        tb.nodes[i].add_gpu_double();
        // The TCPXO pieces as the bootstrap leaves them; the RxDM container runs on node 0
        // only.
        let root = tb.nodes[i].root.clone().unwrap();
        std::fs::create_dir_all(root.join("var/lib/tcpxo/lib64")).unwrap();
        for f in ["nccl-env-profile.sh", "libnccl.so.2"] {
            std::fs::write(root.join("var/lib/tcpxo/lib64").join(f), "").unwrap();
        }
        // The plugin as the loader must find it: a real shared object stands in.
        let so = [
            "/lib/x86_64-linux-gnu/libm.so.6",
            "/usr/lib/x86_64-linux-gnu/libm.so.6",
        ]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("libm.so.6");
        std::fs::copy(so, root.join("var/lib/tcpxo/lib64/libnccl-net.so")).unwrap();
        std::fs::write(root.join("dev/dmabuf_import_helper"), "").unwrap();
        std::fs::create_dir_all(root.join("dev/aperture_devices/0000:06:00.0")).unwrap();
        std::fs::create_dir_all(root.join("var/lib/fd-shim/containers")).unwrap();
        if i == 0 {
            std::fs::write(
                root.join("var/lib/fd-shim/containers/receive-datapath-manager"),
                "",
            )
            .unwrap();
        }
    }
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    let (code, v, err, _) = doctor(home.path(), &["--profile", "tcpxo"]);
    let p = problems(&v);
    assert_eq!(code, Some(1), "{err}");
    let (n0, n1) = ("lab-0".to_string(), "lab-1".to_string());
    find(
        &p,
        &n1,
        "gpudirect",
        "rxdm: container receive-datapath-manager is not running",
    );
    assert!(
        !p.iter().any(|(n, c, _, _)| *n == n0 && c == "gpudirect"),
        "node 0 has its RxDM: {p:#?}"
    );
    // The data NICs are at the TCPXO VPCs' MTU: no NIC problem.
    assert!(!p.iter().any(|(_, c, _, _)| c == "nics"), "{p:#?}");
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "gpudirect" && f["node"] == n1.as_str())
        .unwrap();
    assert!(f["fix"].as_str().unwrap().contains("fleet bootstrap"), "{f}");
}

/// A process in node `i`'s namespace that runs until killed, in a session of its own:
/// its pid (also its session's).
fn spawn_on(tb: &Testbed, i: usize, secs: u32) -> std::process::Child {
    std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &tb.nodes[i].ns,
            "setsid",
            "sleep",
            &secs.to_string(),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Drop `permille` of node `i`'s outgoing ICMP on `nic` (nftables), in a table named
/// `table`.
fn plant_drop(tb: &Testbed, i: usize, nic: &str, permille: u32, table: &str) {
    plant_drop_while(tb, i, nic, permille, table, "");
}

/// [`plant_drop`] while `quota` holds (`quota until 40000 bytes`: only the first 40000
/// bytes of ICMP the node sends on the NIC may be dropped; after them, nothing).
fn plant_drop_while(tb: &Testbed, i: usize, nic: &str, permille: u32, table: &str, quota: &str) {
    tb.node_run(i, &["nft", "add", "table", "inet", table]).unwrap();
    tb.node_run(
        i,
        &[
            "nft",
            "add",
            "chain",
            "inet",
            table,
            "out",
            "{ type filter hook output priority 0; }",
        ],
    )
    .unwrap();
    let rule =
        format!("oifname \"{nic}\" meta l4proto icmp {quota} numgen random mod 1000 < {permille} drop");
    tb.node_run(i, &["nft", "add", "rule", "inet", table, "out", &rule])
        .unwrap();
}

#[test]
fn a_node_without_ping_is_not_checked_and_a_bridge_is_no_data_nic() {
    let Some(tb) = Testbed::new_machines(4, 1) else {
        return;
    };
    tb.remove_command(2, "ping");
    assert!(
        tb.node_run(2, &["sh", "-c", "command -v ping"]).is_ok(),
        "the namespace alone does not hide it: the sshd's mount namespace does"
    );
    // A bridge with an address on node 1 (a container host's), not named as docker's.
    for cmd in [
        &["ip", "link", "add", "lab0", "type", "bridge"][..],
        &["ip", "addr", "add", "10.77.0.1/24", "dev", "lab0"],
        &["ip", "link", "set", "lab0", "up"],
    ] {
        tb.node_run(1, cmd).unwrap();
    }
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    let (code, v, err, _) = doctor(home.path(), &["--only", "nics,reach"]);
    let p = problems(&v);
    assert_eq!(code, Some(0), "no failure: {p:#?}\n{err}");
    let f = find(&p, "lab-2", "reach", "not checked: `ping` missing on the node");
    assert_eq!(f.2, "warn");
    assert_eq!(p.len(), 1, "nothing else: {p:#?}");
    let fix = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "reach" && f["node"] == "lab-2")
        .unwrap()["fix"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(fix.contains("sudo apt-get install -y iputils-ping"), "{fix}");
    // Its peers still probed it: eth1 passes with every pair answered.
    let pass: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "reach" && f["outcome"] == "pass")
        .map(|f| f["what"].as_str().unwrap())
        .collect();
    assert_eq!(pass.len(), 1, "{pass:?}");
    assert!(
        pass[0].starts_with("eth1: 9 probes, 1800/1800 answered"),
        "{pass:?}"
    );
    let nics: Vec<&Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "nics" && f["node"] == "lab-1")
        .collect();
    assert!(
        nics.iter().all(|f| !f["what"].as_str().unwrap().contains("lab0")),
        "{nics:#?}"
    );
}

#[test]
fn on_one_nic_fleets_the_nic_nccl_uses_is_probed() {
    let _probing = PROBING.lock().unwrap_or_else(|p| p.into_inner());
    let Some(tb) = Testbed::new_machines(4, 0) else {
        return;
    };
    tb.node_run(1, &["ip", "link", "set", "eth0", "mtu", "1400"])
        .unwrap();
    plant_drop(&tb, 3, "eth0", 20, "fdloss");
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    let (code, v, err, _) = doctor(home.path(), &["--only", "nics,reach"]);
    let p = problems(&v);
    assert_eq!(code, Some(1), "{p:#?}\n{err}");
    find(&p, "lab-1", "nics", "eth0 MTU 1400 where 3 other nodes have 1500");
    find(&p, "lab-3", "reach", "eth0 lossy");
    assert_eq!(p.len(), 2, "nothing else: {p:#?}");
}

#[test]
fn a_process_holding_a_gpu_is_named_with_whose_it_is() {
    let Some(tb) = Testbed::new_machines_with_homes(3, 0) else {
        return;
    };
    for n in &tb.nodes {
        n.add_gpu_double();
    }
    // Node 1: a stray process on GPU 1. Node 2: a flightdeck job's (its session leader
    // in the job's directory, as `job run` leaves it).
    let mut stray = spawn_on(&tb, 1, 300);
    tb.nodes[1].plant_gpu_process(1, stray.id(), "sleep", 30000);
    let mut job = spawn_on(&tb, 2, 300);
    tb.nodes[2].plant_gpu_process(0, job.id(), "python3", 70000);
    let dir = tb.nodes[2].home.as_ref().unwrap().join(".flightdeck/jobs/j7/1");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("pid"), format!("{}\n", job.id())).unwrap();
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    let (code, v, err, _) = doctor(home.path(), &["--only", "procs"]);
    let p = problems(&v);
    assert_eq!(code, Some(1), "{p:#?}\n{err}");
    let f = find(
        &p,
        "lab-1",
        "procs",
        "held by a process not of a flightdeck job or run",
    );
    assert_eq!(f.2, "fail");
    assert!(
        f.3.contains(&format!(
            "GPU 1: pid {} (root, `sleep 300`, 30000 MiB, for ",
            stray.id()
        )),
        "{f:?}"
    );
    let f = find(&p, "lab-2", "procs", "in use by flightdeck job j7");
    assert_eq!(f.2, "warn");
    assert_eq!(p.len(), 2, "{p:#?}");
    let fix = |node: &str| {
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["check"] == "procs" && f["node"] == node)
            .unwrap()["fix"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(
        fix("lab-1").contains(&format!("`sudo kill {}`", stray.id())),
        "{}",
        fix("lab-1")
    );
    assert!(
        fix("lab-2").contains("`flightdeck job stop j7`"),
        "{}",
        fix("lab-2")
    );
    // Once they end (and the double lists them no more), the GPUs are free.
    for (child, i) in [(&mut stray, 1), (&mut job, 2)] {
        child.kill().unwrap();
        child.wait().unwrap();
        std::fs::remove_file(tb.nodes[i].gpu_file("compute-apps.csv")).unwrap();
    }
    let (code, v, err, _) = doctor(home.path(), &["--only", "procs"]);
    assert_eq!(code, Some(0), "{:#?}\n{err}", problems(&v));
    let ok = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "procs" && f["what"] == "no process on the GPUs")
        .count();
    assert_eq!(ok, 3);
}

#[test]
fn a_loss_that_does_not_last_is_probed_again_and_not_named() {
    let _probing = PROBING.lock().unwrap_or_else(|p| p.into_inner());
    let Some(tb) = Testbed::new_machines(4, 1) else {
        return;
    };
    // Node 1 drops a fifth of the first 40 kB of ICMP it sends on eth1 (some 400
    // packets, the first third of its probes and replies), then nothing: a burst, as a
    // loaded host's bridge drops. The first look sees it, the second does not.
    plant_drop_while(&tb, 1, "eth1", 200, "fdburst", "quota until 40000 bytes");
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    let (code, v, err, _) = doctor(home.path(), &["--only", "reach"]);
    let p = problems(&v);
    assert_eq!(code, Some(0), "{p:#?}\n{err}");
    assert!(p.is_empty(), "{p:#?}");
    let pass: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "reach")
        .map(|f| f["what"].as_str().unwrap())
        .collect();
    assert!(
        pass[0].contains("cleared when probed again alone"),
        "the first look suspected it: {pass:?}"
    );
}

/// A loss that lasts while the node scripts run (as this machine's bridge drops probes
/// while 64 nodes' scripts share its cores) and ends with them: node 1 drops a fifth of
/// its ICMP on eth1 until its kernel log (12 s) has been read. The first look suspects it;
/// the second look waits for every node's script to end, finds it clean, and names
/// nothing. (A second look that ran as soon as the first look ended, while the scripts
/// still ran, named it.)
#[test]
fn a_loss_while_the_node_scripts_run_is_not_named() {
    let _probing = PROBING.lock().unwrap_or_else(|p| p.into_inner());
    let Some(tb) = Testbed::new_machines(4, 1) else {
        return;
    };
    for n in &tb.nodes {
        n.add_gpu_double();
    }
    plant_drop(&tb, 1, "eth1", 200, "fdload");
    tb.nodes[1].double_after("dmesg", 12, "nft delete table inet fdload");
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    let (code, v, err, took) = doctor(home.path(), &[]);
    eprintln!("4 nodes, a loss while the scripts run: {took:?}");
    let p = problems(&v);
    let rest: Vec<_> = p.iter().filter(|(_, c, _, _)| c != "sysctl").collect();
    assert!(rest.is_empty(), "{rest:#?}\n{err}");
    assert_eq!(code, Some(0), "{p:#?}\n{err}");
    let pass: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "reach" && f["outcome"] == "pass")
        .map(|f| f["what"].as_str().unwrap())
        .collect();
    assert!(
        pass.iter().any(|w| w.contains("cleared when probed again alone")),
        "the first look suspected it: {pass:?}"
    );
}

#[test]
fn sixteen_one_nic_nodes_with_four_faults_each_named_as_its_cause() {
    let _probing = PROBING.lock().unwrap_or_else(|p| p.into_inner());
    let Some(tb) = Testbed::new_machines_with_homes(16, 0) else {
        return;
    };
    for n in &tb.nodes {
        n.add_gpu_double();
    }
    // Node 3: its only NIC at another MTU. Node 7: its only NIC loses 2% (netem where
    // the kernel has it, else nftables). Node 11: no ping. Node 13: a stray process on
    // GPU 0.
    tb.node_run(3, &["ip", "link", "set", "eth0", "mtu", "1400"])
        .unwrap();
    let loss = plant_loss(&tb, 7, "eth0");
    tb.remove_command(11, "ping");
    let mut stray = spawn_on(&tb, 13, 300);
    tb.nodes[13].plant_gpu_process(0, stray.id(), "sleep", 1024);
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    let (code, v, err, took) = doctor(home.path(), &[]);
    stray.kill().unwrap();
    stray.wait().unwrap();
    eprintln!("16 nodes, four faults ({loss} on lab-7): {took:?}\n{err}");
    let p = problems(&v);
    assert_eq!(code, Some(1), "{p:#?}\n{err}");
    find(
        &p,
        "lab-3",
        "nics",
        "eth0 MTU 1400 where 15 other nodes have 1500",
    );
    find(&p, "lab-7", "reach", "eth0 lossy");
    find(&p, "lab-11", "reach", "not checked: `ping` missing on the node");
    find(
        &p,
        "lab-13",
        "procs",
        "held by a process not of a flightdeck job or run",
    );
    // Nothing else: the TCP buffers of this machine's kernel (every node's) aside.
    let rest: Vec<_> = p
        .iter()
        .filter(|(n, c, _, _)| {
            c != "sysctl"
                && !matches!(
                    (n.as_str(), c.as_str()),
                    ("lab-3", "nics") | ("lab-7", "reach") | ("lab-11", "reach") | ("lab-13", "procs")
                )
        })
        .collect();
    assert!(rest.is_empty(), "{rest:#?}");
    assert_eq!(
        p.iter().filter(|(_, c, _, _)| c != "sysctl").count(),
        4,
        "one finding per fault: {p:#?}"
    );
    // The summary names each as a cause, none as following from another.
    let summary: Vec<&str> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(summary.iter().all(|l| !l.starts_with("  └")), "{summary:#?}");
    // A guard against a doctor that hangs; its speed is measured in benches/doctor_fleet.rs.
    assert!(took < Duration::from_secs(120), "the doctor took {took:?}");
}

/// The probes need only the network's facts: they run while the slower checks still do
/// (every node's kernel log takes 6 s here), not after them. The dmesg double notes a
/// `ping` (a probe) running while it waits; on a doctor that probed only once every check
/// had ended, none does.
#[test]
fn the_probes_run_while_the_slow_checks_do() {
    let _probing = PROBING.lock().unwrap_or_else(|p| p.into_inner());
    let Some(tb) = Testbed::new_machines(4, 0) else {
        return;
    };
    let marks = tempfile::tempdir().unwrap();
    let probed = marks.path().join("probed-while-dmesg-ran");
    for n in &tb.nodes {
        n.add_gpu_double();
        n.slow_double("dmesg", 6, &probed);
    }
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    let (code, v, err, took) = doctor(home.path(), &[]);
    let p = problems(&v);
    let rest: Vec<_> = p.iter().filter(|(_, c, _, _)| c != "sysctl").collect();
    assert!(rest.is_empty(), "{rest:#?}\n{err}");
    assert_eq!(code, Some(0), "{p:#?}\n{err}");
    let reach = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "reach" && f["outcome"] == "pass")
        .count();
    assert!(reach > 0, "the probes ran: {v:#}");
    eprintln!("4 nodes, dmesg 6 s: {took:?}");
    assert!(
        probed.exists(),
        "no probe ran while the kernel logs were read: the probes waited for the slow checks\n{err}"
    );
}

/// A node whose clock is 2 s ahead (a `date` on it that says so) is named, by the least
/// it can be off; the others pass, each with the window its reading was taken in (the
/// clock exchange on a channel of its own, not the script's first line, whose delivery
/// waits behind the logins).
#[test]
fn a_node_whose_clock_is_ahead_is_named_and_the_others_pass_within_their_window() {
    use std::os::unix::fs::PermissionsExt;
    let Some(tb) = Testbed::new_machines_with_homes(3, 0) else {
        return;
    };
    let bin = tb.nodes[2].root.as_ref().unwrap().join("usr/local/bin/date");
    std::fs::write(
        &bin,
        "#!/bin/sh\n# date, 2 s ahead: a node whose clock is off\n\
         if [ \"$1\" = \"+%s%N\" ]; then t=$(/bin/date +%s%N); echo $((t + 2000000000)); else exec /bin/date \"$@\"; fi\n",
    )
    .unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    let (code, v, err, _) = doctor(home.path(), &["--only", "clock"]);
    let clock = |node: &str| {
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["check"] == "clock" && f["node"] == node)
            .unwrap_or_else(|| panic!("no clock finding for {node}: {v}\n{err}"))
            .clone()
    };
    let ahead = clock("lab-2");
    assert_eq!(ahead["outcome"], "warn", "{ahead}");
    let what = ahead["what"].as_str().unwrap();
    let ms: f64 = what
        .trim_start_matches('+')
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("{what}"));
    assert!((1500.0..=2000.0).contains(&ms), "{what}");
    assert!(what.ends_with("ms from lab-0 at least"), "{what}");
    let fine = clock("lab-1");
    assert_eq!(fine["outcome"], "pass", "{fine}");
    assert!(fine["what"].as_str().unwrap().contains("(±"), "{fine}");
    assert_eq!(code, Some(0), "a clock off is a warning: {v}");
}

/// What makes NCCL fail at init, planted one per node as operators meet them: a
/// `NCCL_SOCKET_IFNAME` in /etc/nccl.conf naming an interface the node lacks (NCCL:
/// `Bootstrap : no socket interface found`), a /dev/shm of a container's size under two
/// GPUs, and an `NCCL_IB_HCA` in ~/.nccl.conf naming an HCA the node lacks. The healthy
/// fleet first: no false alarm.
#[test]
fn settings_and_resources_that_break_nccls_init_are_named_per_node() {
    let Some(tb) = Testbed::new_machines_with_homes(3, 1) else {
        return;
    };
    for n in &tb.nodes {
        n.add_gpu_double();
    }
    tb.nodes[2].add_rdma_devices(2);
    let home = tempfile::tempdir().unwrap();
    tb.apply_fleet(home.path(), "lab");
    let only = ["--only", "nccl-env,nccl-init"];

    let (code, v, err, _) = doctor(home.path(), &only);
    let p = problems(&v);
    assert!(p.is_empty(), "a healthy fleet: {p:#?}\n{err}");
    assert_eq!(code, Some(0), "{err}");
    let init: Vec<&Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "nccl-init")
        .collect();
    assert_eq!(init.len(), 3, "{init:#?}");
    assert!(
        init.iter()
            .all(|f| f["what"].as_str().unwrap().starts_with("/dev/shm ")),
        "{init:#?}"
    );

    let root0 = tb.nodes[0].root.as_ref().unwrap();
    std::fs::write(
        root0.join("etc/nccl.conf"),
        "NCCL_DEBUG=WARN\nNCCL_SOCKET_IFNAME=eth9\n",
    )
    .unwrap();
    tb.node_mount_ns(
        1,
        &["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", "/dev/shm"],
    )
    .unwrap();
    let home2 = tb.nodes[2].home.as_ref().unwrap();
    std::fs::write(home2.join(".nccl.conf"), "NCCL_IB_HCA=mlx5_7:1\n").unwrap();

    let (code, v, err, _) = doctor(home.path(), &only);
    let p = problems(&v);
    assert_eq!(code, Some(1), "{p:#?}\n{err}");
    let (_, _, o, _) = find(
        &p,
        "lab-0",
        "nccl-env",
        "NCCL_SOCKET_IFNAME=eth9 in /etc/nccl.conf: names no interface of the node",
    );
    assert_eq!(o, "fail");
    find(&p, "lab-0", "nccl-env", "Bootstrap : no socket interface found");
    let (_, _, o, _) = find(
        &p,
        "lab-1",
        "nccl-init",
        "/dev/shm is 16 MiB for 2 GPUs, 256 MiB wanted",
    );
    assert_eq!(o, "fail");
    let (_, _, o, _) = find(
        &p,
        "lab-2",
        "nccl-env",
        "NCCL_IB_HCA=mlx5_7:1 in /root/.nccl.conf: names no HCA of the node (it has mlx5_0:1, mlx5_1:1)",
    );
    assert_eq!(o, "fail");
    assert_eq!(p.len(), 3, "nothing else: {p:#?}");
    // The fixes say what to do.
    let fixes: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["outcome"] == "fail")
        .map(|f| f["fix"].as_str().unwrap())
        .collect();
    assert!(
        fixes.iter().any(|f| f.contains("--shm-size=268435456")),
        "{fixes:#?}"
    );
}
