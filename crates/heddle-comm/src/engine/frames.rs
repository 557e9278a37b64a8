//! Sending one message as fragments over a link: where it goes, and as many fragments as
//! the link's credit allows per pass.

use heddle_wire::{Codec, Flags, Header, Kind};

use super::SEND_DONE;
use crate::transport::BoxedLink;
use crate::Result;

/// Where a message goes and what it holds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Frame {
    pub(super) peer: usize,
    pub(super) edge: u32,
    pub(super) tag: u32,
    pub(super) codec: Codec,
    /// Data, or synchronous data.
    pub(super) kind: Kind,
    /// The collective call's signature, or a synchronous send's id.
    pub(super) sequence: u64,
}

/// Sends the fragments of `data` from `*offset` on that the link to `f.peer` has room
/// for; sets `*offset` to [`SEND_DONE`] after the last. Returns whether any left.
pub(super) fn push_message(
    links: &mut [BoxedLink],
    rank: usize,
    fragment: usize,
    f: Frame,
    data: &[u8],
    offset: &mut usize,
) -> Result<bool> {
    let len = data.len();
    let last_index = if len == 0 { 0 } else { (len - 1) / fragment } as u64;
    let mut progressed = false;
    loop {
        let off = *offset;
        let n = fragment.min(len - off);
        let index = (off / fragment) as u64;
        let header = Header {
            kind: f.kind,
            flags: Flags::for_fragment(index, last_index),
            codec: f.codec,
            key_len: 0,
            edge: f.edge,
            tag: f.tag,
            source: rank as u32,
            target: f.peer as u32,
            sequence: f.sequence,
            msg_len: len as u64,
            frag_len: n as u32,
        };
        if !links[f.peer].try_send(&header, &data[off..off + n])? {
            return Ok(progressed);
        }
        progressed = true;
        if index == last_index {
            *offset = SEND_DONE;
            return Ok(true);
        }
        *offset = off + n;
    }
}
