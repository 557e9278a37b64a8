//! `Port<T>`: a typed, unbounded message queue whose arrivals activate the receivers
//! attached to it.
//!
//! A port keeps its queued items and its listeners (the receive side of every arbiter
//! attached to it) under one mutex. A post appends the item and offers the queue to each
//! listener in attachment order until the queue is empty; a listener either takes items
//! on the spot (receive, multiple-item receive, choice, a blocked `take_timeout`) or asks
//! to be notified once the lock is released (join and interleave, which must look at more
//! than one port). Posting never waits for anything but that mutex; only
//! [`Port::take_timeout`] waits, for an item.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

/// Identifies one listener attached to one port.
pub(crate) type ListenerId = u64;

/// A fresh listener id, unique within the process.
pub(crate) fn next_listener_id() -> ListenerId {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Locks a mutex, ignoring poisoning: the data under our mutexes is never left half
/// updated by a panic (handlers never run while one is held).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a listener wants after it was offered a port's queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Stay attached to the port.
    pub(crate) keep: bool,
    /// Call [`Listener::notify`] once the port's lock is released.
    pub(crate) notify: bool,
}

impl Verdict {
    /// Stay attached, nothing more to do.
    pub(crate) const KEEP: Verdict = Verdict { keep: true, notify: false };
    /// Detach, nothing more to do.
    pub(crate) const DETACH: Verdict = Verdict { keep: false, notify: false };
    /// Stay attached and be notified after the lock is released.
    pub(crate) const WATCH: Verdict = Verdict { keep: true, notify: true };
    /// Detach and be notified after the lock is released.
    pub(crate) const FIRED: Verdict = Verdict { keep: false, notify: true };
}

/// The receive side of an arbiter, attached to one port.
pub(crate) trait Listener<T>: Send + Sync {
    /// Called with the port locked and at least one item queued. Takes the items it can
    /// use now; must not lock any other port.
    fn offer(&self, items: &mut VecDeque<T>) -> Verdict;

    /// Called without any port lock held when [`Listener::offer`] asked for it.
    fn notify(&self) {}
}

type Attached<T> = (ListenerId, Arc<dyn Listener<T>>);

/// Items and listeners of one port, guarded by its mutex.
pub(crate) struct PortState<T> {
    /// Items posted and not yet taken, oldest first.
    pub(crate) items: VecDeque<T>,
    listeners: Vec<Attached<T>>,
}

/// Listeners to notify or drop once a port's lock is released. Holds the first one
/// inline so the common single-listener case does not allocate.
pub(crate) struct AfterUnlock<T> {
    first: Option<(Arc<dyn Listener<T>>, bool)>,
    more: Vec<(Arc<dyn Listener<T>>, bool)>,
}

impl<T> AfterUnlock<T> {
    pub(crate) fn new() -> Self {
        AfterUnlock { first: None, more: Vec::new() }
    }

    fn push(&mut self, listener: Arc<dyn Listener<T>>, notify: bool) {
        if self.first.is_none() {
            self.first = Some((listener, notify));
        } else {
            self.more.push((listener, notify));
        }
    }

    /// Notifies the listeners that asked for it and drops the detached ones. Call it
    /// only after the port lock is released.
    pub(crate) fn run(self) {
        for (listener, notify) in self.first.into_iter().chain(self.more) {
            if notify {
                listener.notify();
            }
        }
    }
}

impl<T> PortState<T> {
    /// Offers the queue to every listener in order until it is empty.
    fn offer_all(&mut self, after: &mut AfterUnlock<T>) {
        let mut index = 0;
        while index < self.listeners.len() && !self.items.is_empty() {
            let verdict = self.listeners[index].1.offer(&mut self.items);
            if verdict.keep {
                if verdict.notify {
                    after.push(Arc::clone(&self.listeners[index].1), true);
                }
                index += 1;
            } else {
                let (_, listener) = self.listeners.remove(index);
                after.push(listener, verdict.notify);
            }
        }
    }

    /// Detaches the listener `id`, handing it to `after` to be dropped outside the lock.
    /// Returns whether it was attached.
    pub(crate) fn detach(&mut self, id: ListenerId, after: &mut AfterUnlock<T>) -> bool {
        match self.listeners.iter().position(|(attached, _)| *attached == id) {
            Some(index) => {
                let (_, listener) = self.listeners.remove(index);
                after.push(listener, false);
                true
            }
            None => false,
        }
    }
}

/// The shared inside of a port.
pub(crate) struct PortCore<T> {
    state: Mutex<PortState<T>>,
    /// Number of queued items, written under the lock, readable without it.
    len: AtomicUsize,
}

