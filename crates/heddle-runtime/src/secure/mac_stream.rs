//! `HEDDLE_SECURITY=mac`: links authenticated but not encrypted. Every write becomes a
//! record — length, bytes, and a 16-byte HMAC-SHA256 tag over a sequence number, the
//! length and the bytes, under a key for that direction of that link derived from the job
//! token — so a tampered, replayed, reordered or foreign frame is refused. A link writes
//! one frame per write, so this is an HMAC per frame.

use std::io::{self, ErrorKind, IoSlice, Read, Write};
use std::net::TcpStream;

use heddle_comm::transport::LinkStream;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of a record's length field.
const LEN: usize = 4;
/// Bytes of a record's tag.
const TAG: usize = 16;
/// The largest record: one transport buffer (16 MiB at most) and its frame header.
const MAX_RECORD: usize = (16 << 20) + 4096;
/// Most sealed bytes held before writes answer `WouldBlock`.
const SEALED_LIMIT: usize = 4 << 20;

/// A socket whose bytes travel in HMAC-sealed records.
pub(crate) struct MacStream {
    sock: TcpStream,
    send: Hmac<Sha256>,
    recv: Hmac<Sha256>,
    send_seq: u64,
    recv_seq: u64,
    out: Vec<u8>,
    out_pos: usize,
    /// Received bytes `[start, end)`; `[plain, plain_end)` is an opened record's payload.
    inb: Vec<u8>,
    start: usize,
    end: usize,
    plain: usize,
    plain_end: usize,
    /// Who is on the other side, for errors.
    peer: String,
}

impl std::fmt::Debug for MacStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MacStream").field("peer", &self.peer).finish_non_exhaustive()
    }
}

impl MacStream {
    /// Seals `sock` with `send_key` one way and checks `recv_key` the other.
    pub(crate) fn new(
        sock: TcpStream,
        send_key: &[u8],
        recv_key: &[u8],
        peer: impl Into<String>,
    ) -> MacStream {
        let key = |k: &[u8]| Hmac::<Sha256>::new_from_slice(k).expect("HMAC takes any key");
        MacStream {
            sock,
            send: key(send_key),
            recv: key(recv_key),
            send_seq: 0,
            recv_seq: 0,
            out: Vec::new(),
            out_pos: 0,
            inb: vec![0; 64 << 10],
            start: 0,
            end: 0,
            plain: 0,
            plain_end: 0,
            peer: peer.into(),
        }
    }

    fn tag(mac: &Hmac<Sha256>, seq: u64, len: &[u8], parts: &[&[u8]]) -> [u8; TAG] {
        let mut m = mac.clone();
        m.update(&seq.to_le_bytes());
        m.update(len);
        for p in parts {
            m.update(p);
        }
        let full = m.finalize().into_bytes();
        let mut tag = [0u8; TAG];
        tag.copy_from_slice(&full[..TAG]);
        tag
    }

    /// Opens the next whole record in `inb`, if one is there; fails on a bad one.
    fn open_record(&mut self) -> io::Result<bool> {
        let have = self.end - self.start;
        if have < LEN {
            return Ok(false);
        }
        let len_bytes: [u8; LEN] =
            self.inb[self.start..self.start + LEN].try_into().expect("LEN bytes");
        let len = u32::from_le_bytes(len_bytes) as usize;
        if len > MAX_RECORD {
            return Err(self.refused(&format!("a record announces {len} bytes")));
        }
        let total = LEN + len + TAG;
        if have < total {
            if self.inb.len() < total {
                self.inb.resize(total, 0);
            }
            return Ok(false);
        }
        let body = self.start + LEN..self.start + LEN + len;
        let expected = Self::tag(&self.recv, self.recv_seq, &len_bytes, &[&self.inb[body.clone()]]);
        let tag = &self.inb[body.end..body.end + TAG];
        // Constant time: the comparison does not stop at the first differing byte.
        if tag.iter().zip(expected).fold(0u8, |d, (a, b)| d | (a ^ b)) != 0 {
            return Err(self.refused("a record failed its HMAC check"));
        }
        self.recv_seq += 1;
        (self.plain, self.plain_end) = (body.start, body.end);
        self.start += total;
        Ok(true)
    }

