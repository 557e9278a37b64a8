//! A task's input queue on one worker, fed by every incoming edge (each through a slot of
//! its own), where checkpoint barriers align.

use std::any::Any;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

/// Records a task may have waiting on one outgoing port, or in its inbox, before the
/// executor stops running its producer (back-pressure inside the worker).
pub(crate) const QUEUE_CAP: usize = 8192;

/// A task's input queue, fed by every incoming edge (each through a slot of its own).
///
/// Checkpoint barriers align here: an input that has delivered barrier `id` delivers
/// nothing more until the task has taken its snapshot ([`Inbox::blocked`]), so every
/// record in the queue comes before the barrier on its input. Once every input has
/// delivered it (or ended) and the queue is empty, the task snapshots
/// ([`Inbox::aligned`]).
#[derive(Debug)]
pub(crate) struct Inbox<U> {
    pub(crate) items: VecDeque<U>,
    /// Incoming edges that ended this pass.
    pub(crate) ended: usize,
    /// Whether each input slot ended this pass.
    ended_slots: Vec<bool>,
    /// The barrier being aligned, and the slots that have delivered it.
    barrier: Option<(u64, Vec<bool>)>,
    /// What in-memory (chained) inputs handed over past their barrier, and whether they
    /// ended there: it waits until the task has taken its snapshot.
    parked: Vec<(usize, VecDeque<U>, bool)>,
    /// The task has ended: barriers no longer align here.
    retired: bool,
}

impl<U> Default for Inbox<U> {
    fn default() -> Self {
        Inbox {
            items: VecDeque::new(),
            ended: 0,
            ended_slots: Vec::new(),
            barrier: None,
            parked: Vec::new(),
            retired: false,
        }
    }
}

impl<U> Inbox<U> {
    /// A new input: its slot.
    pub(crate) fn add_slot(&mut self) -> usize {
        self.ended_slots.push(false);
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
        self.ended += 1;
        if let Some(e) = self.ended_slots.get_mut(slot) {
            *e = true;
        }
    }

    /// Input `slot` delivered checkpoint barrier `id`.
    pub(crate) fn barrier(&mut self, slot: usize, id: u64) {
        if self.retired {
            return;
        }
        let slots = self.ended_slots.len();
        let (_, arrived) = self.barrier.get_or_insert_with(|| (id, vec![false; slots]));
        if let Some(a) = arrived.get_mut(slot) {
            *a = true;
        }
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
            self.items.extend(items);
        }
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
