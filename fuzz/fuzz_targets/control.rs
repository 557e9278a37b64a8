//! Fuzz target: the control-message decoder (worker <-> job master, worker <-> worker
//! handshakes) on arbitrary bytes.
//!
//! Decoding must never panic and never allocate past the control limit; a message that
//! decodes re-encodes to a frame that decodes to the same message.

#![no_main]

use heddle_runtime::control;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut input = data;
    // A stream may hold several messages back to back: read until the first error.
    for _ in 0..8 {
        match control::recv(&mut input) {
            Ok(msg) => {
                let json = serde_json::to_vec(&msg).expect("a decoded message encodes");
                let back: control::Control =
                    serde_json::from_slice(&json).expect("and decodes again");
                assert_eq!(back, msg);
            }
            Err(_) => break,
        }
    }
});
