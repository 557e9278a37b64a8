//! `HEDDLE_SECURITY=mac`: links authenticated but not encrypted. Every write becomes a
//! record — length, bytes, and a 16-byte tag over a sequence number, the length and the
//! bytes, under a key for that direction of that link derived from the job token — so a
//! tampered, replayed, reordered or foreign frame is refused. A link writes one frame per
//! write, so this is a MAC per frame. The MAC is keyed BLAKE3 (its keyed mode is a PRF,
//! as HMAC is): 7.4 GB/s on 256 KiB frames here against HMAC-SHA256's 1.9 GB/s with
//! SHA-NI, which made `mac` dearer than TLS's AES-GCM.

use std::io::{self, ErrorKind, IoSlice, Read, Write};
use std::net::TcpStream;

use heddle_comm::transport::LinkStream;

/// Bytes of a record's length field.
const LEN: usize = 4;
/// Bytes of a record's tag.
const TAG: usize = 16;
/// The largest record: one transport buffer (16 MiB at most) and its frame header.
const MAX_RECORD: usize = (16 << 20) + 4096;
/// Most sealed bytes held before writes answer `WouldBlock`.
const SEALED_LIMIT: usize = 4 << 20;

/// A socket whose bytes travel in MAC-sealed records.
pub(crate) struct MacStream {
    sock: TcpStream,
    send: blake3::Hasher,
    recv: blake3::Hasher,
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
        send_key: &[u8; 32],
        recv_key: &[u8; 32],
        peer: impl Into<String>,
    ) -> MacStream {
        let key = blake3::Hasher::new_keyed;
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

    /// The tag of a record: keyed BLAKE3 of its bytes, then its sequence number and length
    /// (the bytes first, so that they start a BLAKE3 chunk and hash in parallel lanes:
    /// 8.0 GB/s for 32 KiB records here, 4.7 GB/s with the 12 bytes in front).
    fn tag(mac: &blake3::Hasher, seq: u64, len: &[u8], parts: &[&[u8]]) -> [u8; TAG] {
        let mut m = mac.clone();
        for p in parts {
            m.update(p);
        }
        m.update(&seq.to_le_bytes());
        m.update(len);
        let full = m.finalize();
        let mut tag = [0u8; TAG];
        tag.copy_from_slice(&full.as_bytes()[..TAG]);
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
            return Err(self.refused("a record failed its MAC check"));
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
        let mut record: Vec<&[u8]> = Vec::with_capacity(parts.len() + 2);
        record.push(&len_bytes);
        record.extend(&parts);
        record.push(&tag);
        // Nothing queued: the record goes straight from the caller's buffers, and only
        // what the socket did not take is copied.
        let mut sent = 0;
        if self.out_pos == self.out.len() {
            let slices: Vec<IoSlice<'_>> = record.iter().map(|r| IoSlice::new(r)).collect();
            match self.sock.write_vectored(&slices) {
                Ok(k) => sent = k,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(e) => return Err(e),
            }
        }
        for r in record {
            let skip = sent.min(r.len());
            sent -= skip;
            self.out.extend_from_slice(&r[skip..]);
        }
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

    const K1: &[u8; 32] = &[1; 32];
    const K2: &[u8; 32] = &[2; 32];

    fn pair(key_b: &[u8; 32]) -> (MacStream, MacStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (MacStream::new(a, K1, K2, "b"), MacStream::new(b, K2, key_b, "a"))
    }

    #[test]
    fn records_arrive_whole_and_in_order() {
        let (mut a, mut b) = pair(K1);
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
        let (mut a, mut b) = pair(&[9; 32]);
        a.write_all(b"hello").unwrap();
        let err = b.read(&mut [0u8; 16]).unwrap_err();
        assert!(err.to_string().contains("MAC check"), "{err}");

        let (a, mut b) = pair(K1);
        let mut raw = a.sock.try_clone().unwrap();
        let mut sealed = MacStream::new(a.sock.try_clone().unwrap(), K1, K2, "b");
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
