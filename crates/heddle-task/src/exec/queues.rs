//! The queues between tasks and edges on one worker.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

/// Records a task may have waiting on one outgoing port, or in its inbox, before the
/// executor stops running its producer (back-pressure inside the worker).
pub(crate) const QUEUE_CAP: usize = 8192;

/// A task's input queue, fed by every incoming edge.
#[derive(Debug)]
pub(crate) struct Inbox<U> {
    pub(crate) items: VecDeque<U>,
    /// Incoming edges that ended this pass.
    pub(crate) ended: usize,
}

impl<U> Default for Inbox<U> {
    fn default() -> Self {
        Inbox { items: VecDeque::new(), ended: 0 }
    }
}

/// An inbox shared by the task (on its executor thread) and the edges feeding it.
pub(crate) type SharedInbox<U> = Arc<Mutex<Inbox<U>>>;

/// Locks a queue. A queue is never left half-updated (every critical section only moves
/// whole records), so a lock poisoned by a panicking task is still consistent.
pub(crate) fn lock<Q>(queue: &Mutex<Q>) -> MutexGuard<'_, Q> {
    queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Where a task's emitted records go on one outgoing edge.
pub(crate) trait TaskOutput<T>: Send + Sync {
    /// Takes every record of `items`.
    fn push(&self, items: &mut Vec<T>);
    /// Records pushed and not yet taken by the edge.
    fn backlog(&self) -> usize;
    /// The task has ended its output for this pass.
    fn finish(&self);
}

/// A port into an operation: records wait here until the operation accepts them.
#[derive(Debug)]
pub(crate) struct Outbox<T> {
    pub(crate) items: VecDeque<T>,
    pub(crate) finished: bool,
}

impl<T> Default for Outbox<T> {
    fn default() -> Self {
        Outbox { items: VecDeque::new(), finished: false }
    }
}

/// An outgoing port into an operation.
pub(crate) struct EdgeOutput<T>(pub(crate) Arc<Mutex<Outbox<T>>>);

impl<T: Send> TaskOutput<T> for EdgeOutput<T> {
    fn push(&self, items: &mut Vec<T>) {
        lock(&self.0).items.extend(items.drain(..));
    }

    fn backlog(&self) -> usize {
        lock(&self.0).items.len()
    }

    fn finish(&self) {
        lock(&self.0).finished = true;
    }
}

/// A chained port: records go straight into the downstream task's inbox on this worker,
/// never serialized.
pub(crate) struct ChainedOutput<T, U> {
    pub(crate) inbox: SharedInbox<U>,
    pub(crate) map: fn(T) -> U,
}

impl<T, U: Send> TaskOutput<T> for ChainedOutput<T, U> {
    fn push(&self, items: &mut Vec<T>) {
        let map = self.map;
        lock(&self.inbox).items.extend(items.drain(..).map(map));
    }

    fn backlog(&self) -> usize {
        lock(&self.inbox).items.len()
    }

    fn finish(&self) {
        lock(&self.inbox).ended += 1;
    }
}
