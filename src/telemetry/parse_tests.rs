//! The parser on recorded sampler output (tests/fixtures/telemetry/README.md says where
//! each file comes from).

use super::*;

const TESTBED: &str = include_str!("../../tests/fixtures/telemetry/sampler-testbed-node.txt");
const H200: &str = include_str!("../../tests/fixtures/telemetry/sampler-h200.txt");
const RDMA: &str = include_str!("../../tests/fixtures/telemetry/sampler-rdma-node.txt");
const VM_NET_DEV: &str = include_str!("../../tests/fixtures/telemetry/proc-net-dev-vm.txt");

/// Everything the parser makes of `text` fed `chunk` bytes at a time.
fn items(text: &str, chunk: usize) -> (Vec<Item>, RecordParser) {
    let mut p = RecordParser::new();
    let mut out = Vec::new();
    for c in text.as_bytes().chunks(chunk.max(1)) {
        p.push(c, &mut out);
    }
    p.finish(&mut out);
    (out, p)
}

fn records(items: &[Item]) -> Vec<&Record> {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Record(r) => Some(r),
            _ => None,
        })
        .collect()
}

fn hello(items: &[Item]) -> &Hello {
    items
        .iter()
        .find_map(|i| match i {
            Item::Hello(h) => Some(h),
            _ => None,
        })
        .expect("a hello")
}

#[test]
fn proc_net_dev_of_this_vm() {
    let nics = parse_net_dev(VM_NET_DEV);
    let names: Vec<&str> = nics.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["lo", "ifb0", "ifb1", "eth0"]);
    let eth0 = &nics[3];
    assert_eq!(
        (eth0.rx_bytes, eth0.rx_packets, eth0.tx_bytes, eth0.tx_packets),
        (228730773, 12614, 789184, 7634)
    );
}

#[test]
fn net_dev_lines() {
    type Case<'a> = (&'a str, Option<Option<(&'a str, u64, u64)>>);
    let cases: &[Case] = &[
        (
            "Inter-|   Receive                                                |  Transmit",
            Some(None),
        ),
        (
            "  eth1:    9832     148    0    0    0     0          0         0 12603457     307    0    0    0     0       0          0",
            Some(Some(("eth1", 9832, 12603457))),
        ),
        // Old kernels print no space after the colon once the number is wide.
        (
            "  eth2:18446744073709551416        3        0        0        0        0        0        0      426        5        0        0        0        0        0        0",
            Some(Some(("eth2", 18446744073709551416, 426))),
        ),
        ("  eth1: 1 2 3", None),
        ("  eth1: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17", None),
        ("  eth1: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 x", None),
        ("no colon here", None),
        (": 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16", None),
    ];
    for (line, want) in cases {
        let got = parse_net_dev_line(line).map(|o| o.map(|n| (n.name.clone(), n.rx_bytes, n.tx_bytes)));
        let want = want.map(|o| o.map(|(n, r, t)| (n.to_string(), r, t)));
        assert_eq!(got, want, "{line}");
    }
}

#[test]
fn times_in_every_clock() {
    type Case<'a> = (&'a str, Option<ClockKind>, Option<(i64, ClockKind)>);
    let cases: &[Case] = &[
        (
            "1795314398974710372",
            None,
            Some((1795314398974710372, ClockKind::Unix)),
        ),
        (
            "1795315483.733265",
            None,
            Some((1795315483733265000, ClockKind::Unix)),
        ),
        (
            "1795315483,733265",
            None,
            Some((1795315483733265000, ClockKind::Unix)),
        ),
        ("2475.87", None, Some((2475870000000, ClockKind::Uptime))),
        (
            "2475.87",
            Some(ClockKind::Uptime),
            Some((2475870000000, ClockKind::Uptime)),
        ),
        ("", None, None),
        ("12a", None, None),
        ("1.", None, None),
        ("1.1234567890", None, None),
        ("-5", None, None),
    ];
    for (w, clock, want) in cases {
        assert_eq!(parse_time(w, *clock), *want, "{w}");
    }
}

