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
    /// A fragment of a synchronous point-to-point message: as [`Kind::Data`], and the
    /// receiver answers with [`Kind::Ack`] once a receive has matched the message;
    /// `sequence` is the sender's nonzero id of the send.
    SyncData = 8,
    /// A receive matched the synchronous message whose id is `sequence` (`edge` and `tag`
    /// as that message's); empty payload.
    Ack = 9,
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
            8 => Kind::SyncData,
            9 => Kind::Ack,
            other => return Err(Error::UnknownKind(other)),
        })
    }
}
