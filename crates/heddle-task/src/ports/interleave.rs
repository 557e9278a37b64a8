//! Interleave: reader/writer coordination of persistent receivers in three groups.
//! Concurrent handlers may run in parallel with each other; an exclusive handler runs
//! alone; a teardown handler runs alone, once, and retires the whole interleave.
//!
//! Items stay in their ports until the interleave can run their handler, so nothing is
//! taken that will not run. Teardown goes before exclusive, exclusive before concurrent:
//! while a teardown or exclusive item waits, no new concurrent handler starts, and the
//! waiting one runs as soon as the running handlers have finished.

use std::collections::VecDeque;
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::arbiter::{Activation, Arbiter};
use super::dispatcher::{DispatcherQueue, Task};
use super::port::{lock, next_listener_id, Listener, ListenerId, Port, PortCore, Verdict};

/// Which group a branch belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Group {
    Teardown,
    Exclusive,
    Concurrent,
}

/// One (port, handler) pair of an interleave, its item type erased.
trait Branch: Send + Sync {
    /// The group it was added to.
    fn group(&self) -> Group;
    /// Whether the port holds an item.
    fn has_item(&self) -> bool;
    /// Takes one item and wraps the handler call in a task that reports completion.
    fn take_task(&self, core: &Arc<InterleaveCore>) -> Option<Task>;
    /// Attaches the branch's listener to its port.
    fn attach(&self, core: &Arc<InterleaveCore>);
    /// Detaches the listener.
    fn detach(&self);
}

/// Who is running now.
#[derive(Debug, Default)]
struct Running {
    concurrent: usize,
    exclusive: bool,
    retired: bool,
}

/// The shared state of one activated interleave.
struct InterleaveCore {
    queue: DispatcherQueue,
    running: Mutex<Running>,
    /// Mirrors `running.retired` for listeners, which must not take the state lock.
    retired: AtomicBool,
    teardown: Vec<Box<dyn Branch>>,
    exclusive: Vec<Box<dyn Branch>>,
    concurrent: Vec<Box<dyn Branch>>,
}

impl InterleaveCore {
    /// Starts every handler the rules allow now. Called after each post to one of the
    /// ports and after each handler finishes.
    fn evaluate(self: &Arc<Self>) {
        let mut tasks: Vec<Task> = Vec::new();
        {
            let mut running = lock(&self.running);
            if running.retired || running.exclusive || self.queue.is_shut_down() {
                return;
            }
            for (group, branches) in
                [(Group::Teardown, &self.teardown), (Group::Exclusive, &self.exclusive)]
            {
                for branch in branches {
                    if !branch.has_item() {
                        continue;
                    }
                    if running.concurrent > 0 {
                        // Wait for the running readers; admit no new ones meanwhile.
                        return;
                    }
                    if let Some(task) = branch.take_task(self) {
                        running.exclusive = true;
                        if group == Group::Teardown {
                            running.retired = true;
                            self.retired.store(true, Ordering::Release);
                            self.detach_all();
                        }
                        drop(running);
                        self.queue.spawn_task(task);
                        return;
                    }
                }
            }
            for branch in &self.concurrent {
                while let Some(task) = branch.take_task(self) {
                    running.concurrent += 1;
                    tasks.push(task);
                }
            }
        }
        for task in tasks {
            self.queue.spawn_task(task);
        }
    }

    /// Records that a handler of `group` finished and starts what may run next.
    fn finished(self: &Arc<Self>, group: Group) {
        {
            let mut running = lock(&self.running);
            match group {
                Group::Concurrent => running.concurrent -= 1,
                Group::Exclusive => running.exclusive = false,
                Group::Teardown => return,
            }
        }
        self.evaluate();
    }

    fn detach_all(&self) {
        for branch in self.teardown.iter().chain(&self.exclusive).chain(&self.concurrent) {
            branch.detach();
        }
    }
}

/// Reports a handler's end to its interleave, even if the handler panics.
struct Completion {
    core: Arc<InterleaveCore>,
    group: Group,
}

impl Drop for Completion {
    fn drop(&mut self) {
        self.core.finished(self.group);
    }
}

type OnceHandler<T> = Box<dyn FnOnce(T) + Send + 'static>;

/// How a branch calls its handler: shared (exclusive, concurrent) or once (teardown).
enum BranchHandler<T> {
    Shared(Arc<dyn Fn(T) + Send + Sync + 'static>),
    Once(Mutex<Option<OnceHandler<T>>>),
}

struct TypedBranch<T> {
    port: Weak<PortCore<T>>,
    id: ListenerId,
    group: Group,
    handler: BranchHandler<T>,
}

impl<T: Send + 'static> Branch for TypedBranch<T> {
    fn group(&self) -> Group {
        self.group
    }

    fn has_item(&self) -> bool {
        self.port.upgrade().is_some_and(|port| port.len_hint() > 0)
    }

    fn take_task(&self, core: &Arc<InterleaveCore>) -> Option<Task> {
        let item = self.port.upgrade()?.try_take()?;
        let completion = Completion { core: Arc::clone(core), group: self.group };
        match &self.handler {
            BranchHandler::Shared(handler) => {
                let handler = Arc::clone(handler);
                Some(Box::new(move || {
                    let _completion = completion;
                    handler(item);
                }))
            }
            BranchHandler::Once(slot) => {
                let handler = lock(slot).take()?;
                Some(Box::new(move || {
                    let _completion = completion;
                    handler(item);
                }))
            }
        }
    }

