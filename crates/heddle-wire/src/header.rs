//! The fixed 48-byte frame header: layout, encoding and validated decoding.

use crate::{Codec, Error, Kind, Limits, Result};

/// Size of the encoded header in bytes.
pub const HEADER_LEN: usize = 48;
/// First two bytes of every frame, `"HD"` (little-endian `0x4448`).
pub const MAGIC: u16 = 0x4448;
/// Wire version written and accepted by this build.
pub const VERSION: u8 = 1;

/// Fragment flags: which part of a message a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(u8);

impl Flags {
    /// The frame starts a message.
    pub const FIRST: Flags = Flags(0b01);
    /// The frame ends a message.
    pub const LAST: Flags = Flags(0b10);
    /// A whole message in one frame.
    pub const WHOLE: Flags = Flags(0b11);
    /// A middle fragment.
    pub const MIDDLE: Flags = Flags(0);

    /// The raw bits.
    pub fn bits(self) -> u8 {
        self.0
    }
    /// Whether the frame starts a message.
    pub fn is_first(self) -> bool {
        self.0 & 1 != 0
    }
    /// Whether the frame ends a message.
    pub fn is_last(self) -> bool {
        self.0 & 2 != 0
    }
    /// Flags for fragment `index` of a message whose last fragment is `last_index`.
    pub fn for_fragment(index: u64, last_index: u64) -> Flags {
        Flags(u8::from(index == 0) | (u8::from(index == last_index) << 1))
    }
}

/// A decoded frame header. Field order and widths are those of `spec/wire.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// What the frame carries.
    pub kind: Kind,
    /// Fragment position.
    pub flags: Flags,
    /// How to read the payload.
    pub codec: Codec,
    /// Length of the key that follows the header (only on a first fragment).
    pub key_len: u16,
    /// Operation / edge id, or communicator context for BSP messages.
    pub edge: u32,
    /// User tag (BSP point-to-point); 0 for dataflow edges.
    pub tag: u32,
    /// Source task id or rank.
    pub source: u32,
    /// Target task id or rank.
    pub target: u32,
    /// Per-(edge, source, target) message sequence number; checkpoint id for barriers.
    pub sequence: u64,
    /// Payload length of the whole message, summed over its fragments.
    pub msg_len: u64,
    /// Payload bytes carried by this frame.
    pub frag_len: u32,
}

impl Header {
    /// A header of the given kind with every other field zero and flags `WHOLE`.
    pub fn new(kind: Kind) -> Header {
        Header {
            kind,
            flags: Flags::WHOLE,
            codec: Codec::Raw,
            key_len: 0,
            edge: 0,
            tag: 0,
            source: 0,
            target: 0,
            sequence: 0,
            msg_len: 0,
            frag_len: 0,
        }
    }
    /// Sets the edge id.
    pub fn with_edge(mut self, edge: u32) -> Header {
        self.edge = edge;
        self
    }
    /// Sets the tag.
    pub fn with_tag(mut self, tag: u32) -> Header {
        self.tag = tag;
        self
    }
    /// Sets source and target.
    pub fn with_route(mut self, source: u32, target: u32) -> Header {
        self.source = source;
        self.target = target;
        self
    }
    /// Sets the sequence number.
    pub fn with_sequence(mut self, sequence: u64) -> Header {
        self.sequence = sequence;
        self
    }

    /// Bytes of the whole frame: header, key and payload.
    ///
    /// Saturates at `usize::MAX` where `usize` is 32 bits wide and the sum does not fit
    /// (possible only with `Limits::max_frame_payload` near `u32::MAX`); no buffer can hold
    /// such a frame, so decoding reports it as truncated instead of wrapping around.
    pub fn frame_len(&self) -> usize {
        HEADER_LEN.saturating_add(usize::from(self.key_len)).saturating_add(self.frag_len as usize)
    }

