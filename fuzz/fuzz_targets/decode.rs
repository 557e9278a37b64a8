//! Fuzz target: every heddle-wire decoding entry point on arbitrary bytes.
//!
//! Decoding must never panic; whatever decodes must satisfy its header and re-encode to
//! exactly the bytes it came from; the slice and reader decoders must agree.

#![no_main]

use heddle_wire::{Error, Frame, FrameRef, Header, Limits, HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fn check(data: &[u8], limits: &Limits) {
    let header = Header::decode(data, limits);
    let read = Frame::read_from(&mut &data[..], limits);
    match FrameRef::decode(data, limits) {
        Ok((frame, used)) => {
            let h = frame.header;
            assert_eq!(header.as_ref(), Ok(&h));
            assert_eq!(frame.key.len(), usize::from(h.key_len));
            assert_eq!(frame.payload.len(), h.frag_len as usize);
            assert_eq!(used, HEADER_LEN + frame.key.len() + frame.payload.len());
            assert!(used <= data.len());
            assert!(h.validate(limits).is_ok());
            let owned = frame.to_owned();
            assert_eq!(owned.encode_to_vec(), &data[..used], "re-encoding differs");
            assert_eq!(Frame::decode(data, limits).as_ref(), Ok(&(owned.clone(), used)));
            assert_eq!(read.expect("read_from refused a frame decode accepted"), owned);
        }
        Err(e) => {
            match header {
                Err(he) => assert_eq!(he, e),
                Ok(_) => assert!(
                    matches!(e, Error::Truncated { needed, available } if needed > available)
                ),
            }
            assert!(read.is_err(), "read_from accepted a frame decode refused");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    check(data, &Limits::default());
    check(data, &Limits { max_frame_payload: 64, max_message: 256 });

    // Treat the input as a stream of frames, the way a connection reader does.
    let mut rest = data;
    while let Ok((frame, used)) = FrameRef::decode(rest, &Limits::default()) {
        assert!(used >= HEADER_LEN && frame.header.frame_len() == used);
        rest = &rest[used..];
    }
});
