//! Frame kinds.

use crate::{Error, Result};

/// What a frame carries. The byte value is part of the wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// Application data (one fragment of a message).
    Data = 1,
    /// A source has no more data on this edge.
    EndOfStream = 2,
    /// Checkpoint barrier; `sequence` is the checkpoint id.
    Barrier = 3,
    /// Flow-control credit; the payload is a little-endian `u32` count of buffers granted.
    Credit = 4,
    /// Runtime control message (bootstrap, membership); payload is JSON.
    Control = 5,
    /// Liveness heartbeat; empty payload.
    Heartbeat = 6,
    /// Control message between the runtime and a bridged task.
    BridgeControl = 7,
}

impl Kind {
    /// Parses a kind byte.
    ///
    /// # Errors
    /// [`Error::UnknownKind`] for a byte that names no kind.
    pub fn from_u8(b: u8) -> Result<Kind> {
        Ok(match b {
            1 => Kind::Data,
            2 => Kind::EndOfStream,
            3 => Kind::Barrier,
            4 => Kind::Credit,
            5 => Kind::Control,
            6 => Kind::Heartbeat,
            7 => Kind::BridgeControl,
            other => return Err(Error::UnknownKind(other)),
        })
    }
}
