use super::*;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/doctor/h200x2/");

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{DIR}{name}")).unwrap()
}

/// The sections of one H200 node as recorded, with two data NICs.
fn h200_sections() -> script::Sections {
    let mut m = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        m.insert(k.to_string(), (v, 0));
    };
    put("time", "1763945000000000000\n".into());
    put("smi", fixture("nvidia-smi.txt"));
    put("gpus", fixture("query-gpu.csv"));
    put("topo", fixture("topo-m.txt"));
    put("nvlink", fixture("nvlink-s.txt"));
    put("xid", String::new());
    put(
        "nics",
        "eth0 up 1500 10000 0\neth1 up 1500 10000 0\neth2 up 1500 10000 0\nlo unknown 65536 - -\n".into(),
    );
    put(
        "addrs",
        "2: eth0    inet 10.0.0.2/24 scope global eth0\n3: eth1    inet 10.1.0.2/24 scope global eth1\n4: eth2    inet 10.2.0.2/24 scope global eth2\n".into(),
    );
    put("route", "default via 10.0.0.1 dev eth0\n".into());
    put("rdma", "devices 0\n".into());
    put("sysctl", fixture("sysctl.txt"));
    put("nccl-env", String::new());
    put("nccl-res", "shm 1048576 1048576\nmemlock 8192\nuid 0\n".into());
    put(
        "versions",
        "kernel 6.18.44\nos Ubuntu 24.04.3 LTS\nnccl /usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2 2.28.9+cuda13.0\n".into(),
    );
    script::Sections(m)
}

fn ctx(nodes: usize) -> Context {
    Context {
        machine_type: Some("2xH200".into()),
        flavour: GpuDirect::None,
        env: vec![],
        nodes,
        only: vec![],
    }
}

fn set(s: &mut script::Sections, k: &str, v: String) {
    s.0.insert(k.to_string(), (v, 0));
}

fn by_check<'a>(f: &'a [Finding], check: &str) -> &'a Finding {
    f.iter()
        .find(|x| x.check == check)
        .unwrap_or_else(|| panic!("no {check} in {f:#?}"))
}

#[test]
fn the_recorded_healthy_h200_node_passes_every_check() {
    let f = judge_node(&ctx(1), "h200", &h200_sections(), 0, None);
    let bad: Vec<&Finding> = f.iter().filter(|x| x.outcome >= Outcome::Warn).collect();
    assert!(bad.is_empty(), "{bad:#?}");
    assert_eq!(by_check(&f, "gpus").what, "2× NVIDIA H200");
    assert_eq!(
        by_check(&f, "nvlink").what,
        "all 1 GPU pairs NV18, 18 links per GPU active"
    );
    assert_eq!(by_check(&f, "sysctl").outcome, Outcome::Skip, "one node");
    assert_eq!(by_check(&f, "gpudirect").outcome, Outcome::Skip);
    // Every check of a node appears once.
    for id in [
        "gpus",
        "nvlink",
        "ecc",
        "xid",
        "clocks",
        "persistence",
        "nics",
        "rdma",
        "gpudirect",
        "nccl-env",
        "sysctl",
        "numa",
    ] {
        assert_eq!(f.iter().filter(|x| x.check == id).count(), 1, "{id}");
    }
}

