//! nccl-tests output, NCCL debug lines and PyTorch logs, fed in chunks split where the
//! input says; then everything `nccl parse` and the run follower make of them.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut p = flightdeck::nccl::Parser::new();
    // The first byte picks the chunk size: lines split anywhere, even inside UTF-8.
    let (size, rest) = match data.split_first() {
        Some((s, r)) => (usize::from(*s).max(1), r),
        None => (1, data),
    };
    for chunk in rest.chunks(size) {
        p.push_bytes(chunk);
    }
    p.finish();
    for r in p.reports() {
        let _ = r.ranks();
        assert!(r.rows.len() <= flightdeck::nccl::parse::MAX_ROWS);
        assert!(r.hosts.len() <= flightdeck::nccl::parse::MAX_HOSTS);
        // What `nccl parse` makes of a report: the reading of a crash, the collective
        // read from the table, the machine of the rank list, the JSON document.
        let _ = r.unfinished();
        let _ = flightdeck::nccl::parse::infer_collective(&r);
        let _ = flightdeck::nccl::expect::machine_from_devices(&r);
        let _ = serde_json::to_string(&r.document()).unwrap();
    }
    // The run follower's cause finder, line by line.
    let text = String::from_utf8_lossy(rest);
    let _ = flightdeck::nccl::cause::failure_cause(text.lines());
});
