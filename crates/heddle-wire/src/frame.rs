//! Whole frames: header, optional key and payload, owned ([`Frame`]) or borrowed ([`FrameRef`]).

use crate::{Codec, Error, Flags, Header, Limits, Result, HEADER_LEN};

/// A frame borrowed from a buffer: no copy of key or payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRef<'a> {
    /// The decoded header.
    pub header: Header,
    /// The key (empty when `key_len` is 0).
    pub key: &'a [u8],
    /// This frame's payload bytes.
    pub payload: &'a [u8],
}

impl<'a> FrameRef<'a> {
    /// Decodes one frame from the start of `buf`, returning it and the bytes it used.
    ///
    /// # Errors
    /// [`Error::Truncated`] if `buf` does not yet hold the whole frame (read more and
    /// retry); any other [`Error`] for malformed input.
    pub fn decode(buf: &'a [u8], limits: &Limits) -> Result<(FrameRef<'a>, usize)> {
        let header = Header::decode(buf, limits)?;
        let len = header.frame_len();
        if buf.len() < len {
            return Err(Error::Truncated { needed: len, available: buf.len() });
        }
        let key_end = HEADER_LEN + header.key_len as usize;
        Ok((FrameRef { header, key: &buf[HEADER_LEN..key_end], payload: &buf[key_end..len] }, len))
    }

    /// Copies into an owned [`Frame`].
    pub fn to_owned(&self) -> Frame {
        Frame { header: self.header, key: self.key.to_vec(), payload: self.payload.to_vec() }
    }
}

/// An owned frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The header; `key_len`, `frag_len` agree with `key` and `payload`.
    pub header: Header,
    /// The key (may be empty).
    pub key: Vec<u8>,
    /// The payload.
    pub payload: Vec<u8>,
}

impl Frame {
    /// A whole-message frame (flags `WHOLE`) whose lengths are set from `payload`.
    ///
    /// # Panics
    /// If `payload` is longer than `u32::MAX` bytes: fragment larger messages.
    pub fn data(mut header: Header, codec: Codec, payload: Vec<u8>) -> Frame {
        header.codec = codec;
        header.flags = Flags::WHOLE;
        header.frag_len =
            u32::try_from(payload.len()).expect("payload over 4 GiB must be fragmented");
        header.msg_len = payload.len() as u64;
        header.key_len = 0;
        Frame { header, key: Vec::new(), payload }
    }

    /// Attaches a key (only valid on a first fragment).
    ///
    /// # Panics
    /// If the key is longer than `u16::MAX` bytes.
    pub fn with_key(mut self, key: Vec<u8>) -> Frame {
        self.header.key_len = u16::try_from(key.len()).expect("key longer than 65535 bytes");
        self.key = key;
        self
    }

    /// Appends the encoded frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.resize(start + HEADER_LEN, 0);
        self.header.encode(&mut out[start..]);
        out.extend_from_slice(&self.key);
        out.extend_from_slice(&self.payload);
    }

    /// The encoded frame.
    pub fn encode_to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.header.frame_len());
        self.encode(&mut v);
        v
    }

    /// Decodes one owned frame from the start of `buf`.
    ///
    /// # Errors
    /// As [`FrameRef::decode`].
    pub fn decode(buf: &[u8], limits: &Limits) -> Result<(Frame, usize)> {
        FrameRef::decode(buf, limits).map(|(f, n)| (f.to_owned(), n))
    }

    /// Reads exactly one frame from a blocking reader, allocating no more than the
    /// validated header declares.
    ///
    /// # Errors
    /// `std::io::Error` from the reader; malformed frames as `InvalidData` wrapping [`Error`].
    pub fn read_from(r: &mut impl std::io::Read, limits: &Limits) -> std::io::Result<Frame> {
        let mut hb = [0u8; HEADER_LEN];
        r.read_exact(&mut hb)?;
        let header = Header::decode(&hb, limits)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        let mut key = vec![0u8; header.key_len as usize];
        r.read_exact(&mut key)?;
        let mut payload = vec![0u8; header.frag_len as usize];
        r.read_exact(&mut payload)?;
        Ok(Frame { header, key, payload })
    }

    /// Writes the frame to a blocking writer.
    ///
    /// # Errors
    /// `std::io::Error` from the writer.
    pub fn write_to(&self, w: &mut impl std::io::Write) -> std::io::Result<()> {
        w.write_all(&self.header.to_bytes())?;
        w.write_all(&self.key)?;
        w.write_all(&self.payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Dtype, Kind};

    #[test]
    fn roundtrip_with_key() {
        let f = Frame::data(
            Header::new(Kind::Data).with_route(1, 2).with_sequence(9),
            Codec::Array(Dtype::F64),
            vec![0; 16],
        )
        .with_key(b"k".to_vec());
        let bytes = f.encode_to_vec();
        assert_eq!(bytes.len(), HEADER_LEN + 1 + 16);
        let (g, n) = Frame::decode(&bytes, &Limits::default()).unwrap();
        assert_eq!((g, n), (f, bytes.len()));
    }

    #[test]
    fn truncated_is_an_error() {
        let bytes = Frame::data(Header::new(Kind::Data), Codec::Raw, vec![1, 2, 3]).encode_to_vec();
        for cut in 0..bytes.len() {
            assert!(matches!(
                Frame::decode(&bytes[..cut], &Limits::default()),
                Err(Error::Truncated { .. })
            ));
        }
    }

    #[test]
    fn largest_declarable_frame_is_truncated_not_wrapped() {
        // On a 32-bit target 48 + 65535 + u32::MAX used to wrap to 65582, pass the length
        // check, and panic slicing the key.
        let limits = Limits { max_frame_payload: u32::MAX, max_message: u64::MAX };
        let mut h = Header::new(Kind::Data);
        (h.flags, h.key_len, h.frag_len, h.msg_len) = (Flags::FIRST, u16::MAX, u32::MAX, u64::MAX);
        let mut buf = h.to_bytes().to_vec();
        buf.resize(70_000, 0);
        assert!(matches!(
            FrameRef::decode(&buf, &limits),
            Err(Error::Truncated { available: 70_000, .. })
        ));
    }

    #[test]
    fn oversized_frame_is_refused_before_allocation() {
        let mut h = Header::new(Kind::Data);
        h.frag_len = u32::MAX;
        h.msg_len = u64::from(u32::MAX);
        let err = Header::decode(&h.to_bytes(), &Limits::default()).unwrap_err();
        assert!(matches!(err, Error::TooLarge { field: "frag_len", .. }), "{err}");
    }
}
