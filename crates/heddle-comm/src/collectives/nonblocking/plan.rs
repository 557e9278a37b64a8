//! A non-blocking collective as data: rounds of sends and receives between buffers the
//! schedule owns, each followed by local steps (folds, copies) once all of the round's
//! messages have finished, as in libNBC. [`Running`] executes a plan inside the engine.

use std::sync::Arc;

use heddle_wire::Codec;

use crate::engine::{Advance, Engine, Label, Memory, Output, Pattern, Schedule};
use crate::stamp::Signature;
use crate::{Element, Error, Op, Result};

/// A range of one of the schedule's buffers, in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) buf: usize,
    pub(crate) start: usize,
    pub(crate) len: usize,
}

impl Slot {
    pub(crate) fn new(buf: usize, start: usize, len: usize) -> Slot {
        Slot { buf, start, len }
    }
}

/// A message of a round; peers are communicator ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transfer {
    Send { to: usize, from: Slot },
    Recv { from: usize, into: Slot },
}

/// A step run on this rank after a round's messages have finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Local {
    /// `into = into ⊕ from` (different buffers).
    Fold { into: Slot, from: Slot },
    /// `to = from` (different buffers, or disjoint ranges of one).
    Copy { to: Slot, from: Slot },
}

/// One round: its messages go out together; its local steps follow them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Round {
    pub(crate) transfers: Vec<Transfer>,
    pub(crate) local: Vec<Local>,
}

/// A whole collective on one rank.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) rounds: Vec<Round>,
}

impl Plan {
    /// Appends a round (skipped when it has neither messages nor local steps).
    pub(crate) fn round(&mut self, transfers: Vec<Transfer>, local: Vec<Local>) {
        if !(transfers.is_empty() && local.is_empty()) {
            self.rounds.push(Round { transfers, local });
        }
    }
}

/// Where a running schedule's messages go: the communicator's world ranks, its context
/// and call number, and the call's signature.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    pub(crate) members: Arc<[usize]>,
    pub(crate) edge: u32,
    pub(crate) tag: u32,
    pub(crate) signature: Signature,
}

/// A request of the round under way, and the bytes a receive must get.
#[derive(Debug, Clone, Copy)]
struct Pending {
    id: u64,
    recv: Option<(usize, usize)>,
}

/// A plan being executed over buffers of `T`; [`Schedule::advance`] runs it round by round.
pub(crate) struct Running<T: Element> {
    name: &'static str,
    plan: Plan,
    /// The round under way (its messages posted) or next to post.
    round: usize,
    posted: bool,
    pending: Vec<Pending>,
    bufs: Vec<Vec<T>>,
    /// The buffer handed back at the end.
    result: usize,
    op: Option<Op<T>>,
    route: Route,
}

impl<T: Element> Running<T> {
    pub(crate) fn new(
        name: &'static str,
        plan: Plan,
        bufs: Vec<Vec<T>>,
        result: usize,
        op: Option<Op<T>>,
        route: Route,
    ) -> Running<T> {
        Running {
            name,
            plan,
            round: 0,
            posted: false,
            pending: Vec::new(),
            bufs,
            result,
            op,
            route,
        }
    }

    fn post(&mut self, engine: &mut Engine) -> Result<()> {
        let label = Label::collective(Codec::Array(T::DTYPE), self.route.signature);
        let size = std::mem::size_of::<T>();
        for t in &self.plan.rounds[self.round].transfers {
            let (slot, peer) = match *t {
                Transfer::Send { to, from } => (from, to),
                Transfer::Recv { from, into } => (into, from),
            };
            let buf = &mut self.bufs[slot.buf][slot.start..slot.start + slot.len];
            let mem = Memory::Borrowed { ptr: buf.as_mut_ptr().cast::<u8>(), len: slot.len * size };
            let world = self.route.members[peer];
            let (edge, tag) = (self.route.edge, self.route.tag);
            let pending = match t {
                Transfer::Send { .. } => {
                    Pending { id: engine.enqueue_send(world, edge, tag, label, mem)?, recv: None }
                }
                Transfer::Recv { .. } => {
                    let pattern = Pattern { peer: Some(world), edge, tag: Some(tag) };
                    let id = engine.enqueue_recv(pattern, label, mem)?;
                    Pending { id, recv: Some((peer, slot.len * size)) }
                }
            };
            self.pending.push(pending);
        }
        Ok(())
    }

