//! The offers filter language (`gpu=H100 gpus>=8 spot<25 ...`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = flightdeck::catalog::query::Query::parse(text);
    }
});
