//! Dataflow frames arriving at a worker: credit grants added to the sender's window, and
//! fragments reassembled into whole messages in the edge's inbox.

use heddle_wire::{Header, Kind};

use crate::channels::{Channels, Delivered, DATAFLOW_EDGE};
use crate::{Error, Result};

impl Channels {
    /// Takes one frame on a dataflow edge (or a stray non-data frame, which is an error).
    pub(crate) fn on_frame(&mut self, peer: usize, h: &Header, payload: &[u8]) -> Result<()> {
        let bad = |what: &'static str| Error::Wire {
            rank: peer,
            source: heddle_wire::Error::Inconsistent(what),
        };
        if h.edge & DATAFLOW_EDGE == 0 {
            return Err(bad("a non-data frame arrived on a BSP context"));
        }
        let c = self.channel(h.edge);
        match h.kind {
            Kind::Credit => {
                let n = <[u8; 4]>::try_from(payload)
                    .map(u32::from_le_bytes)
                    .map_err(|_| bad("a credit payload must be exactly 4 bytes"))?;
                c.credit[peer] += i64::from(n);
                Ok(())
            }
            Kind::Data | Kind::EndOfStream | Kind::Barrier => {
                let slot = &mut c.partial[peer];
                if h.flags.is_first() {
                    if slot.is_some() {
                        return Err(bad("a new message started before the previous one ended"));
                    }
                    *slot = Some((*h, Vec::with_capacity(h.msg_len as usize)));
                }
                let Some((first, data)) = slot.as_mut() else {
                    return Err(bad("a middle fragment arrived with no message in progress"));
                };
                if first.msg_len != h.msg_len || data.len() + payload.len() > h.msg_len as usize {
                    return Err(bad("fragment lengths disagree with the message length"));
                }
                data.extend_from_slice(payload);
                if h.flags.is_last() {
                    let (first, data) = slot.take().expect("checked above");
                    if data.len() as u64 != first.msg_len {
                        return Err(bad("last fragment ended before the message length"));
                    }
                    c.inbox_bytes += data.len() as u64;
                    c.peak_inbox_bytes = c.peak_inbox_bytes.max(c.inbox_bytes);
                    c.inbox.push_back(Delivered {
                        kind: first.kind,
                        from: peer,
                        source: first.source,
                        target: first.target,
                        sequence: first.sequence,
                        payload: data,
                    });
                }
                Ok(())
            }
            _ => Err(bad("unexpected frame kind on a dataflow edge")),
        }
    }
}
