//! `Dispatcher`: a fixed pool of worker threads that runs the handlers arbiters activate,
//! and `DispatcherQueue`, the cloneable handle that queues work on it.
//!
//! Each worker owns a FIFO deque; a task queued from one of the pool's own workers goes
//! to that worker's deque (so a handler that posts to the next stage usually runs the
//! next stage itself, with no thread handoff), a task queued from any other thread goes
//! to a shared injector. Idle workers steal from the injector and from each other, spin
//! for up to 20 µs, then park; a spawn wakes one parked worker if there is one.
//! Dropping the dispatcher stops and joins every worker.

use std::cell::OnceCell;
use std::fmt;
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{self, JoinHandle, Thread};

use crossbeam_deque::{Injector, Steal, Stealer, Worker};

use super::port::{lock, Backoff};

/// A unit of work queued on a dispatcher.
pub(crate) type Task = Box<dyn FnOnce() + Send + 'static>;

/// One worker as seen by the others: how to wake it.
struct Slot {
    thread: OnceLock<Thread>,
    asleep: AtomicBool,
}

/// State shared by the workers and every queue handle.
struct Shared {
    name: String,
    injector: Injector<Task>,
    stealers: Box<[Stealer<Task>]>,
    slots: Box<[Slot]>,
    /// Indices of parked workers.
    sleepers: Mutex<Vec<usize>>,
    /// `sleepers.len()`, readable without the lock.
    idle: AtomicUsize,
    shutdown: AtomicBool,
}

/// The deque of the worker running on this thread, tagged with its pool.
struct LocalQueue {
    pool: usize,
    deque: Worker<Task>,
}

thread_local! {
    static LOCAL: OnceCell<LocalQueue> = const { OnceCell::new() };
}

impl Shared {
    fn id(self: &Arc<Self>) -> usize {
        Arc::as_ptr(self) as usize
    }

    fn has_work(&self) -> bool {
        !self.injector.is_empty() || self.stealers.iter().any(|s| !s.is_empty())
    }

    /// Finds a task for worker `index`: its own deque, then the injector, then the
    /// other workers' deques. With `injector_first` the injector goes first, so work
    /// queued from outside is not starved by handlers that keep posting to each other.
    fn find_task(&self, index: usize, local: &Worker<Task>, injector_first: bool) -> Option<Task> {
        if !injector_first {
            if let Some(task) = local.pop() {
                return Some(task);
            }
        }
        if let Some(task) = steal_into(local, |local| self.injector.steal_batch_and_pop(local)) {
            return Some(task);
        }
        if let Some(task) = local.pop() {
            return Some(task);
        }
        let n = self.stealers.len();
        (1..n).find_map(|k| {
            let stealer = &self.stealers[(index + k) % n];
            steal_into(local, |local| stealer.steal_batch_and_pop(local))
        })
    }

    /// Wakes one parked worker, if any.
    fn wake_one(&self) {
        fence(Ordering::SeqCst);
        if self.idle.load(Ordering::SeqCst) == 0 {
            return;
        }
        let woken = {
            let mut sleepers = lock(&self.sleepers);
            let woken = sleepers.pop();
            if woken.is_some() {
                self.idle.fetch_sub(1, Ordering::SeqCst);
            }
            woken
        };
        if let Some(index) = woken {
            let slot = &self.slots[index];
            slot.asleep.store(false, Ordering::Release);
            if let Some(thread) = slot.thread.get() {
                thread.unpark();
            }
        }
    }

    /// Takes worker `index` off the sleeper list if it is still on it.
    fn cancel_sleep(&self, index: usize) {
        let mut sleepers = lock(&self.sleepers);
        if let Some(at) = sleepers.iter().position(|&i| i == index) {
            sleepers.swap_remove(at);
            self.idle.fetch_sub(1, Ordering::SeqCst);
        }
        self.slots[index].asleep.store(false, Ordering::Release);
    }