    /// Takes the round's finished requests; a receive must have got the bytes it expected
    /// (the v-variants' counts are not in the signature).
    fn finish_round(&mut self, engine: &mut Engine) -> Result<()> {
        for p in std::mem::take(&mut self.pending) {
            let f = engine.take_finished(p.id);
            let (Some((peer, want)), Some(m)) = (p.recv, f.and_then(|f| f.matched)) else {
                continue;
            };
            if m.len as usize != want {
                // The ranks passed counts that disagree: as fatal as another call.
                return Err(Error::CollectiveMismatch {
                    rank: peer,
                    theirs: format!("{} sending {} bytes", self.name, m.len),
                    ours: format!("{} expecting {want} bytes from it", self.name),
                });
            }
        }
        let local = std::mem::take(&mut self.plan.rounds[self.round].local);
        for step in local {
            self.run(step);
        }
        Ok(())
    }

    fn run(&mut self, step: Local) {
        let (to, from) = match step {
            Local::Fold { into, from } | Local::Copy { to: into, from } => (into, from),
        };
        let (dst, src) = two_slots(&mut self.bufs, to, from);
        match (step, &self.op) {
            (Local::Fold { .. }, Some(op)) => op.apply(dst, src),
            _ => dst.copy_from_slice(src),
        }
    }
}

/// The mutable range `to` and the shared range `from` of `bufs` (different buffers, or
/// disjoint ranges of one).
fn two_slots<T>(bufs: &mut [Vec<T>], to: Slot, from: Slot) -> (&mut [T], &[T]) {
    let range = |s: Slot| s.start..s.start + s.len;
    if to.buf == from.buf {
        let buf = &mut bufs[to.buf];
        assert!(
            to.start + to.len <= from.start || from.start + from.len <= to.start,
            "a local step's ranges overlap"
        );
        if to.start < from.start {
            let (a, b) = buf.split_at_mut(from.start);
            return (&mut a[range(to)], &b[..from.len]);
        }
        let (a, b) = buf.split_at_mut(to.start);
        return (&mut b[..to.len], &a[range(from)]);
    }
    if to.buf < from.buf {
        let (a, b) = bufs.split_at_mut(from.buf);
        (&mut a[to.buf][range(to)], &b[0][range(from)])
    } else {
        let (a, b) = bufs.split_at_mut(to.buf);
        (&mut b[0][range(to)], &a[from.buf][range(from)])
    }
}

impl<T: Element> Schedule for Running<T> {
    fn advance(&mut self, engine: &mut Engine) -> Result<Advance> {
        let r = self.step(engine);
        if r.is_err() {
            // The schedule ends here: requests still posted must not keep pointers into
            // its buffers (a send goes on from a copy, a receive is dropped).
            for p in self.pending.drain(..) {
                engine.detach(p.id);
            }
        }
        r
    }

    fn pending(&self) -> Vec<u64> {
        self.pending.iter().map(|p| p.id).collect()
    }

    fn name(&self) -> &'static str {
        self.name
    }
}

impl<T: Element> Running<T> {
    fn step(&mut self, engine: &mut Engine) -> Result<Advance> {
        let mut moved = false;
        loop {
            if self.posted {
                if !self.pending.iter().all(|p| engine.is_finished(p.id)) {
                    return Ok(if moved { Advance::Moved } else { Advance::Waiting });
                }
                self.finish_round(engine)?;
                self.round += 1;
                self.posted = false;
                moved = true;
            }
            if self.round == self.plan.rounds.len() {
                return Ok(Advance::Done(Box::new(std::mem::take(&mut self.bufs[self.result]))));
            }
            self.posted = true; // what `post` posted before a failure is detached too
            self.post(engine)?;
        }
    }
}

/// What [`Running`] hands back, typed again.
pub(crate) fn output<T: Element>(out: Output) -> Vec<T> {
    *out.downcast::<Vec<T>>().expect("a schedule hands back the buffers it was started with")
}