/// A locked port; publishes the queue length when released.
pub(crate) struct PortLock<'a, T> {
    guard: MutexGuard<'a, PortState<T>>,
    len: &'a AtomicUsize,
}

impl<T> std::ops::Deref for PortLock<'_, T> {
    type Target = PortState<T>;
    fn deref(&self) -> &PortState<T> {
        &self.guard
    }
}

impl<T> std::ops::DerefMut for PortLock<'_, T> {
    fn deref_mut(&mut self) -> &mut PortState<T> {
        &mut self.guard
    }
}

impl<T> Drop for PortLock<'_, T> {
    fn drop(&mut self) {
        self.len.store(self.guard.items.len(), Ordering::Release);
    }
}

impl<T> PortCore<T> {
    /// Locks the port.
    pub(crate) fn lock(&self) -> PortLock<'_, T> {
        PortLock { guard: lock(&self.state), len: &self.len }
    }

    /// Number of queued items, read without locking.
    pub(crate) fn len_hint(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Appends an item and lets the listeners at it.
    pub(crate) fn post(&self, item: T) {
        let mut after = AfterUnlock::new();
        {
            let mut state = self.lock();
            state.items.push_back(item);
            state.offer_all(&mut after);
        }
        after.run();
    }

    /// Takes the oldest item, if any.
    pub(crate) fn try_take(&self) -> Option<T> {
        let mut state = self.lock();
        state.items.pop_front()
    }

    /// Attaches a listener under `id`, first offering it the items already queued.
    pub(crate) fn attach(&self, id: ListenerId, listener: Arc<dyn Listener<T>>) {
        let mut after = AfterUnlock::new();
        {
            let mut state = self.lock();
            let verdict = if state.items.is_empty() {
                Verdict::KEEP
            } else {
                listener.offer(&mut state.items)
            };
            if verdict.keep {
                if verdict.notify {
                    after.push(Arc::clone(&listener), true);
                }
                state.listeners.push((id, listener));
            } else {
                after.push(listener, verdict.notify);
            }
        }
        after.run();
    }

    /// Detaches the listener `id`; returns whether it was still attached.
    pub(crate) fn detach(&self, id: ListenerId) -> bool {
        let mut after = AfterUnlock::new();
        let found = self.lock().detach(id, &mut after);
        after.run();
        found
    }
}

/// Locks two distinct ports in address order (so two joins over the same pair cannot
/// deadlock) and returns the locks in argument order.
///
/// # Panics
///
/// If both are the same port.
pub(crate) fn lock_pair<'a, A, B>(
    first: &'a PortCore<A>,
    second: &'a PortCore<B>,
) -> (PortLock<'a, A>, PortLock<'a, B>) {
    let a = first as *const PortCore<A> as usize;
    let b = second as *const PortCore<B> as usize;
    assert_ne!(a, b, "a join needs two distinct ports");
    if a < b {
        let locked_first = first.lock();
        (locked_first, second.lock())
    } else {
        let locked_second = second.lock();
        (first.lock(), locked_second)
    }
}

/// A typed, unbounded, multi-producer message queue that activates the receivers
/// attached to it.
///
/// Cloning is cheap and every clone is the same port. Posting never blocks beyond a
/// short mutex hold: when a receiver is attached the item is handed to it at once and its
/// handler is queued on its dispatcher, otherwise the item waits in the port until a
/// receiver or [`Port::try_take`] takes it. Items are handed out oldest first.
///
/// ```
/// use heddle_task::ports::Port;
///
/// let port = Port::new();
/// port.post("hello");
/// assert_eq!(port.len(), 1);
/// assert_eq!(port.try_take(), Some("hello"));
/// assert_eq!(port.try_take(), None);
/// ```
pub struct Port<T> {
    core: Arc<PortCore<T>>,
}

impl<T> Clone for Port<T> {
    fn clone(&self) -> Self {
        Port { core: Arc::clone(&self.core) }
    }
}

impl<T> Default for Port<T> {
    fn default() -> Self {
        Port {
            core: Arc::new(PortCore {
                state: Mutex::new(PortState { items: VecDeque::new(), listeners: Vec::new() }),
                len: AtomicUsize::new(0),
            }),
        }
    }
}

impl<T> fmt::Debug for Port<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = lock(&self.core.state);
        f.debug_struct("Port")
            .field("items", &state.items.len())
            .field("receivers", &state.listeners.len())
            .finish()
    }
}

