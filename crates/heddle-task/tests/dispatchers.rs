//! Dispatchers under concurrency: handlers spawned and chained, outside work not
//! starved, shutdown that joins every worker and never hangs, many ports at once
//! (ports and arbiters: `ports.rs`). Every wait has a timeout; nothing asserts on timing.

mod common;

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{all_exactly_once, counters, dispatcher, post_concurrently, wait_until, PATIENCE};
use heddle_task::ports::{Dispatcher, Port};

#[test]
fn handlers_chained_through_ports_run_a_pipeline() {
    const STAGES: u64 = 10_000;
    let dispatcher = dispatcher(2);
    let queue = dispatcher.queue();
    let (stage, done) = (Port::<u64>::new(), Port::<u64>::new());
    let (next, out) = (stage.clone(), done.clone());
    let activation = queue.receive(true, &stage, move |s: u64| {
        if s + 1 < STAGES {
            next.post(s + 1);
        } else {
            out.post(s);
        }
    });
    stage.post(0);
    assert_eq!(done.take_timeout(PATIENCE), Some(STAGES - 1));
    assert!(activation.cancel()); // breaks the handler → port cycle
}

#[test]
fn take_timeout_waits_for_a_post_and_gives_up_on_silence() {
    let port = Port::<u32>::new();
    assert_eq!(port.take_timeout(Duration::from_millis(5)), None);
    let poster = port.clone();
    let handle = thread::spawn(move || {
        thread::sleep(Duration::from_millis(20));
        poster.post(5);
    });
    assert_eq!(port.take_timeout(PATIENCE), Some(5));
    handle.join().expect("poster");
    assert!(format!("{port:?}").contains("receivers: 0"), "no waiter left behind: {port:?}");
}

#[test]
fn spawned_tasks_run_and_a_panicking_handler_spares_the_worker() {
    let dispatcher = dispatcher(1);
    let queue = dispatcher.queue();
    let port = Port::<u32>::new();
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let _activation = queue.receive(true, &port, move |n| {
        assert_ne!(n, 0, "deliberate panic in a handler");
        let _ = tx.lock().unwrap().send(n);
    });
    port.post(0);
    port.post(7);
    assert_eq!(rx.recv_timeout(PATIENCE), Ok(7));
    let (tx, rx) = mpsc::channel();
    queue.spawn(move || {
        let _ = tx.send("spawned");
    });
    assert_eq!(rx.recv_timeout(PATIENCE), Ok("spawned"));
}

#[test]
fn work_from_outside_is_not_starved_by_handlers_that_keep_posting() {
    let dispatcher = dispatcher(1);
    let queue = dispatcher.queue();
    let port = Port::<()>::new();
    let stop = Arc::new(AtomicBool::new(false));
    let (again, halt) = (port.clone(), Arc::clone(&stop));
    let activation = queue.receive(true, &port, move |()| {
        if !halt.load(Ordering::SeqCst) {
            again.post(()); // runs next on this same worker, forever unless stopped
        }
    });
    port.post(());
    let halt = Arc::clone(&stop);
    queue.spawn(move || halt.store(true, Ordering::SeqCst));
    assert!(wait_until(|| stop.load(Ordering::SeqCst)), "the spawned task never ran");
    assert!(activation.cancel());
}

thread_local! {
    static ON_EXIT: RefCell<Option<ExitSignal>> = const { RefCell::new(None) };
}

/// Sends once its thread exits (thread-local destructors run before a join returns).
struct ExitSignal(mpsc::Sender<()>);