#[test]
fn planted_gpu_faults_are_named_with_evidence_and_fix() {
    let mut s = h200_sections();
    // One GPU gone from the driver's view, an Xid 79 in the kernel log.
    let csv = fixture("query-gpu.csv");
    let short: String = csv.lines().take(2).map(|l| format!("{l}\n")).collect();
    set(&mut s, "gpus", short);
    set(
        &mut s,
        "xid",
        "[ 812.1] NVRM: Xid (PCI:0000:00:07): 79, pid=4242, name=python3, GPU has fallen off the bus.\n"
            .into(),
    );
    // A link down.
    set(
        &mut s,
        "nvlink",
        fixture("nvlink-s.txt").replacen("Link 7: 26.562 GB/s", "Link 7: <inactive>", 1),
    );
    // Persistence off, clocks held by a HW thermal slowdown, a pending remap.
    let csv = fixture("query-gpu.csv").replacen(
        "Enabled, 0, 0, [N/A], No, No, 0x0000000000000001",
        "Disabled, 0, 0, [N/A], Yes, No, 0x0000000000000040",
        1,
    );
    let mut s2 = h200_sections();
    set(&mut s2, "gpus", csv);
    set(
        &mut s2,
        "nccl-env",
        "env NCCL_VERSION=2.28.3-1\nenv NCCL_P2P_DISABLE=1\n/etc/nccl.conf NCCL_ALGO=Tree\n".into(),
    );

    let f = judge_node(&ctx(2), "n1", &s, 0, None);
    let g = by_check(&f, "gpus");
    assert_eq!(
        (g.outcome, g.what.as_str()),
        (Outcome::Fail, "1 GPUs, 2xH200 has 2")
    );
    let x = by_check(&f, "xid");
    assert_eq!(x.outcome, Outcome::Fail);
    assert!(
        x.what
            .contains("Xid 79 (GPU has fallen off the bus) on PCI:0000:00:07"),
        "{}",
        x.what
    );
    assert!(x.evidence[0].contains("pid=4242"));
    assert!(x.fix.contains("report-host-as-faulty"));
    let n = by_check(&f, "nvlink");
    assert_eq!(n.outcome, Outcome::Fail);
    assert!(n.what.starts_with("GPU 0 link 7 inactive"), "{}", n.what);

    let f = judge_node(&ctx(2), "n2", &s2, 0, None);
    assert_eq!(by_check(&f, "persistence").outcome, Outcome::Warn);
    let c = by_check(&f, "clocks");
    assert_eq!(c.outcome, Outcome::Fail);
    assert!(c.what.contains("HW thermal slowdown"), "{}", c.what);
    let e = by_check(&f, "ecc");
    assert_eq!(e.outcome, Outcome::Fail);
    assert!(e.what.contains("waits for a GPU reset"));
    let v = by_check(&f, "nccl-env");
    assert_eq!(v.outcome, Outcome::Fail);
    assert!(
        v.what.contains("NCCL_P2P_DISABLE=1 in the login environment"),
        "{}",
        v.what
    );
    assert!(
        !v.what.contains("NCCL_VERSION"),
        "a label of NVIDIA's images, not a setting"
    );
    assert_eq!(
        by_check(&f, "sysctl").outcome,
        Outcome::Warn,
        "4 MiB buffers on a two-node fleet"
    );
}

fn facts_of(s: &script::Sections) -> Facts {
    Facts::read(s)
}

#[test]
fn the_fleet_judge_names_the_odd_node() {
    let a = h200_sections();
    let mut b = h200_sections();
    set(
        &mut b,
        "smi",
        fixture("nvidia-smi.txt").replace("580.159.04", "575.57.08"),
    );
    set(
        &mut b,
        "gpus",
        fixture("query-gpu.csv").replace("580.159.04", "575.57.08"),
    );
    set(
        &mut b,
        "nics",
        "eth0 up 1500 10000 0\neth1 up 1400 10000 0\neth2 up 1500 10000 0\n".into(),
    );
    let (fa, fb, fc) = (facts_of(&a), facts_of(&b), facts_of(&a));
    let base = 1_000_000_000_000i128;
    let seen = vec![
        Seen {
            node: "n0",
            facts: &fa,
            arrived_ns: Some(base),
            clock: None,
        },
        Seen {
            node: "n1",
            facts: &fb,
            arrived_ns: Some(base),
            clock: None,
        },
        Seen {
            node: "n2",
            facts: &fc,
            arrived_ns: Some(fc.time_ns.unwrap() - 2_000_000_000 + (base - fa.time_ns.unwrap())),
            clock: None,
        },
    ];
    let mut c = ctx(3);
    c.machine_type = None;
    let f = judge_fleet(&c, &seen);
    let odd: Vec<(&str, &str, Outcome)> = f
        .iter()
        .filter(|x| x.outcome > Outcome::Pass)
        .map(|x| (x.node.as_deref().unwrap(), x.check, x.outcome))
        .collect();
    assert_eq!(
        odd,
        vec![
            ("n1", "versions", Outcome::Fail),
            ("n1", "nics", Outcome::Fail),
            ("n2", "clock", Outcome::Warn)
        ],
        "{f:#?}"
    );
    let v = f
        .iter()
        .find(|x| x.check == "versions" && x.outcome == Outcome::Fail)
        .unwrap();
    assert_eq!(v.what, "driver 575.57.08 where 2 other nodes have 580.159.04");
    let n = f
        .iter()
        .find(|x| x.check == "nics" && x.outcome == Outcome::Fail)
        .unwrap();
    assert_eq!(n.what, "eth1 MTU 1400 where 2 other nodes have 1500");
    let k = f
        .iter()
        .find(|x| x.check == "clock" && x.outcome == Outcome::Warn)
        .unwrap();
    assert_eq!(k.what, "+2000 ms from n0 at least");
}