impl<T> Port<T> {
    /// An empty port with no receivers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of items waiting in the port (a snapshot: other threads may change it).
    pub fn len(&self) -> usize {
        self.core.len_hint()
    }

    /// Whether no item is waiting in the port (a snapshot).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether both handles are the same port.
    pub fn same_port(&self, other: &Port<T>) -> bool {
        Arc::ptr_eq(&self.core, &other.core)
    }

    /// The shared inside, for arbiters.
    pub(crate) fn core(&self) -> &Arc<PortCore<T>> {
        &self.core
    }
}

impl<T: Send + 'static> Port<T> {
    /// Posts an item: hands it to the first attached receiver that takes it (queueing
    /// that receiver's handler on its dispatcher), or keeps it until one does.
    pub fn post(&self, item: T) {
        self.core.post(item);
    }

    /// Takes the oldest waiting item without blocking.
    pub fn try_take(&self) -> Option<T> {
        self.core.try_take()
    }

    /// Takes the oldest item, waiting up to `timeout` for one to be posted; `None` if
    /// none came. This is the rendezvous (MPI-style) receive for long-running code: it
    /// spins for up to 50 µs, yields a few times, then parks the calling thread until a
    /// post hands it an item. Called from a dispatcher handler, it occupies that worker
    /// while it waits.
    pub fn take_timeout(&self, timeout: Duration) -> Option<T> {
        if let Some(item) = self.try_take() {
            return Some(item);
        }
        let deadline = Instant::now().checked_add(timeout);
        let mut backoff = Backoff::new(Backoff::RENDEZVOUS_SPIN);
        while !backoff.is_done() {
            if self.core.len_hint() > 0 {
                if let Some(item) = self.try_take() {
                    return Some(item);
                }
            }
            backoff.snooze();
        }
        let waiter = Arc::new(Waiter {
            slot: Mutex::new(None),
            ready: AtomicBool::new(false),
            thread: thread::current(),
        });
        let id = next_listener_id();
        self.core.attach(id, Arc::clone(&waiter) as Arc<dyn Listener<T>>);
        loop {
            if waiter.ready.load(Ordering::Acquire) {
                return lock(&waiter.slot).take();
            }
            match deadline {
                None => thread::park(),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        if self.core.detach(id) {
                            return None;
                        }
                        // It fired under the port lock before we could detach: the
                        // item is already in the slot.
                        return lock(&waiter.slot).take();
                    }
                    thread::park_timeout(deadline - now);
                }
            }
        }
    }
}

/// A thread parked in [`Port::take_timeout`].
struct Waiter<T> {
    slot: Mutex<Option<T>>,
    ready: AtomicBool,
    thread: Thread,
}

impl<T: Send> Listener<T> for Waiter<T> {
    fn offer(&self, items: &mut VecDeque<T>) -> Verdict {
        *lock(&self.slot) = items.pop_front();
        self.ready.store(true, Ordering::Release);
        Verdict::FIRED
    }

    fn notify(&self) {
        self.thread.unpark();
    }
}

/// Bounded waiting before a thread parks: spins (checking between bursts of at most 16
/// spin hints) for a given time, then yields a few times. A rendezvous partner or an
/// idle worker usually sees its item within that window, which saves the park/unpark
/// round trip (tens of microseconds on a virtual machine); anything longer parks.
pub(crate) struct Backoff {
    spin: Duration,
    round: u32,
    yields: u32,
    since: Instant,
}

impl Backoff {
    /// Spin time of a thread blocked in [`Port::take_timeout`].
    pub(crate) const RENDEZVOUS_SPIN: Duration = Duration::from_micros(50);
    /// Spin time of an idle dispatcher worker.
    pub(crate) const WORKER_SPIN: Duration = Duration::from_micros(20);
    /// Yields after spinning, before parking.
    const YIELDS: u32 = 4;

    pub(crate) fn new(spin: Duration) -> Self {
        Backoff { spin, round: 0, yields: 0, since: Instant::now() }
    }

    /// Waits a little: a burst of spin hints, or a yield once the spin time is over.
    pub(crate) fn snooze(&mut self) {
        if self.yields == 0 && (self.round < 4 || self.since.elapsed() < self.spin) {
            for _ in 0..(1u32 << self.round.min(4)) {
                std::hint::spin_loop();
            }
            self.round += 1;
        } else {
            thread::yield_now();
            self.yields += 1;
        }
    }

    /// Whether it is time to park instead.
    pub(crate) fn is_done(&self) -> bool {
        self.yields >= Self::YIELDS
    }
}