    /// Writes the header into the first [`HEADER_LEN`] bytes of `out`.
    ///
    /// # Panics
    /// If `out` is shorter than [`HEADER_LEN`].
    pub fn encode(&self, out: &mut [u8]) {
        let out = &mut out[..HEADER_LEN];
        out[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        out[2] = VERSION;
        out[3] = self.kind as u8;
        out[4] = self.flags.bits();
        out[5] = self.codec.to_u8();
        out[6..8].copy_from_slice(&self.key_len.to_le_bytes());
        out[8..12].copy_from_slice(&self.edge.to_le_bytes());
        out[12..16].copy_from_slice(&self.tag.to_le_bytes());
        out[16..20].copy_from_slice(&self.source.to_le_bytes());
        out[20..24].copy_from_slice(&self.target.to_le_bytes());
        out[24..32].copy_from_slice(&self.sequence.to_le_bytes());
        out[32..40].copy_from_slice(&self.msg_len.to_le_bytes());
        out[40..44].copy_from_slice(&self.frag_len.to_le_bytes());
        out[44..48].copy_from_slice(&0u32.to_le_bytes());
    }

    /// The encoded header as an array.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        self.encode(&mut b);
        b
    }

    /// Decodes and validates a header from the start of `buf`.
    ///
    /// # Errors
    /// [`Error::Truncated`] if `buf` is shorter than the header; any other [`Error`] for a
    /// header that is malformed, inconsistent or exceeds `limits`.
    pub fn decode(buf: &[u8], limits: &Limits) -> Result<Header> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated { needed: HEADER_LEN, available: buf.len() });
        }
        let u16_at = |o: usize| u16::from_le_bytes([buf[o], buf[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes([buf[o], buf[o + 1], buf[o + 2], buf[o + 3]]);
        let u64_at = |o: usize| u64::from(u32_at(o)) | (u64::from(u32_at(o + 4)) << 32);
        let magic = u16_at(0);
        if magic != MAGIC {
            return Err(Error::BadMagic { found: magic });
        }
        if buf[2] != VERSION {
            return Err(Error::UnsupportedVersion { found: buf[2], supported: VERSION });
        }
        let kind = Kind::from_u8(buf[3])?;
        if buf[4] & !0b11 != 0 {
            return Err(Error::Reserved { field: "flags", value: u32::from(buf[4]) });
        }
        let flags = Flags(buf[4]);
        let codec = Codec::from_u8(buf[5])?;
        let reserved = u32_at(44);
        if reserved != 0 {
            return Err(Error::Reserved { field: "reserved", value: reserved });
        }
        let header = Header {
            kind,
            flags,
            codec,
            key_len: u16_at(6),
            edge: u32_at(8),
            tag: u32_at(12),
            source: u32_at(16),
            target: u32_at(20),
            sequence: u64_at(24),
            msg_len: u64_at(32),
            frag_len: u32_at(40),
        };
        header.validate(limits)?;
        Ok(header)
    }

    /// Checks lengths against `limits` and against each other.
    ///
    /// # Errors
    /// [`Error::TooLarge`] or [`Error::Inconsistent`].
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        if self.frag_len > limits.max_frame_payload {
            return Err(Error::TooLarge {
                field: "frag_len",
                value: u64::from(self.frag_len),
                limit: u64::from(limits.max_frame_payload),
            });
        }
        if self.msg_len > limits.max_message {
            return Err(Error::TooLarge {
                field: "msg_len",
                value: self.msg_len,
                limit: limits.max_message,
            });
        }
        if u64::from(self.frag_len) > self.msg_len {
            return Err(Error::Inconsistent("frag_len is larger than msg_len"));
        }
        if self.flags.is_first() && self.flags.is_last() && u64::from(self.frag_len) != self.msg_len
        {
            return Err(Error::Inconsistent("a whole-message frame must have frag_len == msg_len"));
        }
        if self.key_len != 0 && !self.flags.is_first() {
            return Err(Error::Inconsistent("only a first fragment may carry a key"));
        }
        if let Codec::Array(d) = self.codec {
            if !self.msg_len.is_multiple_of(d.size() as u64) {
                return Err(Error::Inconsistent(
                    "array msg_len is not a multiple of the element size",
                ));
            }
        }
        Ok(())
    }
}
