//! Join: an arbiter over two ports that runs its handler with one item from each,
//! taken together under both ports' locks so no item is lost or taken twice.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use super::arbiter::{Activation, Arbiter};
use super::dispatcher::DispatcherQueue;
use super::port::{
    lock_pair, next_listener_id, AfterUnlock, Listener, ListenerId, Port, PortCore, Verdict,
};

/// The shared state of one join.
struct JoinCore<A, B, H> {
    queue: DispatcherQueue,
    first: Weak<PortCore<A>>,
    second: Weak<PortCore<B>>,
    ids: (ListenerId, ListenerId),
    handler: Arc<H>,
    persist: bool,
    /// Set (under both port locks) once a one-shot join fired or the join was cancelled.
    done: AtomicBool,
}

impl<A, B, H> JoinCore<A, B, H>
where
    A: Send + 'static,
    B: Send + 'static,
    H: Fn((A, B)) + Send + Sync + 'static,
{
    /// Takes as many pairs as the join may and queues a handler for each.
    fn evaluate(&self) {
        let (Some(first), Some(second)) = (self.first.upgrade(), self.second.upgrade()) else {
            return;
        };
        let mut after_first = AfterUnlock::new();
        let mut after_second = AfterUnlock::new();
        {
            let (mut a, mut b) = lock_pair(&first, &second);
            while !self.done.load(Ordering::Acquire) && !a.items.is_empty() && !b.items.is_empty() {
                let (Some(x), Some(y)) = (a.items.pop_front(), b.items.pop_front()) else {
                    break;
                };
                let handler = Arc::clone(&self.handler);
                self.queue.spawn_task(Box::new(move || handler((x, y))));
                if !self.persist {
                    self.done.store(true, Ordering::Release);
                    a.detach(self.ids.0, &mut after_first);
                    b.detach(self.ids.1, &mut after_second);
                }
            }
        }
        after_first.run();
        after_second.run();
    }

    /// Stops the join; returns whether it was still active.
    fn stop(&self) -> bool {
        let (Some(first), Some(second)) = (self.first.upgrade(), self.second.upgrade()) else {
            return !self.done.swap(true, Ordering::AcqRel);
        };
        let mut after_first = AfterUnlock::new();
        let mut after_second = AfterUnlock::new();
        let was_active = {
            let (mut a, mut b) = lock_pair(&first, &second);
            let was_active = !self.done.swap(true, Ordering::AcqRel);
            a.detach(self.ids.0, &mut after_first);
            b.detach(self.ids.1, &mut after_second);
            was_active
        };
        after_first.run();
        after_second.run();
        was_active
    }
}

/// The listener a join attaches to one of its ports: `SIDE` tells which.
struct JoinSide<C, const SIDE: u8> {
    core: Arc<C>,
}

impl<A, B, H> Listener<A> for JoinSide<JoinCore<A, B, H>, 0>
where
    A: Send + 'static,
    B: Send + 'static,
    H: Fn((A, B)) + Send + Sync + 'static,
{
    fn offer(&self, _items: &mut VecDeque<A>) -> Verdict {
        if self.core.done.load(Ordering::Acquire) {
            Verdict::DETACH
        } else {
            Verdict::WATCH
        }
    }

    fn notify(&self) {
        self.core.evaluate();
    }
}

impl<A, B, H> Listener<B> for JoinSide<JoinCore<A, B, H>, 1>
where
    A: Send + 'static,
    B: Send + 'static,
    H: Fn((A, B)) + Send + Sync + 'static,
{
    fn offer(&self, _items: &mut VecDeque<B>) -> Verdict {
        if self.core.done.load(Ordering::Acquire) {
            Verdict::DETACH
        } else {
            Verdict::WATCH
        }
    }

    fn notify(&self) {
        self.core.evaluate();
    }
}

/// The activation handle's view of a join.
struct JoinActivation<C> {
    core: Arc<C>,
}

impl<A, B, H> Arbiter for JoinActivation<JoinCore<A, B, H>>
where
    A: Send + 'static,
    B: Send + 'static,
    H: Fn((A, B)) + Send + Sync + 'static,
{
    fn cancel(&self) -> bool {
        self.core.stop()
    }

    fn is_active(&self) -> bool {
        !self.core.done.load(Ordering::Acquire)
            && self.core.first.strong_count() > 0
            && self.core.second.strong_count() > 0
    }
}

impl DispatcherQueue {
    /// Join: runs `handler` with one item from `first` and one from `second`, both taken
    /// at once, as soon as both ports hold an item. A one-shot join runs once; a
    /// persistent one runs for every further pair until cancelled. Items wait in their
    /// ports until they can be paired.
    ///
    /// # Panics
    ///
    /// If `first` and `second` are the same port (use
    /// [`multiple_receive`](DispatcherQueue::multiple_receive) for two items of one port).
    ///
    /// ```
    /// use heddle_task::ports::{Dispatcher, Port};
    /// use std::time::Duration;
    ///
    /// let dispatcher = Dispatcher::new(2)?;
    /// let (names, ages, out) = (Port::<&str>::new(), Port::<u32>::new(), Port::new());
    /// let reply = out.clone();
    /// dispatcher.queue().join(false, &names, &ages, move |(name, age)| {
    ///     reply.post(format!("{name} is {age}"))
    /// });
    /// names.post("Ada");
    /// assert!(out.take_timeout(Duration::from_millis(1)).is_none()); // waits for an age
    /// ages.post(36);
    /// assert_eq!(out.take_timeout(Duration::from_secs(10)).as_deref(), Some("Ada is 36"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn join<A, B, H>(
        &self,
        persist: bool,
        first: &Port<A>,
        second: &Port<B>,
        handler: H,
    ) -> Activation
    where
        A: Send + 'static,
        B: Send + 'static,
        H: Fn((A, B)) + Send + Sync + 'static,
    {
        let first_addr = Arc::as_ptr(first.core()) as usize;
        let second_addr = Arc::as_ptr(second.core()) as usize;
        assert_ne!(first_addr, second_addr, "a join needs two distinct ports");
        let core = Arc::new(JoinCore {
            queue: self.clone(),
            first: Arc::downgrade(first.core()),
            second: Arc::downgrade(second.core()),
            ids: (next_listener_id(), next_listener_id()),
            handler: Arc::new(handler),
            persist,
            done: AtomicBool::new(false),
        });
        first.core().attach(core.ids.0, Arc::new(JoinSide::<_, 0> { core: Arc::clone(&core) }));
        second.core().attach(core.ids.1, Arc::new(JoinSide::<_, 1> { core: Arc::clone(&core) }));
        core.evaluate();
        if core.done.load(Ordering::Acquire) {
            // A one-shot join that fired while attaching may have left a side behind.
            first.core().detach(core.ids.0);
            second.core().detach(core.ids.1);
        }
        Activation::new(Arc::new(JoinActivation { core }))
    }
}
