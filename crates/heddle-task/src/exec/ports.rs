//! The queues between tasks and edges on one worker.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

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

pub(crate) type SharedInbox<U> = Rc<RefCell<Inbox<U>>>;

/// Where a task's emitted records go on one outgoing edge.
pub(crate) trait OutPort<T> {
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
pub(crate) struct OpPort<T>(pub(crate) Rc<RefCell<Outbox<T>>>);

impl<T> OutPort<T> for OpPort<T> {
    fn push(&self, items: &mut Vec<T>) {
        self.0.borrow_mut().items.extend(items.drain(..));
    }

    fn backlog(&self) -> usize {
        self.0.borrow().items.len()
    }

    fn finish(&self) {
        self.0.borrow_mut().finished = true;
    }
}

/// A chained port: records go straight into the downstream task's inbox on this worker,
/// never serialized.
pub(crate) struct LocalPort<T, U> {
    pub(crate) inbox: SharedInbox<U>,
    pub(crate) map: fn(T) -> U,
}

impl<T, U> OutPort<T> for LocalPort<T, U> {
    fn push(&self, items: &mut Vec<T>) {
        let map = self.map;
        self.inbox.borrow_mut().items.extend(items.drain(..).map(map));
    }

    fn backlog(&self) -> usize {
        self.inbox.borrow().items.len()
    }

    fn finish(&self) {
        self.inbox.borrow_mut().ended += 1;
    }
}
