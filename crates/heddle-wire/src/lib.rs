//! Heddle's wire format: the frame that every transport and every bridge SDK speaks.
//!
//! A frame is a fixed 48-byte little-endian [`Header`], then an optional key of
//! `key_len` bytes, then `frag_len` payload bytes. Messages larger than one buffer travel
//! as several frames (fragments) flagged first / middle / last. The normative description
//! with byte diagrams is `spec/wire.md`; golden vectors live in `spec/vectors/`.
//!
//! This crate does no I/O. Decoding never panics and never trusts a length it has not
//! checked against [`Limits`].
//!
//! ```
//! use heddle_wire::{Codec, Frame, Header, Kind, Limits};
//! let frame = Frame::data(
//!     Header::new(Kind::Data).with_edge(7).with_tag(3),
//!     Codec::Utf8,
//!     b"hello".to_vec(),
//! );
//! let bytes = frame.encode_to_vec();
//! let (back, used) = Frame::decode(&bytes, &Limits::default()).unwrap();
//! assert_eq!(used, bytes.len());
//! assert_eq!(back, frame);
//! ```

mod codec;
mod error;
mod frame;
mod header;
mod kind;

pub use codec::{Codec, Dtype};
pub use error::{Error, Result};
pub use frame::{Frame, FrameRef};
pub use header::{Flags, Header, HEADER_LEN, MAGIC, VERSION};
pub use kind::Kind;

/// Bounds a decoder enforces before it allocates or slices anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted `frag_len` (payload bytes in one frame).
    pub max_frame_payload: u32,
    /// Largest accepted total message length (`msg_len`).
    pub max_message: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_frame_payload: 16 << 20, max_message: 1 << 40 }
    }
}
