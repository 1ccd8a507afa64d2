//! Job files (dstack's task format plus flightdeck's fields).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = flightdeck::jobs::spec::parse(std::path::Path::new("/nonexistent/j.yaml"), text, &|_| None);
    }
});