impl Drop for ExitSignal {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

#[test]
fn dropping_the_dispatcher_joins_every_worker() {
    const THREADS: usize = 3;
    let dispatcher = dispatcher(THREADS);
    let queue = dispatcher.queue();
    let arrived = Arc::new(AtomicUsize::new(0));
    let installed = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    for _ in 0..THREADS {
        let (arrived, installed, tx) = (Arc::clone(&arrived), Arc::clone(&installed), tx.clone());
        queue.spawn(move || {
            // Hold this worker until every task has one, so each lands on its own thread.
            arrived.fetch_add(1, Ordering::SeqCst);
            let deadline = Instant::now() + PATIENCE;
            while arrived.load(Ordering::SeqCst) < THREADS && Instant::now() < deadline {
                thread::yield_now();
            }
            ON_EXIT.with(|slot| *slot.borrow_mut() = Some(ExitSignal(tx)));
            installed.fetch_add(1, Ordering::SeqCst);
        });
    }
    drop(tx);
    assert!(wait_until(|| installed.load(Ordering::SeqCst) == THREADS));
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        drop(dispatcher);
        let _ = done_tx.send(rx.try_iter().count());
    });
    assert_eq!(
        done_rx.recv_timeout(PATIENCE),
        Ok(THREADS),
        "every worker exited before drop returned"
    );
    assert!(queue.is_shut_down());
}

#[test]
fn dropping_the_dispatcher_discards_queued_work_without_hanging() {
    let dispatcher = dispatcher(1);
    let queue = dispatcher.queue();
    let ran = Arc::new(AtomicUsize::new(0));
    let token = Arc::new(());
    let busy = Arc::new(AtomicBool::new(false));
    let (b, q) = (Arc::clone(&busy), queue.clone());
    queue.spawn(move || {
        b.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + PATIENCE;
        while !q.is_shut_down() && Instant::now() < deadline {
            thread::sleep(Duration::from_micros(100));
        }
    });
    assert!(wait_until(|| busy.load(Ordering::SeqCst)));
    for _ in 0..100 {
        let (ran, token) = (Arc::clone(&ran), Arc::clone(&token));
        queue.spawn(move || {
            let _token = token;
            ran.fetch_add(1, Ordering::SeqCst);
        });
    }
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        drop(dispatcher);
        let _ = tx.send(());
    });
    rx.recv_timeout(PATIENCE).expect("drop returned");
    assert_eq!(ran.load(Ordering::SeqCst), 0, "queued work was discarded");
    let (ran2, token2) = (Arc::clone(&ran), Arc::clone(&token));
    queue.spawn(move || {
        let _token = token2;
        ran2.fetch_add(1, Ordering::SeqCst);
    });
    assert_eq!(Arc::strong_count(&token), 1, "discarded tasks were dropped");
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

#[test]
fn dropping_the_dispatcher_from_its_own_handler_does_not_hang() {
    let dispatcher = dispatcher(2);
    let queue = dispatcher.queue();
    let (tx, rx) = mpsc::channel();
    queue.spawn(move || {
        drop(dispatcher);
        let _ = tx.send(());
    });
    rx.recv_timeout(PATIENCE).expect("drop inside a handler returned");
}

#[test]
fn zero_threads_is_an_error() {
    let error = Dispatcher::new(0).expect_err("no threads");
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn concurrent_posters_and_receivers_on_many_ports_lose_nothing() {
    // Several one-shot receivers re-arming themselves on shared ports.
    const ITEMS: usize = 20_000;
    let dispatcher = dispatcher(3);
    let queue = dispatcher.queue();
    let port = Port::<usize>::new();
    let seen = counters(ITEMS);
    let handled = Arc::new(AtomicUsize::new(0));
    fn arm(
        queue: heddle_task::ports::DispatcherQueue,
        port: Port<usize>,
        seen: Arc<Vec<AtomicU32>>,
        handled: Arc<AtomicUsize>,
    ) {
        let (q, p) = (queue.clone(), port.clone());
        let _ = queue.receive(false, &port, move |i: usize| {
            seen[i].fetch_add(1, Ordering::SeqCst);
            handled.fetch_add(1, Ordering::SeqCst);
            arm(q.clone(), p.clone(), Arc::clone(&seen), Arc::clone(&handled));
        });
    }
    for _ in 0..4 {
        arm(queue.clone(), port.clone(), Arc::clone(&seen), Arc::clone(&handled));
    }
    post_concurrently(&port, 4, ITEMS / 4, 0);
    assert!(wait_until(|| handled.load(Ordering::SeqCst) >= ITEMS));
    assert!(all_exactly_once(&seen));
    assert_eq!(handled.load(Ordering::SeqCst), ITEMS);
}
