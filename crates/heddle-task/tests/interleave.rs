//! Interleave under concurrency: concurrent handlers run in parallel, an exclusive one
//! alone, teardown last and once. Every wait has a timeout; nothing asserts on timing.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{dispatcher, wait_until, PATIENCE};
use heddle_task::ports::{Interleave, Port};

/// Counters the interleave handlers update to check the reader/writer rules.
#[derive(Default)]
struct Watch {
    concurrent: AtomicUsize,
    exclusive: AtomicUsize,
    max_concurrent: AtomicUsize,
    violations: AtomicUsize,
    handled: AtomicUsize,
    torn_down: AtomicBool,
    teardowns: AtomicUsize,
}

impl Watch {
    fn violation(&self, what: &str) {
        if self.violations.fetch_add(1, Ordering::SeqCst) == 0 {
            eprintln!("interleave rule broken: {what}");
        }
    }

    fn concurrent_handler(&self, linger: bool) {
        if self.torn_down.load(Ordering::SeqCst) {
            self.violation("a concurrent handler ran after teardown");
        }
        let now = self.concurrent.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_concurrent.fetch_max(now, Ordering::SeqCst);
        if self.exclusive.load(Ordering::SeqCst) != 0 {
            self.violation("a concurrent handler overlapped an exclusive one");
        }
        if linger {
            // Give another concurrent handler the chance to start (bounded).
            let until = Instant::now() + Duration::from_millis(2);
            while self.max_concurrent.load(Ordering::SeqCst) < 2 && Instant::now() < until {
                thread::yield_now();
            }
        } else {
            // Stay a moment, watching for an exclusive handler.
            for _ in 0..1000 {
                if self.exclusive.load(Ordering::SeqCst) != 0 {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        if self.exclusive.load(Ordering::SeqCst) != 0 {
            self.violation("an exclusive handler started during a concurrent one");
        }
        self.concurrent.fetch_sub(1, Ordering::SeqCst);
        self.handled.fetch_add(1, Ordering::SeqCst);
    }

    fn exclusive_handler(&self) {
        if self.torn_down.load(Ordering::SeqCst) {
            self.violation("an exclusive handler ran after teardown");
        }
        if self.exclusive.fetch_add(1, Ordering::SeqCst) != 0 {
            self.violation("two exclusive handlers overlapped");
        }
        for _ in 0..200 {
            if self.concurrent.load(Ordering::SeqCst) != 0 {
                self.violation("an exclusive handler overlapped a concurrent one");
                break;
            }
            std::hint::spin_loop();
        }
        self.exclusive.fetch_sub(1, Ordering::SeqCst);
        self.handled.fetch_add(1, Ordering::SeqCst);
    }

    fn teardown_handler(&self) {
        if self.concurrent.load(Ordering::SeqCst) != 0 || self.exclusive.load(Ordering::SeqCst) != 0
        {
            self.violation("teardown overlapped another handler");
        }
        self.teardowns.fetch_add(1, Ordering::SeqCst);
        self.torn_down.store(true, Ordering::SeqCst);
    }
}

#[test]
fn interleave_keeps_exclusive_alone_and_teardown_last_and_once() {
    const POSTERS: usize = 2;
    const READS: usize = 3_000;
    const WRITES: usize = 300;
    let dispatcher = dispatcher(4);
    let (reads, writes, stop) = (Port::<usize>::new(), Port::<usize>::new(), Port::<()>::new());
    let watch = Arc::new(Watch::default());
    let (r, w, t) = (Arc::clone(&watch), Arc::clone(&watch), Arc::clone(&watch));
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let activation = dispatcher.queue().interleave(
        Interleave::new()
            .teardown(&stop, move |()| {
                t.teardown_handler();
                let _ = tx.lock().unwrap().send(());
            })
            .exclusive(&writes, move |_| w.exclusive_handler())
            .concurrent(&reads, move |_| r.concurrent_handler(false)),
    );
    thread::scope(|scope| {
        for _ in 0..POSTERS {
            let (reads, writes) = (reads.clone(), writes.clone());
            scope.spawn(move || {
                for k in 0..READS {
                    reads.post(k);
                    if k % (READS / WRITES) == 0 {
                        writes.post(k);
                    }
                }
            });
        }
    });
    let total = POSTERS * (READS + WRITES);
    assert!(wait_until(|| watch.handled.load(Ordering::SeqCst) >= total), "not all handled");
    stop.post(());
    rx.recv_timeout(PATIENCE).expect("teardown ran");
    assert!(!activation.is_active());
    // Nothing runs after teardown: new items stay in their ports.
    reads.post(1);
    writes.post(1);
    stop.post(());
    assert_eq!((reads.len(), writes.len(), stop.len()), (1, 1, 1));
    assert_eq!(watch.handled.load(Ordering::SeqCst), total);
    assert_eq!(watch.teardowns.load(Ordering::SeqCst), 1);
    assert_eq!(watch.violations.load(Ordering::SeqCst), 0);
    assert!(!activation.cancel());
}

#[test]
fn interleave_runs_concurrent_handlers_in_parallel_but_exclusive_ones_alone() {
    let dispatcher = dispatcher(4);
    let (reads, writes) = (Port::<u8>::new(), Port::<u8>::new());
    let readers = Arc::new(Watch::default());
    let writers = Arc::new(Watch::default());
    let (r, w) = (Arc::clone(&readers), Arc::clone(&writers));
    let activation = dispatcher.queue().interleave(
        Interleave::new()
            .exclusive(&writes, move |_| w.exclusive_handler())
            .concurrent(&reads, move |_| r.concurrent_handler(true)),
    );
    for _ in 0..8 {
        reads.post(0);
    }
    assert!(wait_until(|| readers.handled.load(Ordering::SeqCst) == 8));
    assert!(
        readers.max_concurrent.load(Ordering::SeqCst) >= 2,
        "concurrent handlers never overlapped"
    );
    for _ in 0..8 {
        writes.post(0);
    }
    assert!(wait_until(|| writers.handled.load(Ordering::SeqCst) == 8));
    assert_eq!(
        readers.violations.load(Ordering::SeqCst) + writers.violations.load(Ordering::SeqCst),
        0
    );
    assert!(activation.cancel());
    reads.post(0);
    assert_eq!(reads.len(), 1, "a cancelled interleave takes nothing");
}

/// A concurrent handler that counts itself running, waits for `gate`, counts itself done.
fn gated_reader(
    gate: &Arc<AtomicBool>,
    running: &Arc<AtomicUsize>,
    finished: &Arc<AtomicUsize>,
) -> impl Fn(u8) + Send + Sync + 'static {
    let (gate, running, finished) = (Arc::clone(gate), Arc::clone(running), Arc::clone(finished));
    move |_| {
        running.fetch_add(1, Ordering::SeqCst);
        let deadline = Instant::now() + PATIENCE;
        while !gate.load(Ordering::SeqCst) && Instant::now() < deadline {
            thread::sleep(Duration::from_micros(100));
        }
        finished.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn interleave_exclusive_waits_for_running_readers_and_holds_back_new_ones() {
    let dispatcher = dispatcher(4);
    let (reads, writes) = (Port::<u8>::new(), Port::<()>::new());
    let gate = Arc::new(AtomicBool::new(false));
    let running = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let exclusive_saw = Arc::new(AtomicUsize::new(usize::MAX));
    let (seen, fin) = (Arc::clone(&exclusive_saw), Arc::clone(&finished));
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let activation = dispatcher.queue().interleave(
        Interleave::new()
            .exclusive(&writes, move |()| {
                seen.store(fin.load(Ordering::SeqCst), Ordering::SeqCst);
                let _ = tx.lock().unwrap().send(());
            })
            .concurrent(&reads, gated_reader(&gate, &running, &finished)),
    );
    reads.post(1);
    reads.post(2);
    assert!(wait_until(|| running.load(Ordering::SeqCst) == 2));
    writes.post(());
    reads.post(3); // must wait: an exclusive handler is pending
    assert_eq!(exclusive_saw.load(Ordering::SeqCst), usize::MAX, "exclusive ran during readers");
    assert_eq!(running.load(Ordering::SeqCst), 2, "a reader started while a writer waited");
    gate.store(true, Ordering::SeqCst);
    rx.recv_timeout(PATIENCE).expect("exclusive ran");
    assert_eq!(
        exclusive_saw.load(Ordering::SeqCst),
        2,
        "exclusive started before the readers finished"
    );
    assert!(wait_until(|| finished.load(Ordering::SeqCst) == 3), "the held-back reader ran after");
    assert!(activation.cancel());
}

#[test]
fn interleave_teardown_waits_for_running_handlers_and_blocks_new_ones() {
    let dispatcher = dispatcher(4);
    let (reads, stop) = (Port::<u8>::new(), Port::<()>::new());
    let gate = Arc::new(AtomicBool::new(false));
    let running = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let teardown_saw = Arc::new(AtomicUsize::new(usize::MAX));
    let (seen, fin) = (Arc::clone(&teardown_saw), Arc::clone(&finished));
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let _activation = dispatcher.queue().interleave(
        Interleave::new()
            .teardown(&stop, move |()| {
                seen.store(fin.load(Ordering::SeqCst), Ordering::SeqCst);
                let _ = tx.lock().unwrap().send(());
            })
            .concurrent(&reads, gated_reader(&gate, &running, &finished)),
    );
    reads.post(1);
    reads.post(2);
    assert!(wait_until(|| running.load(Ordering::SeqCst) == 2));
    stop.post(());
    reads.post(3); // must not start: teardown is waiting
    assert_eq!(teardown_saw.load(Ordering::SeqCst), usize::MAX, "teardown ran during handlers");
    gate.store(true, Ordering::SeqCst);
    rx.recv_timeout(PATIENCE).expect("teardown ran");
    assert_eq!(
        teardown_saw.load(Ordering::SeqCst),
        2,
        "teardown ran before both handlers finished"
    );
    assert_eq!(
        running.load(Ordering::SeqCst),
        2,
        "a concurrent handler started after teardown was posted"
    );
    assert_eq!(reads.len(), 1);
}
