//! Lines from nodes that flightdeck reads back: bootstrap and pre-flight markers, and
//! text made visible for the operator's terminal.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for line in text.lines() {
        let _ = flightdeck::bootstrap::Marker::parse(line);
    }
    let _ = flightdeck::bootstrap::preflight::parse(&text);
    let shown = flightdeck::term::visible::visible(&text);
    assert!(!shown.contains("\u{1b}]"), "an OSC sequence got through");
});