/// The recorded stream of a testbed-like node: the same items however it is chunked.
#[test]
fn testbed_stream_in_any_chunking() {
    let (whole, p) = items(TESTBED, TESTBED.len());
    assert_eq!(p.dropped_records(), 0);
    assert_eq!(p.ignored_lines(), 0);
    let h = hello(&whole);
    assert_eq!((h.version, h.interval_ms, h.clock), (1, 500, ClockKind::Unix));
    assert_eq!(h.default_route, None);
    assert!(h.gpu_fields.is_empty() && h.gpus.is_empty());
    let recs = records(&whole);
    assert_eq!(recs.len(), 14);
    assert!(recs.iter().enumerate().all(|(i, r)| r.seq == i as u64 + 1));
    assert!(recs.windows(2).all(|w| w[1].t_ns > w[0].t_ns));
    let names = |r: &Record| r.nics.iter().map(|n| n.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(recs[0]), ["lo", "eth0", "eth1", "eth2"]);
    assert_eq!(names(recs[8]), ["lo", "eth0", "eth1"], "eth2 deleted");
    assert_eq!(names(recs[11]), ["lo", "eth0", "eth1", "eth2"], "eth2 back");
    assert!(recs
        .iter()
        .all(|r| r.rdma.is_empty() && r.gpus.is_empty() && r.bad_lines == 0));
    for chunk in [1, 2, 7, 100, 4096] {
        assert_eq!(items(TESTBED, chunk).0, whole, "chunks of {chunk}");
    }
}

/// Recorded on an H200 host under bash (microsecond clock), with link figures.
#[test]
fn gpu_stream_of_an_h200() {
    let (its, p) = items(H200, 333);
    assert_eq!(p.dropped_records(), 0);
    let h = hello(&its);
    assert_eq!(h.clock, ClockKind::Unix);
    assert_eq!(h.gpu_fields.len(), 9);
    assert_eq!(
        h.gpus,
        vec![GpuInfo {
            index: 0,
            name: "NVIDIA H200".into(),
            uuid: "GPU-9fb12d3a-92ce-068a-58c5-7c2f58de6be6".into(),
            memory_total_mib: Some(143771.0),
            power_limit_w: Some(700.0),
        }]
    );
    let recs = records(&its);
    assert!(recs.len() >= 12, "{}", recs.len());
    assert_eq!(recs[0].gpu_batch, None, "nvidia-smi had not answered yet");
    assert!(recs[0].gpus.is_empty());
    let r = recs[5];
    assert_eq!(r.t_ns, 1795315488736202000);
    assert_eq!(r.gpu_batch, Some(5));
    assert_eq!(
        r.gpus,
        vec![GpuReading {
            index: 0,
            utilization_pct: Some(11.0),
            memory_utilization_pct: Some(0.0),
            memory_used_mib: Some(1523.0),
            memory_total_mib: Some(143771.0),
            power_w: Some(131.99),
            temperature_c: Some(40.0),
            memory_temperature_c: Some(40.0),
            sm_clock_mhz: Some(1980.0),
        }]
    );
    assert_eq!(r.link_batch, Some(5));
    assert_eq!(
        recs[4].links,
        vec![LinkReading {
            index: 0,
            pcie_rx_bps: Some(14133.0 * 8e6),
            pcie_tx_bps: Some(1513.0 * 8e6),
            nvlink_rx_bps: Some(0.0),
            nvlink_tx_bps: Some(0.0),
        }]
    );
    // Before GPM had a figure, dmon printed `-` for NVLink.
    assert_eq!(recs[1].links[0].nvlink_rx_bps, None);
    assert!(recs.iter().all(|r| r.bad_lines == 0));
}

#[test]
fn gpu_lines_with_missing_fields() {
    let fields = DEFAULT_GPU_FIELDS;
    let g = parse_gpu_line(
        "3, [N/A], 0, 1523, 143771, [Not Supported], 40, N/A, 1980",
        fields,
    )
    .unwrap();
    assert_eq!(g.index, 3);
    assert_eq!(g.utilization_pct, None);
    assert_eq!(g.power_w, None);
    assert_eq!(g.memory_temperature_c, None);
    assert_eq!(g.sm_clock_mhz, Some(1980.0));
    // The field list of the first probe (recorded with name and uuid in it).
    let recorded = "0, GPU-f6590450-37a6-04a6-b615-3fd4f2147dec, NVIDIA H200, 0, 0, 0, 143771, 82.02, 700.00, 39, 41, 345, 3201, 5, 16, 0x0000000000000001";
    let f = [
        "index",
        "uuid",
        "name",
        "utilization.gpu",
        "utilization.memory",
        "memory.used",
        "memory.total",
        "power.draw",
        "power.limit",
        "temperature.gpu",
        "temperature.memory",
        "clocks.sm",
        "clocks.mem",
        "pcie.link.gen.current",
        "pcie.link.width.current",
        "clocks_event_reasons.active",
    ];
    let g = parse_gpu_line(recorded, &f).unwrap();
    assert_eq!(
        (g.power_w, g.sm_clock_mhz, g.temperature_c),
        (Some(82.02), Some(345.0), Some(39.0))
    );
    assert_eq!(parse_gpu_line("0, 1, 2", fields), None, "wrong field count");
    assert_eq!(
        parse_gpu_line("x, 1, 0, 1, 1, 1, 1, 1, 1", fields),
        None,
        "no index"
    );
}

