//! Receive and multiple-item receive: arbiters on one port that run a handler for each
//! item, or for each batch of exactly `count` items.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::arbiter::{Activation, SinglePortActivation};
use super::dispatcher::DispatcherQueue;
use super::port::{next_listener_id, Listener, Port, Verdict};

/// Takes items one at a time (or `count` at a time) and queues the handler with them.
struct Receiver<H> {
    queue: DispatcherQueue,
    handler: Arc<H>,
    persist: bool,
    active: Arc<AtomicBool>,
}

impl<T, H> Listener<T> for Receiver<H>
where
    T: Send + 'static,
    H: Fn(T) + Send + Sync + 'static,
{
    fn offer(&self, items: &mut VecDeque<T>) -> Verdict {
        if !self.persist {
            let Some(item) = items.pop_front() else {
                return Verdict::KEEP;
            };
            self.active.store(false, Ordering::Release);
            let handler = Arc::clone(&self.handler);
            self.queue.spawn_task(Box::new(move || handler(item)));
            return Verdict::DETACH;
        }
        while let Some(item) = items.pop_front() {
            let handler = Arc::clone(&self.handler);
            self.queue.spawn_task(Box::new(move || handler(item)));
        }
        Verdict::KEEP
    }
}

/// Waits for `count` items and queues the handler with all of them.
struct BatchReceiver<H> {
    queue: DispatcherQueue,
    handler: Arc<H>,
    count: usize,
    persist: bool,
    active: Arc<AtomicBool>,
}

impl<T, H> Listener<T> for BatchReceiver<H>
where
    T: Send + 'static,
    H: Fn(Vec<T>) + Send + Sync + 'static,
{
    fn offer(&self, items: &mut VecDeque<T>) -> Verdict {
        while items.len() >= self.count {
            let batch: Vec<T> = items.drain(..self.count).collect();
            let handler = Arc::clone(&self.handler);
            self.queue.spawn_task(Box::new(move || handler(batch)));
            if !self.persist {
                self.active.store(false, Ordering::Release);
                return Verdict::DETACH;
            }
        }
        Verdict::KEEP
    }
}

impl DispatcherQueue {
    /// Receive: runs `handler` on this dispatcher with each item posted to `port` (items
    /// already waiting included). A one-shot receiver (`persist == false`) takes a single
    /// item and detaches; a persistent one takes every item until cancelled, and its
    /// handlers may run concurrently with each other.
    ///
    /// ```
    /// use heddle_task::ports::{Dispatcher, Port};
    /// use std::time::Duration;
    ///
    /// let dispatcher = Dispatcher::new(2)?;
    /// let (requests, replies) = (Port::new(), Port::new());
    /// let out = replies.clone();
    /// let activation = dispatcher.queue().receive(true, &requests, move |n: u32| out.post(n * n));
    /// requests.post(3);
    /// requests.post(4);
    /// let mut got = [
    ///     replies.take_timeout(Duration::from_secs(10)),
    ///     replies.take_timeout(Duration::from_secs(10)),
    /// ];
    /// got.sort();
    /// assert_eq!(got, [Some(9), Some(16)]);
    /// assert!(activation.cancel());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn receive<T, H>(&self, persist: bool, port: &Port<T>, handler: H) -> Activation
    where
        T: Send + 'static,
        H: Fn(T) + Send + Sync + 'static,
    {
        let active = Arc::new(AtomicBool::new(true));
        let receiver = Receiver {
            queue: self.clone(),
            handler: Arc::new(handler),
            persist,
            active: Arc::clone(&active),
        };
        self.attach_single(port, Arc::new(receiver), active)
    }

    /// Multiple-item receive: runs `handler` with exactly `count` items from `port`, in
    /// the order they were posted, once that many are there. A one-shot receiver runs
    /// once; a persistent one runs for every further `count` items until cancelled.
    ///
    /// # Panics
    ///
    /// If `count` is 0.
    pub fn multiple_receive<T, H>(
        &self,
        persist: bool,
        count: usize,
        port: &Port<T>,
        handler: H,
    ) -> Activation
    where
        T: Send + 'static,
        H: Fn(Vec<T>) + Send + Sync + 'static,
    {
        assert!(count > 0, "a multiple-item receive needs at least one item");
        let active = Arc::new(AtomicBool::new(true));
        let receiver = BatchReceiver {
            queue: self.clone(),
            handler: Arc::new(handler),
            count,
            persist,
            active: Arc::clone(&active),
        };
        self.attach_single(port, Arc::new(receiver), active)
    }

    fn attach_single<T: Send + 'static>(
        &self,
        port: &Port<T>,
        listener: Arc<dyn Listener<T>>,
        active: Arc<AtomicBool>,
    ) -> Activation {
        let id = next_listener_id();
        port.core().attach(id, listener);
        Activation::new(Arc::new(SinglePortActivation {
            port: Arc::downgrade(port.core()),
            id,
            active,
        }))
    }
}
