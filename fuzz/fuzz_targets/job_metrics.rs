//! Training-log metric lines (the seed format, torchtitan, Hugging Face Trainer).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut m = flightdeck::jobs::metrics::JobMetrics::new(vec![], Some(6.0e9), Some(989.0));
    for (i, line) in text.lines().enumerate() {
        let _ = m.push_line(i % 3, line);
    }
    let _ = m.summary();
    let _ = m.drift();
});
