//! nccl-tests output and NCCL debug lines, fed in chunks split where the input says.
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
    }
});
