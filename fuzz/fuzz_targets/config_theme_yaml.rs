//! The config file (with key bindings) and theme files.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ =
            flightdeck::yaml::from_str::<flightdeck::config::Config>(std::path::Path::new("c.yaml"), text);
        let _ = flightdeck::tui::theme::Theme::parse("fuzz", std::path::Path::new("t.yaml"), text);
    }
});