    /// Waits until there may be work (true) or the pool shuts down (false): spins for
    /// up to 20 µs, then parks until a spawn or the shutdown wakes it.
    fn idle_wait(&self, index: usize) -> bool {
        let mut backoff = Backoff::new(Backoff::WORKER_SPIN);
        while !backoff.is_done() {
            if self.shutdown.load(Ordering::Acquire) {
                return false;
            }
            if self.has_work() {
                return true;
            }
            backoff.snooze();
        }
        let slot = &self.slots[index];
        {
            let mut sleepers = lock(&self.sleepers);
            slot.asleep.store(true, Ordering::Release);
            sleepers.push(index);
            self.idle.fetch_add(1, Ordering::SeqCst);
        }
        fence(Ordering::SeqCst);
        if self.shutdown.load(Ordering::SeqCst) || self.has_work() {
            self.cancel_sleep(index);
            return !self.shutdown.load(Ordering::Acquire);
        }
        while slot.asleep.load(Ordering::Acquire) && !self.shutdown.load(Ordering::Acquire) {
            thread::park();
        }
        self.cancel_sleep(index);
        !self.shutdown.load(Ordering::Acquire)
    }

    fn drain_injector(&self) {
        loop {
            match self.injector.steal() {
                Steal::Success(task) => drop(task),
                Steal::Empty => break,
                Steal::Retry => continue,
            }
        }
    }
}

/// Retries a steal until it succeeds or finds nothing.
fn steal_into(local: &Worker<Task>, steal: impl Fn(&Worker<Task>) -> Steal<Task>) -> Option<Task> {
    loop {
        match steal(local) {
            Steal::Success(task) => return Some(task),
            Steal::Empty => return None,
            Steal::Retry => continue,
        }
    }
}

/// How often (in tasks run) a worker looks at the injector before its own deque.
const INJECTOR_EVERY: u32 = 61;

fn run_worker(shared: Arc<Shared>, index: usize, deque: Worker<Task>) {
    let _ = shared.slots[index].thread.set(thread::current());
    let pool = shared.id();
    LOCAL.with(|cell| {
        let local = cell.get_or_init(move || LocalQueue { pool, deque });
        let mut ticks: u32 = 0;
        while !shared.shutdown.load(Ordering::Acquire) {
            ticks = ticks.wrapping_add(1);
            match shared.find_task(index, &local.deque, ticks.is_multiple_of(INJECTOR_EVERY)) {
                Some(task) => {
                    if panic::catch_unwind(AssertUnwindSafe(task)).is_err() {
                        tracing::error!(dispatcher = %shared.name, "a ports handler panicked");
                    }
                }
                None => {
                    if !shared.idle_wait(index) {
                        break;
                    }
                }
            }
        }
        while let Some(task) = local.deque.pop() {
            drop(task);
        }
    });
}

/// A fixed pool of worker threads that runs the handlers of activated arbiters.
///
/// Handlers are queued through a [`DispatcherQueue`] (see [`Dispatcher::queue`]); a
/// handler that posts to a port whose receiver runs on the same dispatcher usually runs
/// that receiver's handler next on the same thread. Idle workers spin for up to 20 µs
/// and then park until work is queued; they never poll.
///
/// Dropping the dispatcher stops the pool: handlers already running finish, handlers
/// still queued are dropped without running, and the drop returns once every worker
/// thread has exited (a handler blocked in [`Port::take_timeout`](super::Port::take_timeout)
/// delays it until its timeout). Work queued after the drop is discarded.
///
/// ```
/// use heddle_task::ports::{Dispatcher, Port};
/// use std::time::Duration;
///
/// let dispatcher = Dispatcher::new(2)?;
/// let done = Port::new();
/// let signal = done.clone();
/// dispatcher.queue().spawn(move || signal.post(6 * 7));
/// assert_eq!(done.take_timeout(Duration::from_secs(10)), Some(42));
/// drop(dispatcher); // joins both workers
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Dispatcher {
    queue: DispatcherQueue,
    workers: Vec<JoinHandle<()>>,
}

impl Dispatcher {
    /// A pool of `threads` workers named `heddle-ports-<i>`.
    ///
    /// # Errors
    ///
    /// `InvalidInput` if `threads` is 0; the operating system's error if a thread cannot
    /// be started (the threads already started are stopped and joined).
    pub fn new(threads: usize) -> io::Result<Dispatcher> {
        Self::named("heddle-ports", threads)
    }

