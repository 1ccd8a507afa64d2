//! NIC telemetry end to end: the sampler over SSH on the testbed (tests/support/testbed.rs)
//! against iperf3's own figures, a throttled NIC flagged by `flightdeck nics`, an
//! unreachable node reported, and the local backend with the nvidia-smi test double.
//! Traffic runs only between testbed addresses (10.88.0.0/16), each flow bounded in time.

mod support;

use flightdeck::fleet::{self, NodeTarget};
use flightdeck::reach::Reach;
use flightdeck::ssh::client::{NoPrompt, SshOptions};
use flightdeck::ssh::known_hosts::HostKeyPolicy;
use flightdeck::ssh::pool::{Pool, Resolver};
use flightdeck::telemetry::service::{self, Options, TelemetryEvent};
use flightdeck::telemetry::{Device, Interval, Metric, SeriesKey, Telemetry};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::testbed::Testbed;

fn flightdeck(home: &Path, args: &[&str], path_prefix: Option<&Path>) -> Output {
    let mut path = std::env::var("PATH").unwrap_or_default();
    if let Some(p) = path_prefix {
        path = format!("{}:{path}", p.display());
    }
    Command::new(env!("CARGO_BIN_EXE_flightdeck"))
        .args(args)
        .env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .stdin(Stdio::null())
        .output()
        .expect("run flightdeck")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn fake_gpus() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/telemetry/bin")
}

fn unix_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

