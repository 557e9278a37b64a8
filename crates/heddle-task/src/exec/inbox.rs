//! A task's input queue on one worker, fed by every incoming edge (each through a slot of
//! its own), where checkpoint barriers align.

use std::any::Any;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::checkpoint::Codec;
use crate::Result;

/// Records a task may have waiting on one outgoing port, or in its inbox, before the
/// executor stops running its producer (back-pressure inside the worker).
pub(crate) const QUEUE_CAP: usize = 8192;

/// A task's input queue, fed by every incoming edge (each through a slot of its own).
///
/// Checkpoint barriers align here: an input that has delivered barrier `id` delivers
/// nothing more until the task has taken its snapshot ([`Inbox::blocked`]), so every
/// record in the queue comes before the barrier on its input. Once every input has
/// delivered it (or ended) and the queue is empty, the task snapshots
/// ([`Inbox::aligned`]). A checkpoint gone unaligned ([`Inbox::go_unaligned`]) instead
/// keeps a copy of the queue, and of what each input delivers until its barrier
/// ([`Inbox::captured`]).
#[derive(Debug)]
pub(crate) struct Inbox<U> {
    pub(crate) items: VecDeque<U>,
    /// Incoming edges that ended this pass.
    pub(crate) ended: usize,
    /// Whether each input slot ended this pass.
    ended_slots: Vec<bool>,
    /// The last barrier each input slot delivered.
    seen: Vec<u64>,
    /// The barrier being aligned, and the slots that have delivered it.
    barrier: Option<(u64, Vec<bool>)>,
    /// What in-memory (chained) inputs handed over past their barrier, and whether they
    /// ended there: it waits until the task has taken its snapshot.
    parked: Vec<(usize, VecDeque<U>, bool)>,
    /// The task has ended: barriers no longer align here.
    retired: bool,
    /// The record type's codec, for unaligned checkpoints (none: always aligned).
    pub(crate) codec: Option<Codec<U>>,
    /// An unaligned checkpoint's copy of the records in flight to the task.
    capture: Option<Capture>,
}

/// What an unaligned checkpoint copies: the queue when the task snapshotted, then what
/// every input whose barrier had not arrived delivers until it does.
#[derive(Debug)]
struct Capture {
    id: u64,
    /// Slots still delivering records from before the barrier.
    open: Vec<bool>,
    bytes: Vec<u8>,
    failed: Option<crate::Error>,
}

impl<U> Default for Inbox<U> {
    fn default() -> Self {
        Inbox {
            items: VecDeque::new(),
            ended: 0,
            ended_slots: Vec::new(),
            seen: Vec::new(),
            barrier: None,
            parked: Vec::new(),
            retired: false,
            codec: None,
            capture: None,
        }
    }
}

impl<U> Inbox<U> {
    /// A new input: its slot.
    pub(crate) fn add_slot(&mut self) -> usize {
        self.ended_slots.push(false);
        self.seen.push(0);
        self.ended_slots.len() - 1
    }

    /// A new pass: no input has ended.
    pub(crate) fn begin_pass(&mut self) {
        self.ended = 0;
        self.retired = false;
        self.ended_slots.iter_mut().for_each(|e| *e = false);
    }

    /// Input `slot` ended this pass.
    pub(crate) fn end(&mut self, slot: usize) {
        self.close_capture(slot);
        self.ended += 1;
        if let Some(e) = self.ended_slots.get_mut(slot) {
            *e = true;
        }
    }

    /// Input `slot` delivered checkpoint barrier `id`.
    pub(crate) fn barrier(&mut self, slot: usize, id: u64) {
        if let Some(s) = self.seen.get_mut(slot) {
            *s = (*s).max(id);
        }
        if self.retired {
            return;
        }
        if self.capture.as_ref().is_some_and(|c| c.id == id) {
            // Unaligned: this input's records from before the barrier are all in.
            self.close_capture(slot);
            return;
        }
        let slots = self.ended_slots.len();
        let (_, arrived) = self.barrier.get_or_insert_with(|| (id, vec![false; slots]));
        if let Some(a) = arrived.get_mut(slot) {
            *a = true;
        }
    }

    /// Whether input `slot` still owes barrier `id` (it has neither delivered it nor
    /// ended).
    pub(crate) fn awaits(&self, slot: usize, id: u64) -> bool {
        self.seen.get(slot).is_some_and(|&s| s < id)
            && !self.ended_slots.get(slot).copied().unwrap_or(true)
    }

    /// Whether input `slot` has delivered the barrier being aligned (it waits).
    pub(crate) fn blocked(&self, slot: usize) -> bool {
        self.barrier.as_ref().is_some_and(|(_, a)| a.get(slot).copied().unwrap_or(false))
    }

    /// The barrier every input has delivered (or ended before), once the records before
    /// it are all executed.
    pub(crate) fn aligned(&self) -> Option<u64> {
        let (id, arrived) = self.barrier.as_ref()?;
        let all = arrived.iter().zip(&self.ended_slots).all(|(a, e)| *a || *e);
        (all && self.items.is_empty()).then_some(*id)
    }