/// A node's clock is judged by the window its reading was taken in: an answer that took
/// 3 s (a loaded bastion, a queue of logins) leaves the offset open by as much and is
/// not called off; a prompt answer 1 s ahead is, by the least it can be off.
#[test]
fn the_clock_is_judged_within_the_window_of_its_reading() {
    let a = h200_sections();
    let f = facts_of(&a);
    let base = 1_000_000_000_000i128;
    let ms = 1_000_000i128;
    let read = |after: i128, before: i128, node: i128| Clock {
        node_ns: base + node,
        after_ns: base + after,
        before_ns: base + before,
    };
    let seen = |name: &'static str, clock: Clock| Seen {
        node: name,
        facts: &f,
        // Its first line came late: by that alone, n1 and n2 would look the same.
        arrived_ns: Some(base + 3000 * ms),
        clock: Some(clock),
    };
    let nodes = vec![
        seen("n0", read(0, 10 * ms, 5 * ms)),
        // 1 s ahead, but the answer took 3 s: anywhere from -0.5 s to +2.5 s.
        seen("n1", read(0, 3000 * ms, 2500 * ms)),
        // 1 s ahead, answered within 20 ms.
        seen("n2", read(0, 20 * ms, 1010 * ms)),
    ];
    let mut c = ctx(3);
    c.machine_type = None;
    let found = judge_fleet(&c, &nodes);
    let clock = |node: &str| {
        found
            .iter()
            .find(|x| x.check == "clock" && x.node.as_deref() == Some(node))
            .unwrap()
    };
    assert_eq!(clock("n1").outcome, Outcome::Pass, "{found:#?}");
    assert_eq!(clock("n1").what, "+1000 ms from n0 (±1505 ms)");
    assert_eq!(clock("n2").outcome, Outcome::Warn, "{found:#?}");
    assert_eq!(clock("n2").what, "+985 ms from n0 at least");
}

#[test]
fn the_summary_leads_with_the_cause() {
    let mut r = Report::default();
    let mut s = h200_sections();
    set(
        &mut s,
        "nics",
        "eth0 up 1500 10000 0\neth1 down 1500 10000 0\neth2 up 1500 10000 0\n".into(),
    );
    r.add(judge_node(&ctx(3), "n2", &s, 0, None));
    // n2's eth1 is unreachable from both peers; n0 and n1 reach each other.
    let probes: Vec<net::Probe> = net::rounds(3)
        .into_iter()
        .flatten()
        .flat_map(|(a, b)| [(a, b), (b, a)])
        .map(|(a, b)| net::Probe {
            from: a,
            to: b,
            nic: "eth1".into(),
            sent: if a == 2 { 0 } else { 100 },
            received: if a == 2 || b == 2 { 0 } else { 100 },
            avg_ms: (a != 2 && b != 2).then_some(0.05),
            error: (a == 2).then(|| "ping: connect: Network is unreachable".to_string()),
        })
        .collect();
    r.add(judge_reach(&["n0".into(), "n1".into(), "n2".into()], &probes));
    r.link_causes();
    let lines = r.summary_lines();
    assert!(
        lines[0].starts_with("FAIL n2 nics: eth1 down; fix: bring the NIC up"),
        "{lines:#?}"
    );
    assert!(
        lines[1]
            .starts_with("  └ n2 reach: eth1 unreachable: no reply on eth1 to or from any of its 2 peers"),
        "{lines:#?}"
    );
    // Failures first, then warnings (this fixture's 4 MiB TCP buffers).
    assert!(
        lines[2].starts_with("WARN n2 sysctl: small TCP buffers: net.core.rmem_max 4 MiB"),
        "{lines:#?}"
    );
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert_eq!(r.worst(), Outcome::Fail);
}

