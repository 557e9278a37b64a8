//! `HEDDLE_SECURITY=mac`: links authenticated but not encrypted. Every write becomes
//! records — length, bytes, and a 16-byte tag — so a tampered, replayed, reordered or
//! foreign frame is refused. The tag is AES-256-GMAC (AES-GCM with the record's bytes as
//! associated data and nothing to encrypt) under a key for that direction of that link,
//! with the record's sequence number as the nonce. GMAC must never see one nonce twice
//! under one key: the keys are derived from the job token and nonces both ends drew for
//! this connection (`secure::link_key`), and the sequence number only grows.
//!
//! AES-GMAC from aws-lc (VPCLMULQDQ, 34 GB/s a core here) against keyed BLAKE3's 7 GB/s
//! and HMAC-SHA256's 1.9 GB/s: at 10 Gbit/s both ways a link's MAC took a fifth of a core
//! with BLAKE3, and all of it came on top of the transfer.

use std::io::{self, ErrorKind, IoSlice, Read, Write};
use std::net::TcpStream;

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use heddle_comm::transport::LinkStream;

/// Bytes of a record's length field.
const LEN: usize = 4;
/// Bytes of a record's tag.
const TAG: usize = 16;
/// The largest record's payload: the first is on the wire while the next is sealed, and
/// the reader checks and hands out each one as it lands.
const MAX_RECORD: usize = 64 << 10;
/// The most one write takes: one transport buffer (16 MiB at most) and its frame header.
const MAX_WRITE: usize = (16 << 20) + 4096;
/// Most sealed bytes held before writes answer `WouldBlock`.
const SEALED_LIMIT: usize = 4 << 20;

/// One direction's key and the sequence number of its next record.
struct Direction {
    key: LessSafeKey,
    seq: u64,
}

impl Direction {
    fn new(key: &[u8; 32]) -> Direction {
        let key = UnboundKey::new(&AES_256_GCM, key).expect("AES-256 takes a 32-byte key");
        Direction { key: LessSafeKey::new(key), seq: 0 }
    }

    /// The nonce of the next record: its sequence number, never repeated under this key.
    fn next_nonce(&mut self) -> Nonce {
        let mut nonce = [0u8; 12];
        nonce[4..].copy_from_slice(&self.seq.to_le_bytes());
        self.seq += 1;
        Nonce::assume_unique_for_key(nonce)
    }

    /// The tag of the next record, whose bytes are `payload`.
    fn seal(&mut self, payload: &[u8]) -> [u8; TAG] {
        let nonce = self.next_nonce();
        let tag = self
            .key
            .seal_in_place_separate_tag(nonce, Aad::from(payload), &mut [])
            .expect("GMAC of at most MAX_RECORD bytes");
        tag.as_ref().try_into().expect("a 16-byte tag")
    }

    /// Whether `tag` is the next record's, whose bytes are `payload` (compared in constant
    /// time by aws-lc).
    fn check(&mut self, payload: &[u8], tag: &[u8]) -> bool {
        let nonce = self.next_nonce();
        let mut tag: [u8; TAG] = tag.try_into().expect("a 16-byte tag");
        self.key.open_in_place(nonce, Aad::from(payload), &mut tag).is_ok()
    }
}