    fn attach(&self, core: &Arc<InterleaveCore>) {
        if let Some(port) = self.port.upgrade() {
            let listener = InterleaveListener { core: Arc::clone(core), _item: PhantomData };
            port.attach(self.id, Arc::new(listener));
        }
    }

    fn detach(&self) {
        if let Some(port) = self.port.upgrade() {
            port.detach(self.id);
        }
    }
}

/// Attached to every port of an interleave: asks for an evaluation after each post.
struct InterleaveListener<T> {
    core: Arc<InterleaveCore>,
    _item: PhantomData<fn(T)>,
}

impl<T: Send + 'static> Listener<T> for InterleaveListener<T> {
    fn offer(&self, _items: &mut VecDeque<T>) -> Verdict {
        if self.core.retired.load(Ordering::Acquire) {
            Verdict::DETACH
        } else {
            Verdict::WATCH
        }
    }

    fn notify(&self) {
        self.core.evaluate();
    }
}

impl Arbiter for InterleaveCore {
    fn cancel(&self) -> bool {
        let was_active = {
            let mut running = lock(&self.running);
            let was_active = !running.retired;
            running.retired = true;
            self.retired.store(true, Ordering::Release);
            was_active
        };
        self.detach_all();
        was_active
    }

    fn is_active(&self) -> bool {
        !self.retired.load(Ordering::Acquire)
    }
}

/// The three receiver groups of an interleave, built up before activating it with
/// [`DispatcherQueue::interleave`]. Every branch listens on its own port (ports may
/// carry different item types); exclusive and concurrent branches are persistent.
///
/// ```
/// use heddle_task::ports::{Dispatcher, Interleave, Port};
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let dispatcher = Dispatcher::new(2)?;
/// let (reads, writes, stop, done) =
///     (Port::<()>::new(), Port::<u64>::new(), Port::<()>::new(), Port::new());
/// let total = Arc::new(AtomicU64::new(0));
/// let (reader, writer, last) = (Arc::clone(&total), Arc::clone(&total), Arc::clone(&total));
/// let finished = done.clone();
/// dispatcher.queue().interleave(
///     Interleave::new()
///         .teardown(&stop, move |()| finished.post(last.load(Ordering::SeqCst)))
///         .exclusive(&writes, move |n| { writer.fetch_add(n, Ordering::SeqCst); })
///         .concurrent(&reads, move |()| { reader.load(Ordering::SeqCst); }),
/// );
/// writes.post(5);
/// reads.post(());
/// writes.post(6);
/// stop.post(());
/// let seen = done.take_timeout(Duration::from_secs(10));
/// assert!(seen.is_some());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Default)]
pub struct Interleave {
    branches: Vec<Box<dyn Branch>>,
}

impl Interleave {
    /// An interleave with no branches yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn push<T: Send + 'static>(
        mut self,
        port: &Port<T>,
        group: Group,
        handler: BranchHandler<T>,
    ) -> Self {
        self.branches.push(Box::new(TypedBranch {
            port: Arc::downgrade(port.core()),
            id: next_listener_id(),
            group,
            handler,
        }));
        self
    }

    /// Adds a teardown branch: the first item on `port` runs `handler` alone, after
    /// every running handler finished, and retires the interleave (no handler of it runs
    /// afterwards, and later items stay in their ports).
    #[must_use]
    pub fn teardown<T, H>(self, port: &Port<T>, handler: H) -> Self
    where
        T: Send + 'static,
        H: FnOnce(T) + Send + 'static,
    {
        self.push(port, Group::Teardown, BranchHandler::Once(Mutex::new(Some(Box::new(handler)))))
    }

    /// Adds an exclusive branch: each item on `port` runs `handler` while no other
    /// handler of the interleave runs.
    #[must_use]
    pub fn exclusive<T, H>(self, port: &Port<T>, handler: H) -> Self
    where
        T: Send + 'static,
        H: Fn(T) + Send + Sync + 'static,
    {
        self.push(port, Group::Exclusive, BranchHandler::Shared(Arc::new(handler)))
    }

    /// Adds a concurrent branch: each item on `port` runs `handler`, in parallel with
    /// other concurrent handlers but never with an exclusive or teardown one.
    #[must_use]
    pub fn concurrent<T, H>(self, port: &Port<T>, handler: H) -> Self
    where
        T: Send + 'static,
        H: Fn(T) + Send + Sync + 'static,
    {
        self.push(port, Group::Concurrent, BranchHandler::Shared(Arc::new(handler)))
    }
}

impl fmt::Debug for Interleave {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Interleave").field("branches", &self.branches.len()).finish()
    }
}

impl DispatcherQueue {
    /// Interleave: activates the branches of `interleave` on this dispatcher under
    /// reader/writer rules (see [`Interleave`]). Cancelling the activation retires it
    /// without running the teardown handler.
    pub fn interleave(&self, interleave: Interleave) -> Activation {
        let mut teardown = Vec::new();
        let mut exclusive = Vec::new();
        let mut concurrent = Vec::new();
        for branch in interleave.branches {
            let group = match branch.group() {
                Group::Teardown => &mut teardown,
                Group::Exclusive => &mut exclusive,
                Group::Concurrent => &mut concurrent,
            };
            group.push(branch);
        }
        let core = Arc::new(InterleaveCore {
            queue: self.clone(),
            running: Mutex::new(Running::default()),
            retired: AtomicBool::new(false),
            teardown,
            exclusive,
            concurrent,
        });
        for branch in core.teardown.iter().chain(&core.exclusive).chain(&core.concurrent) {
            branch.attach(&core);
        }
        core.evaluate();
        if core.retired.load(Ordering::Acquire) {
            core.detach_all();
        }
        Activation::new(core)
    }
}