#[test]
fn dmon_lines() {
    let cols: Vec<String> = ["gpu", "rxpci", "txpci"].map(String::from).to_vec();
    let units: Vec<String> = ["Idx", "MB/s", "MB/s"].map(String::from).to_vec();
    let l = parse_dmon_line("    0      9      1 ", &cols, &units).unwrap();
    assert_eq!(
        (l.pcie_rx_bps, l.pcie_tx_bps, l.nvlink_rx_bps),
        (Some(72e6), Some(8e6), None)
    );
    let cols: Vec<String> = ["gpu", "rxpci", "txpci", "nvlrx", "nvltx"]
        .map(String::from)
        .to_vec();
    let units: Vec<String> = ["Idx", "MB/s", "MB/s", "GPM:MiB/s", "GPM:MiB/s"]
        .map(String::from)
        .to_vec();
    let l = parse_dmon_line("    1      0      0          2          - ", &cols, &units).unwrap();
    assert_eq!(l.index, 1);
    assert_eq!(l.nvlink_rx_bps, Some(2.0 * 1048576.0 * 8.0));
    assert_eq!(l.nvlink_tx_bps, None);
    assert_eq!(parse_dmon_line("    1      0", &cols, &units), None);
}

/// Constructed in the sampler's format (no RDMA hardware here), after an a3-ultragpu-8g.
#[test]
fn rdma_ports() {
    let (its, _) = items(RDMA, 64);
    let recs = records(&its);
    assert_eq!(recs.len(), 4);
    let r = &recs[0].rdma;
    assert_eq!(r.len(), 8);
    assert_eq!(
        r[0],
        RdmaCounters {
            device: "mlx5_0".into(),
            port: 1,
            xmit_words: Some(1_000_000_000_000),
            rcv_words: Some(2_000_000_000_000),
            xmit_packets: Some(976_562_500),
            rcv_packets: Some(1_953_125_000),
            netdev: Some("gpu0rdma0".into()),
        }
    );
    assert_eq!(hello(&its).default_route.as_deref(), Some("enp0s19"));
    type Counters = (Option<u64>, Option<u64>, Option<String>);
    let cases: &[(&str, Option<Counters>)] = &[
        ("mlx5_1 1 5 6 - - -", Some((Some(5), None, None))),
        ("mlx5_1 1 - 6", Some((None, None, None))),
        ("mlx5_1 x 5 6", None),
        ("mlx5_1 1 5", None),
        ("mlx5_1 1 5 six", None),
    ];
    for (line, want) in cases {
        let got = parse_ib_line(line).map(|r| (r.xmit_words, r.xmit_packets, r.netdev));
        assert_eq!(got, *want, "{line}");
    }
}

#[test]
fn broken_framing_is_dropped_not_misread() {
    let text = "\
Welcome to a noisy .bashrc
@fd 1 ms=1000 clock=ns host=n route=eth0 gpus=0 gpufields=-
@s 1 1000000000000000000
  eth0: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0
@e 1
@s 2 1000000001000000000
  eth0: 2 2 0 0 0 0 0 0 2 2 0 0 0 0 0 0
@s 3 1000000002000000000
  eth0: 3 3 0 0 0 0 0 0 3 3 0 0 0 0 0 0
garbage inside a record
@zz unknown frame
@e 4
@s 5 1000000004000000000
  eth0: 5 5 0 0 0 0 0 0 5 5 0 0 0 0 0 0
@e 5
@e 6
@s 7 not-a-time
@s 8 1000000006000000000
  eth0: 8 8 0 0 0 0 0 0 8 8 0 0 0 0 0 0";
    let (its, p) = items(text, 5);
    let seqs: Vec<u64> = records(&its).iter().map(|r| r.seq).collect();
    assert_eq!(seqs, [1, 5], "2: no end; 3: wrong end; 7: bad time; 8: cut off");
    assert_eq!(p.dropped_records(), 4);
    assert_eq!(p.ignored_lines(), 2, "the banner and the stray @e 6");
}

