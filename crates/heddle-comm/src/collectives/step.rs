//! A collective in progress: rank mapping, its own message context, and one engine
//! exchange per algorithm step.

use std::sync::MutexGuard;
use std::time::Duration;

use heddle_wire::Codec;

use crate::engine::{Engine, RecvOp, SendOp, Sink};
use crate::stamp::Signature;
use crate::Result;

/// The state an algorithm works through. Ranks here are communicator ranks.
pub(crate) struct Step<'c> {
    pub(crate) engine: MutexGuard<'c, Engine>,
    pub(crate) members: &'c [usize],
    pub(crate) rank: usize,
    /// The communicator's ranks grouped by host (host-aware algorithms).
    pub(crate) layout: &'c super::Layout,
    /// The broadcast areas this worker maps.
    pub(crate) areas: &'c crate::transport::bcast_area::Areas,
    pub(crate) edge: u32,
    pub(crate) tag: u32,
    pub(crate) timeout: Duration,
    pub(crate) op: &'static str,
    /// The call's signature, on every message it sends and checked on every one it receives.
    pub(crate) signature: Signature,
    /// The algorithm running, its buffer's bytes and when it began (for [`crate::metrics`]).
    pub(crate) algorithm: &'static str,
    pub(crate) bytes: u64,
    pub(crate) started: std::time::Instant,
}

impl Drop for Step<'_> {
    fn drop(&mut self) {
        crate::metrics::collective(self.op, self.algorithm, self.bytes, self.started.elapsed());
    }
}

impl Step<'_> {
    /// Communicator size.
    pub(crate) fn size(&self) -> usize {
        self.members.len()
    }

    /// Sends and receives together; ranks are communicator ranks.
    pub(crate) fn exchange(
        &mut self,
        sends: &[(usize, &[u8])],
        recvs: Vec<(usize, Sink<'_>)>,
    ) -> Result<()> {
        let s: Vec<SendOp<'_>> = sends
            .iter()
            .map(|&(to, data)| SendOp {
                peer: self.members[to],
                edge: self.edge,
                tag: self.tag,
                data,
                codec: Codec::Raw,
                signature: self.signature,
            })
            .collect();
        let mut r: Vec<RecvOp<'_>> = recvs
            .into_iter()
            .map(|(from, sink)| {
                RecvOp::new(self.members[from], self.edge, self.tag, sink).signed(self.signature)
            })
            .collect();
        self.engine.exchange(&s, &mut r, self.op, self.timeout)
    }

    /// One send and one receive, without allocating.
    pub(crate) fn sendrecv(
        &mut self,
        to: usize,
        data: &[u8],
        from: usize,
        sink: Sink<'_>,
    ) -> Result<()> {
        let s = [SendOp {
            peer: self.members[to],
            edge: self.edge,
            tag: self.tag,
            data,
            codec: Codec::Raw,
            signature: self.signature,
        }];
        let mut r =
            [RecvOp::new(self.members[from], self.edge, self.tag, sink).signed(self.signature)];
        self.engine.exchange(&s, &mut r, self.op, self.timeout)
    }

    /// One send.
    pub(crate) fn send(&mut self, to: usize, data: &[u8]) -> Result<()> {
        let s = [SendOp {
            peer: self.members[to],
            edge: self.edge,
            tag: self.tag,
            data,
            codec: Codec::Raw,
            signature: self.signature,
        }];
        self.engine.exchange(&s, &mut [], self.op, self.timeout)
    }

    /// A zeroed buffer of `len` bytes, reused across calls ([`crate::engine`]'s scratch).
    pub(crate) fn scratch(&mut self, len: usize) -> Vec<u8> {
        self.engine.scratch(len)
    }

    /// Hands a [`Step::scratch`] buffer back.
    pub(crate) fn return_scratch(&mut self, v: Vec<u8>) {
        self.engine.return_scratch(v);
    }

    /// One receive.
    pub(crate) fn recv(&mut self, from: usize, sink: Sink<'_>) -> Result<()> {
        let mut r =
            [RecvOp::new(self.members[from], self.edge, self.tag, sink).signed(self.signature)];
        self.engine.exchange(&[], &mut r, self.op, self.timeout)
    }
}