fn iperf3_found() -> bool {
    let found = Command::new("sh")
        .args(["-c", "command -v iperf3 && command -v tc"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !found {
        support::cannot_run("iperf3 or tc not found");
    }
    found
}

/// A process in node `i`'s namespace, killed (by its pid) when dropped.
struct InNs(Child);

impl Drop for InNs {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_in(tb: &Testbed, i: usize, cmd: &[&str]) -> InNs {
    let mut full = vec!["netns", "exec", tb.nodes[i].ns.as_str()];
    full.extend(cmd);
    InNs(
        Command::new("ip")
            .args(&full)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn in a namespace"),
    )
}

/// Wait until node `i` listens on TCP `port`.
fn wait_listening(tb: &Testbed, i: usize, port: u16) {
    let filter = format!("sport = :{port}");
    for _ in 0..200 {
        let ss = tb.node_run(i, &["ss", "-Hltn", &filter]).unwrap_or_default();
        if !ss.trim().is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("node {i} does not listen on {port}");
}

/// Sampler processes (their arguments name them) in node `i`'s network namespace.
fn samplers_left(tb: &Testbed, i: usize) -> usize {
    let out = Command::new("ip")
        .args(["netns", "pids", &tb.nodes[i].ns])
        .output()
        .unwrap();
    text(&out.stdout)
        .split_whitespace()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains("flightdeck-sampler"))
                .unwrap_or(false)
        })
        .count()
}

/// The local backend samples this machine; the nvidia-smi double stands in for GPUs.
#[test]
fn local_fleet_with_recorded_gpus_as_json() {
    let home = tempfile::tempdir().unwrap();
    let local = Path::new(env!("CARGO_MANIFEST_DIR")).join("fleets/local.yaml");
    let out = flightdeck(
        home.path(),
        &[
            "nics",
            local.to_str().unwrap(),
            "--interval",
            "200ms",
            "--samples",
            "3",
            "--json",
            "--gpu-links",
        ],
        Some(&fake_gpus()),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["fleet"], "local");
    assert_eq!(doc["interval_ms"], 200);
    let node = &doc["nodes"][0];
    assert_eq!(node["node"], "local-0");
    assert_eq!(node["error"], serde_json::Value::Null);
    assert_eq!(node["records"], 4, "3 samples need 4 readings");
    let nics = node["nics"].as_array().unwrap();
    let lo = nics.iter().find(|n| n["name"] == "lo").expect("lo is listed");
    assert_eq!(lo["role"], "other");
    assert!(lo["rx_bps"]["avg"].as_f64().is_some());
    let gpus = node["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2, "{gpus:?}");
    assert_eq!(gpus[1]["index"], 1);
    assert_eq!(gpus[0]["name"], "NVIDIA H200");
    assert_eq!(gpus[0]["utilization_pct"]["peak"], 11.0);
    assert_eq!(gpus[0]["memory_total_mib"], 143771.0);
    assert_eq!(gpus[0]["pcie_rx_bps"], 14133.0 * 8e6);
    assert!(doc["flags"].as_array().unwrap().is_empty());

    // Usage errors.
    for bad in [
        &["--interval", "20s"][..],
        &["--interval", "fast"],
        &["--samples", "0"],
    ] {
        let mut args = vec!["nics", local.to_str().unwrap()];
        args.extend(bad);
        let out = flightdeck(home.path(), &args, None);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", text(&out.stderr));
    }
    // The table.
    let out = flightdeck(
        home.path(),
        &[
            "nics",
            local.to_str().unwrap(),
            "--interval",
            "100ms",
            "--samples",
            "1",
        ],
        None,
    );
    assert!(out.status.success());
    let table = text(&out.stdout);
    assert!(table.contains("NODE") && table.contains("local-0  lo"), "{table}");
}

fn ssh_transport(tb: &Testbed) -> (Vec<NodeTarget>, Reach) {
    let nodes = fleet::parse(Path::new("tb.yaml"), &tb.fleet_yaml("tb"))
        .unwrap()
        .node_targets();
    let pool = Pool::new(SshOptions {
        known_hosts: vec![tb.known_hosts.clone()],
        policy: HostKeyPolicy::Refuse,
        prompter: Arc::new(NoPrompt),
        use_agent: false,
        agent_socket: None,
        keys: Default::default(),
    });
    let resolver = Arc::new(Resolver::new(tb.dir.path()));
    (nodes, Reach::new(pool, resolver))
}

/// iperf3 over eth2 between two nodes for 5 s: flightdeck's rate on eth2 agrees with
/// iperf3's within 5%, in both directions; eth1 and eth3 stay near zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iperf3_bitrate_matches_the_measured_rate() {
    if !iperf3_found() {
        return;
    }
    let Some(tb) = Testbed::new(2, 3) else { return };
    let (nodes, transport) = ssh_transport(&tb);
    let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
    let samplers = service::spawn(
        transport,
        nodes,
        Options::once(Interval::from_millis(250).unwrap()),
        tx,
    );
    let collector = tokio::spawn(async move {
        let mut store = Telemetry::new(1000);
        let mut errors = vec![];
        while let Some(ev) = rx.recv().await {
            match ev {
                TelemetryEvent::Hello { node, hello } => store.hello(node, hello),
                TelemetryEvent::Record {
                    node,
                    record,
                    arrived_unix_ns,
                } => {
                    store.ingest(node, &record, arrived_unix_ns);
                }
                TelemetryEvent::Down { node, error, .. } => errors.push((node, error)),
                TelemetryEvent::Stderr { .. } => {}
            }
        }
        (store, errors)
    });
    let server = spawn_in(&tb, 1, &["iperf3", "-s", "-1", "-B", "10.88.2.2", "-p", "5201"]);
    wait_listening(&tb, 1, 5201);
    // One sampler shell per node once it runs (a short-lived child of its start-up, such
    // as the `rm` of a stale directory, carries the name too, so poll for a while).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while samplers_left(&tb, 0) != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "one sampler shell per node: {}",
            samplers_left(&tb, 0)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let t0 = unix_ms();
    let client = tokio::task::spawn_blocking(move || {
        let out = Command::new("ip")
            .args(["netns", "exec", &tb.nodes[0].ns])
            .args([
                "iperf3",
                "-c",
                "10.88.2.2",
                "-B",
                "10.88.2.1",
                "-p",
                "5201",
                "-t",
                "5",
                "-b",
                "400M",
                "--json",
            ])
            .output()
            .unwrap();
        (tb, out)
    });
    let (tb, out) = client.await.unwrap();
    let t1 = unix_ms();
    assert!(out.status.success(), "iperf3: {}", text(&out.stderr));
    drop(server);
    tokio::time::sleep(Duration::from_millis(600)).await;
    drop(samplers);
    let (store, errors) = collector.await.unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    // The channels are gone: each node's loop ends at its next write.
    for _ in 0..60 {
        if samplers_left(&tb, 0) + samplers_left(&tb, 1) == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        samplers_left(&tb, 0) + samplers_left(&tb, 1),
        0,
        "samplers left behind"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sent = report["end"]["sum_sent"]["bits_per_second"].as_f64().unwrap();
    let received = report["end"]["sum_received"]["bits_per_second"].as_f64().unwrap();
    // Samples whose interval lies inside the run, half a second in from either end.
    let from = store.store_ms(t0 + 500).unwrap();
    let to = store.store_ms(t1 - 500).unwrap();
    let rate = |node: usize, nic: &str, m: Metric| {
        let st = store
            .node(node)
            .unwrap()
            .series(&SeriesKey::net(Device::nic(nic), m))
            .unwrap()
            .stats(from, to);
        assert!(st.known >= 8, "{nic} of node {node}: {st:?}");
        st.avg
    };
    let tx0 = rate(0, "eth2", Metric::Tx);
    let rx1 = rate(1, "eth2", Metric::Rx);
    eprintln!(
        "iperf3 sent {:.1} Mbit/s, received {:.1}; flightdeck: node0 eth2 tx {:.1}, node1 eth2 rx {:.1}",
        sent / 1e6,
        received / 1e6,
        tx0 / 1e6,
        rx1 / 1e6
    );
    assert!(sent > 50e6, "iperf3 moved too little to compare: {sent}");
    assert!((tx0 / sent - 1.0).abs() < 0.05, "tx {tx0} vs iperf3 {sent}");
    assert!(
        (rx1 / received - 1.0).abs() < 0.05,
        "rx {rx1} vs iperf3 {received}"
    );
    for node in 0..2 {
        for nic in ["eth1", "eth3"] {
            for m in [Metric::Rx, Metric::Tx] {
                let r = rate(node, nic, m);
                assert!(r < 0.005 * sent, "node {node} {nic} {m:?}: {r} bit/s");
            }
        }
    }
}

/// `flightdeck nics --json` over the testbed's nodes: 8 samples at 500 ms.
/// Wait (at most 20 s) until every node's `nic` has sent at least 64 KiB more than when
/// this was called: its traffic has begun.
fn wait_sending(tb: &Testbed, nic: &str) {
    let path = format!("/sys/class/net/{nic}/statistics/tx_bytes");
    let sent = |i: usize| -> u64 {
        tb.node_run(i, &["cat", &path])
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0)
    };
    let start: Vec<u64> = (0..tb.nodes.len()).map(sent).collect();
    let t = std::time::Instant::now();
    while (0..tb.nodes.len()).any(|i| sent(i) < start[i] + 64 * 1024) {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "not every node's {nic} began sending"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn sample_testbed(tb: &Testbed) -> serde_json::Value {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("tb.yaml");
    std::fs::write(&file, tb.fleet_yaml("tb")).unwrap();
    let out = flightdeck(
        home.path(),
        &[
            "nics",
            file.to_str().unwrap(),
            "--interval",
            "500ms",
            "--samples",
            "8",
            "--json",
            "--accept-new-host-keys",
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every node sends to every other on both rails at 50 Mbit/s; node 1's eth2 is
/// throttled to 5 Mbit/s with tbf. `flightdeck nics --json` flags node 1's eth2.
#[test]
fn a_throttled_nic_is_flagged() {
    if !iperf3_found() {
        return;
    }
    let Some(tb) = Testbed::new(4, 2) else { return };
    tb.node_run(
        1,
        &[
            "tc", "qdisc", "add", "dev", "eth2", "root", "tbf", "rate", "5mbit", "burst", "32kbit",
            "latency", "400ms",
        ],
    )
    .expect("tc tbf");
    let n = tb.nodes.len();
    let mut servers = vec![];
    let mut flows = vec![];
    for dst in 0..n {
        for src in (0..n).filter(|&s| s != dst) {
            for rail in 1..=2 {
                let port = (5300 + src * 4 + rail).to_string();
                let addr = tb.nodes[dst].data_addrs[rail - 1].clone();
                servers.push(spawn_in(
                    &tb,
                    dst,
                    &["iperf3", "-s", "-1", "-B", &addr, "-p", &port],
                ));
                flows.push((src, dst, addr, tb.nodes[src].data_addrs[rail - 1].clone(), port));
            }
        }
    }
    for (_, dst, _, _, port) in &flows {
        wait_listening(&tb, *dst, port.parse().unwrap());
    }
    let clients: Vec<InNs> = flows
        .iter()
        .map(|(src, _, to, from, port)| {
            spawn_in(
                &tb,
                *src,
                &["iperf3", "-c", to, "-B", from, "-p", port, "-t", "9", "-b", "50M"],
            )
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let doc = sample_testbed(&tb);
    drop(clients);
    drop(servers);
    let flags = doc["flags"].as_array().unwrap();
    let summary: Vec<String> = flags
        .iter()
        .map(|f| format!("{} {} {}", f["node"], f["nic"], f["direction"]))
        .collect();
    eprintln!("flags: {summary:?}");
    for f in flags {
        eprintln!("  {}", f["message"]);
    }
    assert!(
        flags
            .iter()
            .any(|f| f["node"] == "tb-1" && f["nic"] == "eth2" && f["direction"] == "tx"),
        "{summary:?}\n{}",
        serde_json::to_string_pretty(&doc).unwrap()
    );
    assert!(
        flags.iter().all(|f| f["node"] == "tb-1"),
        "only the throttled node is flagged: {summary:?}"
    );
    // The unthrottled data NICs carried their flows.
    for node in doc["nodes"].as_array().unwrap() {
        let eth1 = node["nics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == "eth1")
            .unwrap();
        assert_eq!(eth1["role"], "data");
        let avg = eth1["tx_bps"]["avg"].as_f64().unwrap();
        assert!(avg > 100e6, "{} eth1 tx {avg}", node["node"]);
    }
}

/// A node whose sshd is down is reported with its error; the others are still sampled.
#[test]
fn an_unreachable_node_is_reported_not_fatal() {
    let Some(mut tb) = Testbed::new(3, 1) else { return };
    tb.kill_sshd(2);
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("tb.yaml");
    std::fs::write(&file, tb.fleet_yaml("tb")).unwrap();
    let out = flightdeck(
        home.path(),
        &[
            "nics",
            file.to_str().unwrap(),
            "--interval",
            "200ms",
            "--samples",
            "2",
            "--json",
            "--accept-new-host-keys",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let nodes = doc["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3);
    for node in &nodes[..2] {
        assert_eq!(node["error"], serde_json::Value::Null, "{node}");
        assert_eq!(node["records"], 3);
        let names: Vec<&str> = node["nics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["eth0", "eth1", "lo"]);
        let roles: Vec<&str> = node["nics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["control", "data", "other"]);
    }
    let down = &nodes[2];
    assert_eq!(down["node"], "tb-2");
    let err = down["error"].as_str().expect("an error for tb-2");
    assert!(err.contains("10.88.0.3"), "{err}");
    assert!(down["nics"].as_array().unwrap().is_empty());
}

/// A ring on eth1 (node i sends to node i+1 at 50 Mbit/s) with node 1's eth1 throttled
/// to 5 Mbit/s: node 1's eth1 tx is flagged, and so is node 2's eth1 rx, which waits on
/// node 1; `nics --json` marks node 2's flag as following from node 1's (by the TCP
/// pairs the samplers saw), and its message says so.
#[test]
fn a_starved_receiver_follows_from_the_throttled_sender() {
    if !iperf3_found() {
        return;
    }
    let Some(tb) = Testbed::new(4, 2) else { return };
    tb.node_run(
        1,
        &[
            "tc", "qdisc", "add", "dev", "eth1", "root", "tbf", "rate", "5mbit", "burst", "32kbit",
            "latency", "400ms",
        ],
    )
    .expect("tc tbf");
    let n = tb.nodes.len();
    let mut servers = vec![];
    for dst in 0..n {
        let addr = tb.nodes[dst].data_addrs[0].clone();
        servers.push(spawn_in(
            &tb,
            dst,
            &["iperf3", "-s", "-1", "-B", &addr, "-p", "5400"],
        ));
    }
    for dst in 0..n {
        wait_listening(&tb, dst, 5400);
    }
    let clients: Vec<InNs> = (0..n)
        .map(|src| {
            let to = tb.nodes[(src + 1) % n].data_addrs[0].clone();
            let from = tb.nodes[src].data_addrs[0].clone();
            spawn_in(
                &tb,
                src,
                &[
                    "iperf3", "-c", &to, "-B", &from, "-p", "5400", "-t", "9", "-b", "50M",
                ],
            )
        })
        .collect();
    // Sampled once every client is sending (a loaded machine starts them late), not
    // after a guess at how long that takes.
    wait_sending(&tb, "eth1");
    std::thread::sleep(Duration::from_millis(500));
    let doc = sample_testbed(&tb);
    drop(clients);
    drop(servers);
    let flags = doc["flags"].as_array().unwrap();
    for f in flags {
        eprintln!("  {}", f["message"]);
    }
    let find = |node: &str, dir: &str| {
        flags
            .iter()
            .find(|f| f["node"] == node && f["nic"] == "eth1" && f["direction"] == dir)
            .unwrap_or_else(|| {
                panic!(
                    "no {node} eth1 {dir} flag: {}",
                    serde_json::to_string_pretty(flags).unwrap()
                )
            })
    };
    let cause = find("tb-1", "tx");
    assert!(cause["follows"].is_null(), "{cause}");
    let effect = find("tb-2", "rx");
    assert_eq!(effect["follows"]["node"], "tb-1", "{effect}");
    assert_eq!(effect["follows"]["nic"], "eth1");
    assert_eq!(effect["follows"]["direction"], "tx");
    assert!(effect["follows"]["share"].as_f64().unwrap() > 0.9, "{effect}");
    assert!(
        effect["message"]
            .as_str()
            .unwrap()
            .contains("follows from tb-1 eth1 tx"),
        "{effect}"
    );
}
