//! Choice: an arbiter over several (port, handler) branches that runs the handler of
//! the first branch whose port delivers an item and cancels the others, whose items
//! stay in their ports.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::arbiter::{Activation, Arbiter};
use super::dispatcher::DispatcherQueue;
use super::port::{lock, next_listener_id, Listener, ListenerId, Port, PortCore, Verdict};

/// A branch not yet attached: attaches itself for a choice.
trait PendingBranch: Send {
    fn attach(self: Box<Self>, shared: &Arc<ChoiceShared>, queue: &DispatcherQueue);
}

/// Detaches one attached branch from its port.
trait AttachedBranch: Send {
    fn detach(&self);
}

/// State shared by the branches of one activated choice.
struct ChoiceShared {
    /// Set by the winning branch (or by cancel); at most one handler ever runs.
    decided: AtomicBool,
    /// Every branch attached so far, to detach the losers.
    attached: Mutex<Vec<Box<dyn AttachedBranch>>>,
}

impl ChoiceShared {
    fn detach_all(&self) {
        let attached = std::mem::take(&mut *lock(&self.attached));
        for branch in &attached {
            branch.detach();
        }
    }
}

struct BranchTarget<T> {
    port: Weak<PortCore<T>>,
    id: ListenerId,
}

impl<T: Send + 'static> AttachedBranch for BranchTarget<T> {
    fn detach(&self) {
        if let Some(port) = self.port.upgrade() {
            port.detach(self.id);
        }
    }
}

type OnceHandler<T> = Box<dyn FnOnce(T) + Send + 'static>;

/// The listener of one branch.
struct BranchListener<T> {
    shared: Arc<ChoiceShared>,
    queue: DispatcherQueue,
    handler: Mutex<Option<OnceHandler<T>>>,
}

impl<T: Send + 'static> Listener<T> for BranchListener<T> {
    fn offer(&self, items: &mut VecDeque<T>) -> Verdict {
        if self
            .shared
            .decided
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Verdict::DETACH;
        }
        let (Some(item), Some(handler)) = (items.pop_front(), lock(&self.handler).take()) else {
            return Verdict::FIRED;
        };
        self.queue.spawn_task(Box::new(move || handler(item)));
        Verdict::FIRED
    }

    fn notify(&self) {
        self.shared.detach_all();
    }
}

struct Branch<T> {
    port: Port<T>,
    handler: OnceHandler<T>,
}

impl<T: Send + 'static> PendingBranch for Branch<T> {
    fn attach(self: Box<Self>, shared: &Arc<ChoiceShared>, queue: &DispatcherQueue) {
        let id = next_listener_id();
        lock(&shared.attached)
            .push(Box::new(BranchTarget { port: Arc::downgrade(self.port.core()), id }));
        let listener = BranchListener {
            shared: Arc::clone(shared),
            queue: queue.clone(),
            handler: Mutex::new(Some(self.handler)),
        };
        self.port.core().attach(id, Arc::new(listener));
    }
}

/// The branches of a choice, built up before activating it with
/// [`DispatcherQueue::choice`]. Branch ports may carry different item types.
///
/// ```
/// use heddle_task::ports::{Choice, Dispatcher, Port};
/// use std::time::Duration;
///
/// let dispatcher = Dispatcher::new(2)?;
/// let (results, failures, out) = (Port::<u64>::new(), Port::<String>::new(), Port::new());
/// let (ok, failed) = (out.clone(), out.clone());
/// dispatcher.queue().choice(
///     Choice::new()
///         .branch(&results, move |value| ok.post(format!("got {value}")))
///         .branch(&failures, move |error| failed.post(format!("failed: {error}"))),
/// );
/// failures.post("disk full".to_owned());
/// results.post(7); // too late: the choice is decided, 7 stays in its port
/// assert_eq!(out.take_timeout(Duration::from_secs(10)).as_deref(), Some("failed: disk full"));
/// assert_eq!(results.try_take(), Some(7));
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Default)]
pub struct Choice {
    branches: Vec<Box<dyn PendingBranch>>,
}

impl Choice {
    /// A choice with no branches yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a branch: if `port` is the first to deliver an item, `handler` runs with it.
    /// Earlier branches win when several ports already hold items at activation.
    #[must_use]
    pub fn branch<T, H>(mut self, port: &Port<T>, handler: H) -> Self
    where
        T: Send + 'static,
        H: FnOnce(T) + Send + 'static,
    {
        self.branches.push(Box::new(Branch { port: port.clone(), handler: Box::new(handler) }));
        self
    }

    /// Number of branches.
    pub fn len(&self) -> usize {
        self.branches.len()
    }

    /// Whether there are no branches.
    pub fn is_empty(&self) -> bool {
        self.branches.is_empty()
    }
}

impl fmt::Debug for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Choice").field("branches", &self.branches.len()).finish()
    }
}

impl Arbiter for ChoiceShared {
    fn cancel(&self) -> bool {
        let was_active = !self.decided.swap(true, Ordering::AcqRel);
        self.detach_all();
        was_active
    }

    fn is_active(&self) -> bool {
        !self.decided.load(Ordering::Acquire)
    }
}

impl DispatcherQueue {
    /// Choice: runs on this dispatcher the handler of the first branch whose port
    /// delivers an item, exactly once; the other branches are cancelled and their
    /// ports keep their items. A choice with no branches is inactive from the start.
    pub fn choice(&self, choice: Choice) -> Activation {
        let shared = Arc::new(ChoiceShared {
            decided: AtomicBool::new(choice.branches.is_empty()),
            attached: Mutex::new(Vec::with_capacity(choice.branches.len())),
        });
        for branch in choice.branches {
            if shared.decided.load(Ordering::Acquire) {
                break;
            }
            branch.attach(&shared, self);
        }
        if shared.decided.load(Ordering::Acquire) {
            // Decided while attaching: detach whatever attached after the winner's cleanup.
            shared.detach_all();
        }
        Activation::new(shared)
    }
}
