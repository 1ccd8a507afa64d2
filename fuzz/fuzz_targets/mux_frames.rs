//! The connection holder's socket protocol as either side reads it: a stream of frames
//! (kind byte, u32 length, payload) split by `ssh::mux::frame_head` (an oversized length
//! is refused before anything is allocated), each payload decoded by its kind (a request,
//! a failure, a status; stream bytes) with `ssh::mux::decode_frame`.
#![no_main]
use flightdeck::ssh::mux::{decode_frame, frame_head};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while rest.len() >= 5 {
        let head: [u8; 5] = rest[..5].try_into().unwrap();
        let Ok((kind, len)) = frame_head(&head) else { break };
        let Some(payload) = rest.get(5..5 + len) else { break };
        let _ = decode_frame(kind, payload);
        rest = &rest[5 + len..];
    }
});