    /// A pool of `threads` workers named `<name>-<i>`.
    ///
    /// # Errors
    ///
    /// As [`Dispatcher::new`].
    pub fn named(name: &str, threads: usize) -> io::Result<Dispatcher> {
        if threads == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a dispatcher needs at least one thread",
            ));
        }
        let deques: Vec<Worker<Task>> = (0..threads).map(|_| Worker::new_fifo()).collect();
        let shared = Arc::new(Shared {
            name: name.to_owned(),
            injector: Injector::new(),
            stealers: deques.iter().map(Worker::stealer).collect(),
            slots: (0..threads)
                .map(|_| Slot { thread: OnceLock::new(), asleep: AtomicBool::new(false) })
                .collect(),
            sleepers: Mutex::new(Vec::with_capacity(threads)),
            idle: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
        });
        let mut dispatcher = Dispatcher {
            queue: DispatcherQueue { shared: Arc::clone(&shared) },
            workers: Vec::with_capacity(threads),
        };
        for (index, deque) in deques.into_iter().enumerate() {
            let worker_shared = Arc::clone(&shared);
            let handle = thread::Builder::new()
                .name(format!("{name}-{index}"))
                .spawn(move || run_worker(worker_shared, index, deque))?;
            dispatcher.workers.push(handle);
        }
        Ok(dispatcher)
    }

    /// A handle that queues work on this dispatcher and activates arbiters on it.
    pub fn queue(&self) -> DispatcherQueue {
        self.queue.clone()
    }

    /// Number of worker threads.
    pub fn threads(&self) -> usize {
        self.queue.shared.slots.len()
    }
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        let shared = &self.queue.shared;
        shared.shutdown.store(true, Ordering::SeqCst);
        {
            let mut sleepers = lock(&shared.sleepers);
            for index in sleepers.drain(..) {
                shared.idle.fetch_sub(1, Ordering::SeqCst);
                shared.slots[index].asleep.store(false, Ordering::Release);
            }
        }
        for slot in shared.slots.iter() {
            if let Some(thread) = slot.thread.get() {
                thread.unpark();
            }
        }
        let me = thread::current().id();
        for worker in self.workers.drain(..) {
            // Dropped from inside one of its own handlers: that worker exits on its
            // own once the handler returns; joining it here would deadlock.
            if worker.thread().id() != me && worker.join().is_err() {
                tracing::error!(dispatcher = %shared.name, "a ports worker thread panicked");
            }
        }
        shared.drain_injector();
    }
}

impl fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dispatcher")
            .field("name", &self.queue.shared.name)
            .field("threads", &self.threads())
            .finish()
    }
}

/// A cloneable handle that queues work on a [`Dispatcher`] and activates arbiters
/// (receive, multiple-item receive, join, choice, interleave) whose handlers run there.
///
/// The handle does not keep the pool running: once its dispatcher is dropped, work
/// queued through the handle is discarded.
#[derive(Clone)]
pub struct DispatcherQueue {
    shared: Arc<Shared>,
}

impl DispatcherQueue {
    /// Queues a task with no message (CCR's `FromHandler`).
    pub fn spawn(&self, task: impl FnOnce() + Send + 'static) {
        self.spawn_task(Box::new(task));
    }

    /// Queues a boxed task: on the calling worker's own deque when called from one of
    /// this pool's workers, on the injector otherwise.
    pub(crate) fn spawn_task(&self, task: Task) {
        let shared = &self.shared;
        if shared.shutdown.load(Ordering::Acquire) {
            return;
        }
        let pool = shared.id();
        let mut task = Some(task);
        let _ = LOCAL.try_with(|cell| {
            if let Some(local) = cell.get().filter(|local| local.pool == pool) {
                if let Some(task) = task.take() {
                    local.deque.push(task);
                }
            }
        });
        if let Some(task) = task {
            shared.injector.push(task);
            if shared.shutdown.load(Ordering::SeqCst) {
                shared.drain_injector();
                return;
            }
        }
        shared.wake_one();
    }

    /// Whether the dispatcher behind this handle has been dropped.
    pub fn is_shut_down(&self) -> bool {
        self.shared.shutdown.load(Ordering::Acquire)
    }
}

impl fmt::Debug for DispatcherQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DispatcherQueue")
            .field("dispatcher", &self.shared.name)
            .field("threads", &self.shared.slots.len())
            .field("parked", &self.shared.idle.load(Ordering::Relaxed))
            .field("shut_down", &self.is_shut_down())
            .finish()
    }
}
