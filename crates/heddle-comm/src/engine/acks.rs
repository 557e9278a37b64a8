//! Synchronous sends (MPI's `Ssend`/`Issend`, spec/wire.md A1): the receiver owes the
//! sender an ack frame once a receive has matched a synchronous message, and the send
//! finishes only on it.

use std::collections::VecDeque;

use heddle_wire::{Codec, Flags, Header, Kind};

use crate::transport::BoxedLink;
use crate::Result;

/// An ack this rank owes: the matched message's sender, context, tag and send id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owed {
    peer: usize,
    edge: u32,
    tag: u32,
    id: u64,
}

/// The acks owed and not sent yet (a link may be out of credit), oldest first.
#[derive(Debug, Default)]
pub(crate) struct Acks {
    owed: VecDeque<Owed>,
}

/// The send id of a synchronous message starting with `h` (`None`: an ordinary one).
pub(super) fn sync_id(h: &Header) -> Option<u64> {
    (h.kind == Kind::SyncData).then_some(h.sequence)
}

impl Acks {
    /// A receive matched the message from `peer` on (`edge`, `tag`) whose send id is
    /// `id` (`None`: not a synchronous message, nothing is owed).
    pub(super) fn owe(&mut self, peer: usize, edge: u32, tag: u32, id: Option<u64>) {
        if let Some(id) = id {
            self.owed.push_back(Owed { peer, edge, tag, id });
        }
    }

    /// Whether every owed ack has left.
    pub(super) fn is_empty(&self) -> bool {
        self.owed.is_empty()
    }

    /// Sends the owed acks that link credit allows, in order per peer; returns whether
    /// any left.
    ///
    /// # Errors
    /// A broken link.
    pub(super) fn push(&mut self, links: &mut [BoxedLink], rank: usize) -> Result<bool> {
        let mut progressed = false;
        let mut full: Vec<usize> = Vec::new();
        let mut i = 0;
        while i < self.owed.len() {
            let o = self.owed[i];
            if full.contains(&o.peer) {
                i += 1;
                continue;
            }
            let header = Header {
                kind: Kind::Ack,
                flags: Flags::WHOLE,
                codec: Codec::Raw,
                key_len: 0,
                edge: o.edge,
                tag: o.tag,
                source: rank as u32,
                target: o.peer as u32,
                sequence: o.id,
                msg_len: 0,
                frag_len: 0,
            };
            if links[o.peer].try_send(&header, &[])? {
                self.owed.remove(i);
                progressed = true;
            } else {
                full.push(o.peer);
                i += 1;
            }
        }
        Ok(progressed)
    }
}