#[test]
fn a_fleet_comparison_replaces_the_nodes_own_pass() {
    let mut r = Report::default();
    r.add(vec![Finding::new("versions", "n1", Outcome::Pass, "driver 1")]);
    r.add(vec![Finding::new(
        "versions",
        "n1",
        Outcome::Fail,
        "driver 1 where 2 other nodes have 2",
    )]);
    r.add(vec![Finding::new("versions", "n1", Outcome::Pass, "late pass")]);
    assert_eq!(r.findings.len(), 1);
    assert_eq!(r.findings[0].outcome, Outcome::Fail);
}

#[test]
fn gpudirect_is_the_preflights_checks() {
    let mut c = ctx(2);
    c.flavour = GpuDirect::Tcpxo;
    c.env = crate::nccl::runner::profile_env(GpuDirect::Tcpxo);
    let p = c.preflight_script().unwrap();
    assert!(p.contains("tcpgpudmarxd") || p.contains("rxdm"), "{p}");
    assert!(!p.contains("interface"), "the nics check covers interfaces");
    let mut s = h200_sections();
    set(
        &mut s,
        "gpudirect",
        "@@fd-preflight ok file /var/lib/tcpxo/lib64/libnccl-net.so present\n@@fd-preflight fail rxdm - container receive-datapath-manager is not running\n".into(),
    );
    let f = judge_node(&c, "n0", &s, 0, None);
    let g = by_check(&f, "gpudirect");
    assert_eq!(g.outcome, Outcome::Fail);
    assert_eq!(g.what, "rxdm: container receive-datapath-manager is not running");
    assert!(g.fix.contains("fleet bootstrap"));
    // The data NICs at MTU 1500 where TCPXO's VPCs have 8244.
    let n = by_check(&f, "nics");
    assert_eq!(n.outcome, Outcome::Fail);
    assert!(
        n.what.contains("eth1 MTU 1500, data VPCs have 8244 to 8896"),
        "{}",
        n.what
    );
}

/// GPUDirect review N5: a TCPXO node whose data NICs have Cluster Toolkit's VPC MTU
/// (8896) passes, as the pre-flight accepts it; one outside 8244 to 8896 fails, and the
/// fix never names a lower MTU than the VPC's.
#[test]
fn data_nics_at_any_vpc_mtu_the_preflight_accepts_pass() {
    let mut c = ctx(2);
    c.flavour = GpuDirect::Tcpxo;
    c.env = crate::nccl::runner::profile_env(GpuDirect::Tcpxo);
    for (mtu, ok) in [
        (8244, true),
        (8896, true),
        (8500, true),
        (1500, false),
        (9000, false),
    ] {
        let mut s = h200_sections();
        set(
            &mut s,
            "nics",
            format!("eth0 up 1460 10000 0\neth1 up {mtu} 10000 0\neth2 up {mtu} 10000 0\n"),
        );
        let f = judge_node(&c, "n0", &s, 0, None);
        let n = by_check(&f, "nics");
        assert_eq!(n.outcome == Outcome::Pass, ok, "MTU {mtu}: {} {}", n.what, n.fix);
        if !ok {
            assert!(n.what.contains("data VPCs have 8244 to 8896"), "{}", n.what);
        }
    }
}