/// A socket whose bytes travel in MAC-sealed records.
pub(crate) struct MacStream {
    sock: TcpStream,
    send: Direction,
    recv: Direction,
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
        MacStream {
            sock,
            send: Direction::new(send_key),
            recv: Direction::new(recv_key),
            out: Vec::new(),
            out_pos: 0,
            inb: vec![0; 4 * (LEN + MAX_RECORD + TAG)],
            start: 0,
            end: 0,
            plain: 0,
            plain_end: 0,
            peer: peer.into(),
        }
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
            return Ok(false);
        }
        let body = self.start + LEN..self.start + LEN + len;
        let tag = body.end..body.end + TAG;
        if !self.recv.check(&self.inb[body.clone()], &self.inb[tag]) {
            return Err(self.refused("a record failed its MAC check"));
        }
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
    /// Hands out opened records' bytes; reads the socket only when no whole record is
    /// waiting, and returns once it has handed out some (a read that would find nothing
    /// more costs a system call).
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
            if n > 0 {
                return Ok(n);
            }
            self.make_room();
            match self.sock.read(&mut self.inb[self.end..]) {
                Ok(0) => return Ok(0),
                Ok(k) => self.end += k,
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

    /// Seals all the slices (up to one transport buffer) as records of at most
    /// [`MAX_RECORD`] bytes and sends them in one system call while nothing is queued;
    /// only what the socket did not take is copied.
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        if self.out.len() - self.out_pos >= SEALED_LIMIT && !LinkStream::push(self)? {
            return Err(ErrorKind::WouldBlock.into());
        }
        let payloads = records(bufs);
        if payloads.is_empty() {
            return Ok(0);
        }
        let sealed: Vec<([u8; LEN], [u8; TAG])> =
            payloads.iter().map(|p| ((p.len() as u32).to_le_bytes(), self.send.seal(p))).collect();
        let taken: usize = payloads.iter().map(|p| p.len()).sum();
        let parts: Vec<&[u8]> = payloads
            .iter()
            .zip(&sealed)
            .flat_map(|(p, (len, tag))| [&len[..], p, &tag[..]])
            .collect();
        let mut sent = 0;
        if self.out_pos == self.out.len() {
            let slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
            match self.sock.write_vectored(&slices) {
                Ok(k) => sent = k,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(e) => return Err(e),
            }
        }
        for p in parts {
            let skip = sent.min(p.len());
            sent -= skip;
            self.out.extend_from_slice(&p[skip..]);
        }
        match LinkStream::push(self) {
            Err(e) if e.kind() != ErrorKind::WouldBlock => Err(e),
            _ => Ok(taken),
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

/// The slices of one write (up to [`MAX_WRITE`] bytes) cut into records' payloads of at
/// most [`MAX_RECORD`] bytes each; a record never spans two slices, so each is hashed as
/// one contiguous run (a frame's header is a record of its own).
fn records<'a>(bufs: &'a [IoSlice<'_>]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut total = 0;
    for b in bufs {
        let rest: &[u8] = &b[..b.len().min(MAX_WRITE - total)];
        total += rest.len();
        out.extend(rest.chunks(MAX_RECORD));
    }
    out
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
        assert_eq!(n, 1 + big.len(), "one write takes both slices, as several records");
        a.flush().unwrap();
        let mut got = vec![0u8; 5 + 1 + big.len()];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got[..6], b"hello ");
        assert_eq!(&got[6..], &big[..]);
    }

    #[test]
    fn a_write_is_cut_into_records_within_each_slice_at_every_split() {
        let data: Vec<u8> = (0..3 * MAX_RECORD as u32 + 7).map(|i| i as u8).collect();
        let per = |n: usize| n.div_ceil(MAX_RECORD);
        for cut in [0, 1, MAX_RECORD - 1, MAX_RECORD, MAX_RECORD + 1, 2 * MAX_RECORD + 5] {
            for second in [cut, cut + 3, data.len()] {
                let (x, rest) = data.split_at(cut);
                let (y, z) = rest.split_at(second - cut);
                let bufs = [IoSlice::new(x), IoSlice::new(y), IoSlice::new(z)];
                let recs = records(&bufs);
                assert!(recs.iter().all(|r| !r.is_empty() && r.len() <= MAX_RECORD));
                assert_eq!(
                    recs.len(),
                    per(x.len()) + per(y.len()) + per(z.len()),
                    "{cut}/{second}"
                );
                assert_eq!(recs.concat(), data, "cut {cut}/{second}");
            }
        }
        let huge = vec![0u8; MAX_WRITE + 10];
        let taken: usize = records(&[IoSlice::new(&huge)]).iter().map(|p| p.len()).sum();
        assert_eq!(taken, MAX_WRITE, "one write takes one transport buffer at most");
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
        let tag = sealed.send.seal(b"hello");
        raw.write_all(&len).unwrap();
        raw.write_all(b"hellp").unwrap();
        raw.write_all(&tag).unwrap();
        let mut first = [0u8; 5];
        b.read_exact(&mut first).unwrap();
        assert_eq!(&first, b"hello");
        assert!(b.read(&mut [0u8; 5]).is_err());
    }

    /// Records sealed by hand under `K1`, as `a` of [`pair`] sends them.
    fn sealed_records(payloads: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut dir = Direction::new(K1);
        payloads
            .iter()
            .map(|p| {
                let tag = dir.seal(p);
                [&(p.len() as u32).to_le_bytes()[..], p, &tag].concat()
            })
            .collect()
    }

    #[test]
    fn a_replayed_or_reordered_record_is_refused() {
        let recs = sealed_records(&[b"one", b"two"]);
        for (order, good) in [([0, 1], 2), ([0, 0], 1), ([1, 0], 0)] {
            let (a, mut b) = pair(K1);
            let mut raw = a.sock.try_clone().unwrap();
            for i in order {
                raw.write_all(&recs[i]).unwrap();
            }
            for _ in 0..good {
                b.read_exact(&mut [0u8; 3]).unwrap();
            }
            if good < 2 {
                let err = b.read(&mut [0u8; 3]).unwrap_err();
                assert!(err.to_string().contains("MAC check"), "{order:?}: {err}");
            }
        }
    }

    #[test]
    fn a_record_too_long_is_refused_before_it_is_read() {
        let (a, mut b) = pair(K1);
        let mut raw = a.sock.try_clone().unwrap();
        raw.write_all(&(MAX_RECORD as u32 + 1).to_le_bytes()).unwrap();
        let err = b.read(&mut [0u8; 8]).unwrap_err();
        assert!(err.to_string().contains("announces"), "{err}");
    }
}