    /// The task took its snapshot: the inputs go on, starting with what they handed over
    /// past the barrier meanwhile.
    pub(crate) fn release(&mut self) {
        self.barrier = None;
        for (slot, items, ended) in std::mem::take(&mut self.parked) {
            self.items.extend(items);
            if ended {
                self.end(slot);
            }
        }
    }

    /// The task has ended: later barriers pass by, and nothing waits for it.
    pub(crate) fn retire(&mut self) {
        self.retired = true;
        self.release();
    }

    /// Records an in-memory input hands over: queued, or parked while its slot is past
    /// the barrier being aligned.
    pub(crate) fn take_in(&mut self, slot: usize, items: impl Iterator<Item = U>) {
        if self.blocked(slot) {
            self.parked_slot(slot).1.extend(items);
        } else {
            for item in items {
                self.push(slot, item);
            }
        }
    }

    /// Queues one record of input `slot` (copied too while an unaligned checkpoint
    /// captures that input).
    pub(crate) fn push(&mut self, slot: usize, item: U) {
        if let (Some(c), Some(codec)) = (&mut self.capture, &self.codec) {
            if c.open.get(slot).copied().unwrap_or(false) && c.failed.is_none() {
                if let Err(e) = codec.encode(&item, &mut c.bytes) {
                    c.failed = Some(e);
                }
            }
        }
        self.items.push_back(item);
    }

    /// Gives up aligning the barrier under way (the checkpoint is overdue): returns its id
    /// and a copy of the queue, and from now on copies what each input that has not
    /// delivered the barrier delivers until it does. Inputs past the barrier go on (what
    /// they handed over meanwhile is queued, not copied: it comes after the barrier).
    /// Every input having ended, checkpoint `due` (if the task owes one) goes the same
    /// way: no barrier will come, and the queue is all there is to copy. `None` without a
    /// barrier under way (or such a due checkpoint), or without a codec.
    pub(crate) fn go_unaligned(&mut self, due: Option<u64>) -> Option<(u64, Result<Vec<u8>>)> {
        let codec = self.codec?;
        let all_ended = self.ended_slots.iter().all(|e| *e);
        let (id, arrived) = match (self.barrier.take(), due) {
            (Some(b), _) => b,
            (None, Some(id)) if all_ended => (id, vec![true; self.ended_slots.len()]),
            _ => return None,
        };
        let mut bytes = Vec::new();
        let copied = codec.encode_all(&self.items, &mut bytes).map(|()| bytes);
        let open = arrived.iter().zip(&self.ended_slots).map(|(a, e)| !a && !e).collect();
        self.capture = Some(Capture { id, open, bytes: Vec::new(), failed: None });
        self.release();
        Some((id, copied))
    }

    /// The records an unaligned checkpoint copied since [`Inbox::go_unaligned`], once
    /// every input has delivered its barrier (or ended); `None` while some still may.
    pub(crate) fn captured(&mut self) -> Option<Result<Vec<u8>>> {
        if self.capture.as_ref()?.open.iter().any(|o| *o) {
            return None;
        }
        let c = self.capture.take()?;
        Some(match c.failed {
            Some(e) => Err(e),
            None => Ok(c.bytes),
        })
    }

    /// Whether an unaligned checkpoint still copies what some input delivers.
    pub(crate) fn capturing(&self) -> bool {
        self.capture.is_some()
    }

    fn close_capture(&mut self, slot: usize) {
        if let Some(o) = self.capture.as_mut().and_then(|c| c.open.get_mut(slot)) {
            *o = false;
        }
    }

    /// Queues the records a restored checkpoint held in flight to the task.
    pub(crate) fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        let codec = self.codec.ok_or_else(|| {
            crate::Error::Graph(
                "a checkpoint holds in-flight records for a task whose inputs have no \
                 record codec"
                    .into(),
            )
        })?;
        self.items.extend(codec.decode_all(bytes)?);
        Ok(())
    }

    /// An in-memory input ended (parked too while past the barrier).
    pub(crate) fn end_in(&mut self, slot: usize) {
        if self.blocked(slot) {
            self.parked_slot(slot).2 = true;
        } else {
            self.end(slot);
        }
    }

    fn parked_slot(&mut self, slot: usize) -> &mut (usize, VecDeque<U>, bool) {
        let at = match self.parked.iter().position(|p| p.0 == slot) {
            Some(at) => at,
            None => {
                self.parked.push((slot, VecDeque::new(), false));
                self.parked.len() - 1
            }
        };
        &mut self.parked[at]
    }
}

/// An inbox shared by the task (on its executor thread) and the edges feeding it.
pub(crate) type SharedInbox<U> = Arc<Mutex<Inbox<U>>>;

/// Locks a queue. A queue is never left half-updated (every critical section only moves
/// whole records), so a lock poisoned by a panicking task is still consistent.
pub(crate) fn lock<Q>(queue: &Mutex<Q>) -> MutexGuard<'_, Q> {
    queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A fresh inbox, type-erased, for a downstream task of input type `U`.
pub(crate) fn new_inbox<U: Send + 'static>() -> (SharedInbox<U>, Box<dyn Any>) {
    let inbox: SharedInbox<U> = Arc::new(Mutex::new(Inbox::default()));
    (inbox.clone(), Box::new(inbox))
}