    fn refused(&self, what: &str) -> io::Error {
        io::Error::new(
            ErrorKind::InvalidData,
            format!(
                "{what} on the link with {}: tampered, replayed or from outside the job \
                 (HEDDLE_SECURITY=mac)",
                self.peer
            ),
        )
    }

    fn make_room(&mut self) {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        } else if self.start > 0 && self.inb.len() - self.end < self.inb.len() / 2 {
            self.inb.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
    }
}

impl Read for MacStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut n = 0;
        loop {
            if self.plain < self.plain_end {
                let k = (self.plain_end - self.plain).min(buf.len() - n);
                buf[n..n + k].copy_from_slice(&self.inb[self.plain..self.plain + k]);
                (n, self.plain) = (n + k, self.plain + k);
                if n == buf.len() {
                    return Ok(n);
                }
            }
            if self.open_record()? {
                continue;
            }
            self.make_room();
            match self.sock.read(&mut self.inb[self.end..]) {
                Ok(0) => return Ok(n),
                Ok(k) => self.end += k,
                Err(e)
                    if n > 0 && matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                {
                    return Ok(n)
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

impl Write for MacStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }

    /// Seals all the slices (up to the largest record) as one record.
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        if self.out.len() - self.out_pos >= SEALED_LIMIT && !LinkStream::push(self)? {
            return Err(ErrorKind::WouldBlock.into());
        }
        let mut parts: Vec<&[u8]> = Vec::with_capacity(bufs.len());
        let mut len = 0;
        for b in bufs {
            let take = b.len().min(MAX_RECORD - len);
            parts.push(&b[..take]);
            len += take;
        }
        if len == 0 {
            return Ok(0);
        }
        let len_bytes = (len as u32).to_le_bytes();
        let tag = Self::tag(&self.send, self.send_seq, &len_bytes, &parts);
        self.send_seq += 1;
        self.out.extend_from_slice(&len_bytes);
        parts.iter().for_each(|p| self.out.extend_from_slice(p));
        self.out.extend_from_slice(&tag);
        match LinkStream::push(self) {
            Err(e) if e.kind() != ErrorKind::WouldBlock => Err(e),
            _ => Ok(len),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        while self.out_pos < self.out.len() {
            match self.sock.write(&self.out[self.out_pos..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(k) => self.out_pos += k,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.out.clear();
        self.out_pos = 0;
        Ok(())
    }
}

impl LinkStream for MacStream {
    fn push(&mut self) -> io::Result<bool> {
        match self.flush() {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn socket(&self) -> &TcpStream {
        &self.sock
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    fn pair(key_b: &[u8]) -> (MacStream, MacStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (MacStream::new(a, b"k1", b"k2", "b"), MacStream::new(b, b"k2", key_b, "a"))
    }

    #[test]
    fn records_arrive_whole_and_in_order() {
        let (mut a, mut b) = pair(b"k1");
        let big: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
        a.write_all(b"hello").unwrap();
        let n = a.write_vectored(&[IoSlice::new(b" "), IoSlice::new(&big)]).unwrap();
        assert_eq!(n, 1 + big.len(), "one record takes both slices");
        a.flush().unwrap();
        let mut got = vec![0u8; 5 + 1 + big.len()];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got[..6], b"hello ");
        assert_eq!(&got[6..], &big[..]);
    }

    #[test]
    fn a_wrong_key_or_a_flipped_bit_is_refused() {
        let (mut a, mut b) = pair(b"other key");
        a.write_all(b"hello").unwrap();
        let err = b.read(&mut [0u8; 16]).unwrap_err();
        assert!(err.to_string().contains("HMAC check"), "{err}");

        let (a, mut b) = pair(b"k1");
        let mut raw = a.sock.try_clone().unwrap();
        let mut sealed = MacStream::new(a.sock.try_clone().unwrap(), b"k1", b"k2", "b");
        sealed.write_all(b"hello").unwrap();
        // A record written by hand with one payload bit flipped.
        let len = 5u32.to_le_bytes();
        let tag = MacStream::tag(&sealed.send, 1, &len, &[b"hello"]);
        raw.write_all(&len).unwrap();
        raw.write_all(b"hellp").unwrap();
        raw.write_all(&tag).unwrap();
        let mut first = [0u8; 5];
        b.read_exact(&mut first).unwrap();
        assert_eq!(&first, b"hello");
        assert!(b.read(&mut [0u8; 5]).is_err());
    }
}