#[test]
fn an_overlong_line_is_cut_and_skipped() {
    let mut text = String::from("@fd 1 ms=1000 clock=ns host=n route=- gpus=0 gpufields=-\n@s 1 5\n");
    text.push_str(&"x".repeat(MAX_LINE * 3));
    text.push_str("\n  eth0: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n@e 1\n");
    let (its, _) = items(&text, 10_000);
    let recs = records(&its);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].bad_lines, 1);
    assert_eq!(recs[0].nics.len(), 1);
}

/// Recorded on a host with two H200s while PyTorch copied between them over NVLink.
#[test]
fn nvlink_of_two_h200s() {
    let text = include_str!("../../tests/fixtures/telemetry/sampler-2xh200-nvlink.txt");
    let (its, p) = items(text, 512);
    assert_eq!(p.dropped_records(), 0);
    assert_eq!(hello(&its).gpus.len(), 2);
    let recs = records(&its);
    let r = recs.iter().find(|r| r.seq == 8).unwrap();
    assert_eq!(r.gpus.len(), 2);
    assert_eq!(
        (r.gpus[0].utilization_pct, r.gpus[1].utilization_pct),
        (Some(64.0), Some(33.0))
    );
    let mib = 1024.0 * 1024.0 * 8.0;
    assert_eq!(r.links[0].nvlink_tx_bps, Some(251786.0 * mib));
    assert_eq!(r.links[0].nvlink_rx_bps, Some(0.0));
    assert_eq!(r.links[1].nvlink_rx_bps, Some(251718.0 * mib));
    assert_eq!(r.links[1].pcie_rx_bps, Some(8.0 * 8e6));
}

/// The sampler's own output here with a TCP connection open (iperf3 over this machine's
/// address): its addresses in the hello, its connections in each record.
#[test]
fn addresses_and_tcp_connections() {
    let text = "@fd 1 ms=500 clock=ns host=vm route=eth0 gpus=0 gpufields=-\n@addr lo 127.0.0.1\n@addr eth0 192.0.2.2\n\
                @s 1 1795536747389374801\n    lo:    4193      49    0    0    0     0          0         0     4193      49    0    0    0     0       0          0\n\
                @ib\n@tcp\n192.0.2.2 192.0.2.2 0 1310757\n[::ffff:10.1.0.2] [::ffff:10.1.0.3] 186 4\nnot a flow\n@e 1\n";
    let (items, _) = items(text, 7);
    assert_eq!(
        hello(&items).addrs,
        vec![
            ("lo".to_string(), "127.0.0.1".to_string()),
            ("eth0".into(), "192.0.2.2".into())
        ]
    );
    let r = records(&items)[0];
    assert_eq!(
        r.tcp,
        vec![
            TcpFlow {
                local: "192.0.2.2".into(),
                remote: "192.0.2.2".into(),
                sent: 0,
                received: 1310757
            },
            TcpFlow {
                local: "10.1.0.2".into(),
                remote: "10.1.0.3".into(),
                sent: 186,
                received: 4
            },
        ]
    );
    assert_eq!(r.bad_lines, 1);
}

/// Gke review H6: a pod's NICs come in an `@ns` section, named after the pod, its
/// loopback left out; the section ends at the next frame.
#[test]
fn nics_of_another_namespace_are_named_after_it() {
    let text = "@fd 1 ms=1000 clock=ns host=n route=eth0 gpus=0 gpufields=-\n@s 1 1700000000000000000\n\
Inter-|   Receive |  Transmit\n face |bytes packets|bytes\n\
    lo: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n  eth0: 10 1 0 0 0 0 0 0 20 2 0 0 0 0 0 0\n\
@ns train-0\n    lo: 5 5 0 0 0 0 0 0 5 5 0 0 0 0 0 0\n  eth1: 900 9 0 0 0 0 0 0 800 8 0 0 0 0 0 0\n\
@ns bad/name\n  eth2: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n\
@ib\n@e 1\n";
    let (items, _) = items(text, 7);
    let r = records(&items);
    let names: Vec<&str> = r[0].nics.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["lo", "eth0", "train-0/eth1"]);
    assert_eq!((r[0].nics[2].rx_bytes, r[0].nics[2].tx_bytes), (900, 800));
    assert_eq!(r[0].bad_lines, 1, "the unnamed section's line");
}
