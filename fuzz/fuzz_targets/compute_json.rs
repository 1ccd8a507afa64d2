//! Compute Engine API replies: operations, instances, lists, errors.
#![no_main]
use flightdeck::cloud::gcp::ops::{Instance, ListPage, Operation};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(op) = serde_json::from_slice::<Operation>(data) {
        let _ = op.scope();
        let _ = op.target_name();
        for e in op.errors() {
            let _ = e.zones_available();
        }
    }
    if let Ok(i) = serde_json::from_slice::<Instance>(data) {
        let _ = i.external_ip();
        let _ = i.internal_ip();
    }
    let _ = serde_json::from_slice::<ListPage<Instance>>(data);
    let _ = flightdeck::cloud::gcp::http::google_error(data);
});
