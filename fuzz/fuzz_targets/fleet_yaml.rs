//! Fleet files (dstack's format plus flightdeck's network block).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(f) = flightdeck::fleet::parse(std::path::Path::new("f.yaml"), text) {
            let _ = f.node_targets();
        }
    }
});
