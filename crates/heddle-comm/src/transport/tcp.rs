//! A TCP connection to one peer: non-blocking, framed, with credit-based flow control.
//!
//! The sender starts with `window` credits and spends one per data frame; the receiver
//! grants them back in `Credit` frames once it has consumed half a window, so it never
//! holds more than `window` unconsumed data frames from this peer.

use std::io::{ErrorKind, IoSlice, Read, Write};

use heddle_wire::{FrameRef, Header, Kind, Limits, HEADER_LEN};

use super::{Link, LinkStream, Polled};
use crate::{Error, Result};

/// One peer's TCP link.
#[derive(Debug)]
pub(crate) struct TcpLink {
    stream: Box<dyn LinkStream>,
    peer: usize,
    limits: Limits,
    window: usize,
    credits: usize,
    consumed_ungranted: usize,
    out: Vec<u8>,
    out_pos: usize,
    inb: Vec<u8>,
    in_start: usize,
    in_end: usize,
    closed: Option<String>,
}

impl TcpLink {
    /// Wraps a connected, authenticated stream.
    ///
    /// # Errors
    /// [`Error::Io`] if the socket options cannot be set.
    pub(crate) fn new(
        stream: Box<dyn LinkStream>,
        peer: usize,
        buffer_bytes: usize,
        window: usize,
    ) -> Result<TcpLink> {
        let ctx = |what: &str| format!("{what} on the connection to rank {peer}");
        let socket = stream.socket();
        socket.set_nodelay(true).map_err(|e| Error::io(ctx("setting TCP_NODELAY"), e))?;
        socket.set_nonblocking(true).map_err(|e| Error::io(ctx("setting non-blocking mode"), e))?;
        Ok(TcpLink {
            stream,
            peer,
            limits: super::link_limits(buffer_bytes),
            window,
            credits: window,
            consumed_ungranted: 0,
            out: Vec::new(),
            out_pos: 0,
            inb: vec![0; 4 * buffer_bytes],
            in_start: 0,
            in_end: 0,
            closed: None,
        })
    }

    fn lost(&self, detail: impl Into<String>) -> Error {
        Error::PeerLost { rank: self.peer, detail: detail.into() }
    }

    /// Records that the peer is gone. It is an error only for an exchange that still
    /// needs this peer (see [`Link::check_alive`]): a peer that finished may exit.
    fn close(&mut self, why: String) {
        self.closed.get_or_insert(why);
        self.out.clear();
        self.out_pos = 0;
    }

    /// Pushes staged bytes (ours, then any the stream sealed but holds); returns whether
    /// none remain.
    pub(crate) fn flush(&mut self) -> bool {
        while self.out_pos < self.out.len() {
            match self.stream.write(&self.out[self.out_pos..]) {
                Ok(0) => self.close("connection closed while sending".into()),
                Ok(n) => self.out_pos += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => self.close(format!("send failed: {e}")),
            }
        }
        self.out.clear();
        self.out_pos = 0;
        if self.closed.is_some() {
            return true;
        }
        match self.stream.push() {
            Ok(done) => done,
            Err(e) if e.kind() == ErrorKind::WouldBlock => false,
            Err(e) => {
                self.close(format!("send failed: {e}"));
                true
            }
        }
    }

    fn fill(&mut self) -> Result<bool> {
        if self.in_start > 0 && self.in_start == self.in_end {
            self.in_start = 0;
            self.in_end = 0;
        }
        if self.inb.len() - self.in_end < self.inb.len() / 2 {
            self.inb.copy_within(self.in_start..self.in_end, 0);
            self.in_end -= self.in_start;
            self.in_start = 0;
        }
        loop {
            match self.stream.read(&mut self.inb[self.in_end..]) {
                Ok(0) => {
                    self.close("connection closed by peer".into());
                    return Ok(false);
                }
                Ok(n) => {
                    self.in_end += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    self.close(format!("receive failed: {e}"));
                    return Ok(false);
                }
            }
        }
    }

    fn grant(&mut self) -> Result<()> {
        let frame = super::grant_frame(std::mem::take(&mut self.consumed_ungranted));
        if self.closed.is_none() {
            frame.encode(&mut self.out);
            self.flush();
        }
        Ok(())
    }
}

impl Link for TcpLink {
    /// Sends one frame if there is credit (credit frames need none) and the socket takes it.
    fn try_send(&mut self, header: &Header, payload: &[u8]) -> Result<bool> {
        if let Some(why) = &self.closed {
            return Err(self.lost(why.clone()));
        }
        let needs_credit = header.kind != Kind::Credit;
        if (needs_credit && self.credits == 0) || !self.flush() {
            return Ok(false);
        }
        let hdr = header.to_bytes();
        let total = HEADER_LEN + payload.len();
        let mut written = 0;
        loop {
            let r = if written < HEADER_LEN {
                self.stream.write_vectored(&[IoSlice::new(&hdr[written..]), IoSlice::new(payload)])
            } else {
                self.stream.write(&payload[written - HEADER_LEN..])
            };
            match r {
                Ok(0) => return Err(self.lost("connection closed while sending")),
                Ok(n) => {
                    written += n;
                    if written == total {
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if written == 0 {
                        return Ok(false);
                    }
                    // Stage the rest; flow control bounds this to one buffer.
                    if written < HEADER_LEN {
                        self.out.extend_from_slice(&hdr[written..]);
                        self.out.extend_from_slice(payload);
                    } else {
                        self.out.extend_from_slice(&payload[written - HEADER_LEN..]);
                    }
                    break;
                }
                Err(e) => return Err(self.lost(format!("send failed: {e}"))),
            }
        }
        if needs_credit {
            self.credits -= 1;
        }
        Ok(true)
    }

    /// Offers the next complete data frame to `f` (consumed if it returns true).
    fn poll(&mut self, f: &mut dyn FnMut(&Header, &[u8]) -> Result<bool>) -> Result<Polled> {
        self.flush();
        let mut read_once = false;
        loop {
            let buf = &self.inb[self.in_start..self.in_end];
            match FrameRef::decode(buf, &self.limits) {
                Ok((frame, used)) => match frame.header.kind {
                    // Edge 0 grants this connection's buffers; other credits belong to
                    // dataflow edges and go up with the data.
                    Kind::Credit if frame.header.edge == 0 => {
                        self.credits += super::granted(frame.payload, self.peer)?;
                        self.in_start += used;
                    }
                    kind => {
                        if !f(&frame.header, frame.payload)? {
                            return Ok(Polled::Refused);
                        }
                        self.in_start += used;
                        if kind != Kind::Credit {
                            self.consumed_ungranted += 1;
                            if self.consumed_ungranted * 2 >= self.window {
                                self.grant()?;
                            }
                        }
                        return Ok(Polled::Consumed);
                    }
                },
                Err(heddle_wire::Error::Truncated { .. }) => {
                    if read_once || self.closed.is_some() || !self.fill()? {
                        return Ok(Polled::Empty);
                    }
                    read_once = true;
                }
                Err(source) => return Err(Error::Wire { rank: self.peer, source }),
            }
        }
    }

    /// Fails if the connection has closed.
    fn check_alive(&mut self, _rank: usize) -> Result<()> {
        self.flush();
        match &self.closed {
            Some(why) => Err(self.lost(why.clone())),
            None => Ok(()),
        }
    }

    fn flushed(&mut self) -> bool {
        self.flush()
    }

    fn transport(&self) -> &'static str {
        "tcp"
    }
}