/// An ACTIVE RDMA port whose physical state is unreadable is a warning that says so, not
/// "not active"; a DOWN port fails.
#[test]
fn rdma_ports_down_fail_and_an_unreadable_physical_state_warns() {
    let mut c = ctx(1);
    c.flavour = GpuDirect::Rdma;
    let judge = |text: &str| {
        let mut s = h200_sections();
        set(&mut s, "rdma", format!("{text}devices 2\n"));
        by_check(&judge_node(&c, "n0", &s, 0, None), "rdma").clone()
    };
    let ok = judge("mlx5_0 1 4:ACTIVE 5:LinkUp eth1 0\nmlx5_1 1 4:ACTIVE 5:LinkUp eth2 1\n");
    assert_eq!(ok.outcome, Outcome::Pass, "{}", ok.what);
    let unread = judge("mlx5_0 1 4:ACTIVE - eth1 0\nmlx5_1 1 4:ACTIVE 5:LinkUp eth2 1\n");
    assert_eq!(unread.outcome, Outcome::Warn, "{}", unread.what);
    assert!(
        unread.what.contains("physical state unreadable: mlx5_0 port 1"),
        "{}",
        unread.what
    );
    let down = judge("mlx5_0 1 1:DOWN - eth1 0\nmlx5_1 1 4:ACTIVE 5:LinkUp eth2 1\n");
    assert_eq!(down.outcome, Outcome::Fail, "{}", down.what);
    assert!(down.what.contains("mlx5_0 port 1 1:DOWN"), "{}", down.what);
}

#[test]
fn the_doctor_ran_clean_on_one_h200_and_named_the_planted_lock() {
    let v: serde_json::Value = serde_json::from_str(&fixture("../h200x1/doctor-clean.json")).unwrap();
    let findings = v["findings"].as_array().unwrap();
    assert!(
        findings
            .iter()
            .all(|f| f["outcome"] == "pass" || f["outcome"] == "skip"),
        "{v:#}"
    );
    assert_eq!(findings.iter().filter(|f| f["outcome"] == "pass").count(), 8);
    let lgc = fixture("../h200x1/doctor-lgc300-busy.txt");
    assert!(
        lgc.contains(
            "FAIL local-0 clocks: GPU 0: busy at 345 of 1980 MHz with no throttle reason: clocks locked"
        ),
        "{lgc}"
    );
    // NVIDIA's images set NCCL_VERSION as a label: not a setting to warn of.
    let mut s = h200_sections();
    set(&mut s, "nccl-env", "env NCCL_VERSION=2.28.3-1\n".into());
    let f = judge_node(&ctx(1), "h200", &s, 0, None);
    assert_eq!(by_check(&f, "nccl-env").outcome, Outcome::Pass);
}

#[test]
fn clocks_locked_low_while_busy_are_named() {
    let mut s = h200_sections();
    set(&mut s, "gpus", fixture("../h200x1/query-gpu-busy-lgc300.csv"));
    let f = judge_node(&ctx(1), "h200", &s, 0, None);
    let c = by_check(&f, "clocks");
    assert_eq!(c.outcome, Outcome::Fail);
    assert_eq!(
        c.what,
        "GPU 0: busy at 345 of 1980 MHz with no throttle reason: clocks locked"
    );
    assert!(c.fix.contains("nvidia-smi -rgc"));
    set(&mut s, "gpus", fixture("../h200x1/query-gpu-after-rgc.csv"));
    let f = judge_node(&ctx(1), "h200", &s, 0, None);
    assert_eq!(
        by_check(&f, "clocks").outcome,
        Outcome::Warn,
        "SW thermal slowdown"
    );
}

/// The doctor checks a GKE fleet's pods against the pod profile, a VM fleet's nodes
/// against the VM profile (it used the VM profile for every family).
#[test]
fn the_nccl_environment_checked_is_the_familys() {
    use crate::fleet::BackendKind;
    let dir = tempfile::tempdir().unwrap();
    let asked = || Asked {
        flavour: Some(GpuDirect::Tcpxo),
        ..Asked::default()
    };
    let (vm, _) = context_for(dir.path(), "mega", "mega", BackendKind::Gcp, 2, asked());
    let (pod, _) = context_for(dir.path(), "mega", "mega", BackendKind::Gke, 2, asked());
    assert!(vm.env.join("\n").contains("enp0s12"), "{:?}", vm.env);
    let pod_env = pod.env.join("\n");
    assert!(
        !pod_env.contains("enp") && !pod_env.contains("/var/lib/tcpxo"),
        "{pod_env}"
    );
    assert_eq!(pod.env, crate::nccl::profile::pod_env(GpuDirect::Tcpxo));
}

