//! Bytes from a node into a pane's terminal emulator, then drawn.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let screen = flightdeck::term::new_screen(24, 80);
    for chunk in data.chunks(61) {
        screen.write().unwrap().process(chunk);
    }
    let _ = flightdeck::term::snapshot_lines(&screen);
});
