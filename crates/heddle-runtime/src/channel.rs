//! A control connection between a worker and the job master once it is admitted, shared
//! by the threads that use it: heartbeats and failure reports write, a watcher reads.
//!
//! A TLS session (or a sealed `mac` stream) cannot be split into a reading and a writing
//! half, so one lock guards the stream and nobody holds it while waiting: the socket is
//! non-blocking, and readers and writers wait for it with `poll(2)` outside the lock.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use heddle_comm::transport::LinkStream;
use heddle_wire::FrameRef;

use crate::control::{Control, CONTROL_LIMIT};
use crate::{Error, Result};

/// Bytes a reader asks the stream for at once.
const CHUNK: usize = 16 << 10;

/// One admitted control connection; clones share it.
#[derive(Debug, Clone)]
pub(crate) struct Channel {
    stream: Arc<Mutex<Box<dyn LinkStream>>>,
    /// Bytes read but not yet a whole message (one reader at a time).
    inbox: Arc<Mutex<Vec<u8>>>,
    fd: RawFd,
    /// The socket, to shut it down from any thread.
    socket: Arc<TcpStream>,
}

impl Channel {
    /// Shares `stream`, switching its socket to non-blocking.
    ///
    /// # Errors
    /// [`Error::Io`] if the socket cannot be configured.
    pub(crate) fn new(stream: Box<dyn LinkStream>) -> Result<Channel> {
        let socket =
            stream.socket().try_clone().map_err(|e| Error::io("cloning a control socket", e))?;
        socket.set_nonblocking(true).map_err(|e| Error::io("configuring a control socket", e))?;
        Ok(Channel {
            fd: socket.as_raw_fd(),
            stream: Arc::new(Mutex::new(stream)),
            inbox: Arc::new(Mutex::new(Vec::new())),
            socket: Arc::new(socket),
        })
    }

    /// Sends `msg`, failing if the other side takes none of it for `timeout`.
    ///
    /// # Errors
    /// [`Error::Io`] if the connection fails or stays full.
    pub(crate) fn send(&self, msg: &Control, timeout: Duration) -> Result<()> {
        let bytes = crate::control::encode(msg)?;
        let deadline = Instant::now() + timeout;
        let mut stream = self.stream.lock().unwrap_or_else(PoisonError::into_inner);
        let fail = |e: std::io::Error| Error::io("sending a control message", e);
        let mut pos = 0;
        while pos < bytes.len() {
            match stream.write(&bytes[pos..]) {
                Ok(0) => return Err(fail(ErrorKind::WriteZero.into())),
                Ok(n) => pos += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    wait(self.fd, libc::POLLOUT, Some(deadline)).map_err(fail)?
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(fail(e)),
            }
        }
        loop {
            match stream.push() {
                Ok(true) => return Ok(()),
                Ok(false) => wait(self.fd, libc::POLLOUT, Some(deadline)).map_err(fail)?,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    wait(self.fd, libc::POLLOUT, Some(deadline)).map_err(fail)?
                }
                Err(e) => return Err(fail(e)),
            }
        }
    }

    /// Receives the next message, waiting at most `timeout` (`None`: until the connection
    /// closes); a timeout is an [`Error::Io`] of kind `TimedOut`.
    ///
    /// # Errors
    /// [`Error::Io`] on a closed connection or a timeout; [`Error::Protocol`] on a
    /// malformed message.
    pub(crate) fn recv(&self, timeout: Option<Duration>) -> Result<Control> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut inbox = self.inbox.lock().unwrap_or_else(PoisonError::into_inner);
        let fail = |e: std::io::Error| Error::io("reading a control message", e);
        loop {
            match FrameRef::decode(&inbox, &CONTROL_LIMIT) {
                Ok((frame, used)) => {
                    let msg = crate::control::parse(&frame.header, frame.payload);
                    inbox.drain(..used);
                    return msg;
                }
                Err(heddle_wire::Error::Truncated { .. }) => {}
                Err(e) => return Err(Error::Protocol(format!("malformed control frame: {e}"))),
            }
            // Read straight into the inbox's tail, then keep what arrived.
            let had = inbox.len();
            inbox.resize(had + CHUNK, 0);
            let read =
                self.stream.lock().unwrap_or_else(PoisonError::into_inner).read(&mut inbox[had..]);
            inbox.truncate(had + *read.as_ref().unwrap_or(&0));
            match read {
                Ok(0) => return Err(fail(ErrorKind::UnexpectedEof.into())),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    wait(self.fd, libc::POLLIN, deadline).map_err(fail)?
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(fail(e)),
            }
        }
    }

    /// Closes the connection both ways (a reader waiting on it returns).
    pub(crate) fn shutdown(&self) {
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
    }
}

/// Waits until `fd` is ready for `events` (or has failed), or `deadline` passes.
fn wait(fd: RawFd, events: libc::c_short, deadline: Option<Instant>) -> std::io::Result<()> {
    loop {
        let ms = match deadline {
            None => -1,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(ErrorKind::TimedOut.into());
                }
                left.as_millis().clamp(1, i32::MAX as u128) as i32
            }
        };
        let mut pfd = libc::pollfd { fd, events, revents: 0 };
        // SAFETY: one valid pollfd for the duration of the call.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        match r {
            0 => {}
            n if n > 0 => return Ok(()),
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() != ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}