#[test]
fn problems_rank_a_cause_by_the_worst_that_follows_from_it() {
    let f = |node: &str, check: &'static str, outcome: Outcome, what: &str| {
        Finding::new(check, node, outcome, what)
    };
    let mut r = Report::default();
    r.add(vec![
        f(
            "n1",
            "reach",
            Outcome::Fail,
            "n1 ↔ n2 on eth2 lossy: 9 of 400 probes lost",
        ),
        f(
            "n0",
            "nics",
            Outcome::Warn,
            "eth1 MTU 1400 where 2 other nodes have 1500",
        ),
        f("n0", "reach", Outcome::Fail, "eth1 unreachable: no reply"),
        f("n2", "sysctl", Outcome::Warn, "small TCP buffers"),
    ]);
    r.link_causes();
    let order: Vec<(String, usize)> = r
        .problems()
        .iter()
        .map(|(c, after)| (c.key(), after.len()))
        .collect();
    assert_eq!(
        order,
        vec![
            ("n0 nics".to_string(), 1),
            ("n1 reach".to_string(), 0),
            ("n2 sysctl".to_string(), 0)
        ]
    );
}

#[test]
fn the_nics_probed_are_the_ones_nccl_uses() {
    let mut s = script::Sections::default();
    set(
        &mut s,
        "nics",
        "lo unknown 65536 - -\nenp0s12 up 1460 - -\nenp6s0 up 8244 - -\ndocker0 up 1500 - -\nlab0 up 1500 - - bridge\n".into(),
    );
    set(
        &mut s,
        "addrs",
        "1: lo    inet 127.0.0.1/8 scope host lo\n2: enp0s12    inet 10.0.0.2/24 scope global enp0s12\n\
         3: enp6s0    inet 10.1.0.2/24 scope global enp6s0\n4: docker0    inet 172.17.0.1/16 scope global docker0\n\
         5: lab0    inet 10.77.0.1/24 scope global lab0\n"
            .into(),
    );
    set(&mut s, "route", "default via 10.0.0.1 dev enp0s12\n".into());
    let names = |f: &Facts, c: &Context| -> Vec<String> {
        f.probe_nics(c).0.iter().map(|n| n.name.clone()).collect()
    };
    let f = facts_of(&s);
    // The bridge is no data NIC, whatever its name.
    assert_eq!(names(&f, &ctx(2)), ["enp6s0"]);
    // TCPX's NCCL_SOCKET_IFNAME is its control NIC, for the bootstrap: the data NICs are
    // probed.
    let mut tcpx = ctx(2);
    tcpx.flavour = GpuDirect::Tcpx;
    tcpx.env = crate::nccl::profile::env_lines(crate::fleet::BackendKind::Ssh, GpuDirect::Tcpx);
    assert_eq!(names(&f, &tcpx), ["enp6s0"]);
    // Profile none with NCCL_SOCKET_IFNAME in the node's nccl.conf: those.
    let mut with = s.clone();
    set(
        &mut with,
        "nccl-env",
        "/etc/nccl.conf NCCL_SOCKET_IFNAME=enp0\n".into(),
    );
    assert_eq!(names(&facts_of(&with), &ctx(2)), ["enp0s12"]);
    // One NIC (no data NIC): what NCCL picks, all but lo and docker*.
    let mut one = s.clone();
    set(
        &mut one,
        "nics",
        "lo unknown 65536 - -\nenp0s12 up 1460 - -\ndocker0 up 1500 - -\n".into(),
    );
    assert_eq!(names(&facts_of(&one), &ctx(2)), ["enp0s12"]);
    assert!(net::nccl_if_match("^docker,lo", "eth0") && !net::nccl_if_match("^docker,lo", "docker0"));
    assert!(net::nccl_if_match("=eth0", "eth0") && !net::nccl_if_match("=eth0", "eth01"));
    assert!(net::nccl_if_match("eth", "eth01") && !net::nccl_if_match("^=eth0", "eth0"));
}
