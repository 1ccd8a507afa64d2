//! The node sampler's records: /proc/net/dev, RDMA counters, nvidia-smi CSV and dmon lines.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut p = flightdeck::telemetry::parse::RecordParser::new();
    let mut out = vec![];
    for chunk in data.chunks(97) {
        p.push(chunk, &mut out);
        out.clear();
    }
    p.finish(&mut out);
    let text = String::from_utf8_lossy(data);
    let _ = flightdeck::telemetry::parse::parse_net_dev(&text);
    for line in text.lines() {
        let _ = flightdeck::telemetry::parse::parse_ib_line(line);
        let _ =
            flightdeck::telemetry::parse::parse_gpu_line(line, &["index", "utilization.gpu", "power.draw"]);
    }
});
