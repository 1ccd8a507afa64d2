//! What the doctor reads back from nodes: the node script's sections (nvidia-smi's
//! query, topology and link outputs, the kernel log, /sys NICs, RDMA ports, sysctls, NCCL
//! variables, versions, the pre-flight's markers) judged as a node and against a second
//! node, and the probe rounds' ping output judged as a matrix.
#![no_main]
use flightdeck::doctor::{self, net, script, Context, Facts, Seen};
use flightdeck::nccl::GpuDirect;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let sections = script::parse(&text);
    // The streaming reader the doctor keeps a node's output in (bounded per section and
    // per node), fed in pieces cut at the input's own newlines.
    let mut reader = script::Reader::default();
    for piece in text.split_inclusive('\n') {
        reader.push(piece);
    }
    let (streamed, _cuts) = reader.finish();
    let _ = streamed.get("smi");
    let ctx = Context {
        machine_type: Some("a3-megagpu-8g".into()),
        flavour: GpuDirect::Tcpxo,
        env: vec![],
        nodes: 2,
        only: vec![],
    };
    let findings = doctor::judge_node(&ctx, "n0", &sections, 0, None);
    assert!(!findings.is_empty());
    let facts = Facts::read(&sections);
    let other = Facts::default();
    let seen = [
        Seen { node: "n0", facts: &facts, arrived_ns: Some(1), clock: None },
        Seen { node: "n1", facts: &other, arrived_ns: None, clock: None },
    ];
    let _ = doctor::judge_fleet(&ctx, &seen);
    let _ = doctor::gpu::parse_topo(&text);
    let _ = doctor::gpu::parse_nvlink(&text);
    let _ = doctor::gpu::parse_xids(&text);
    let probes: Vec<net::Probe> = net::parse_probes(&text)
        .into_iter()
        .enumerate()
        .map(|(i, (round, nic, sent, received, avg_ms, error))| net::Probe {
            from: i % 3,
            to: (i + round) % 3,
            nic,
            sent,
            received,
            avg_ms,
            error,
        })
        .filter(|p| p.from != p.to)
        .collect();
    let names = vec!["n0".to_string(), "n1".to_string(), "n2".to_string()];
    let mut report = doctor::Report::default();
    report.add(doctor::judge_reach(&names, &probes));
    report.add(findings);
    report.link_causes();
    let _ = report.summary_lines();
});
