//! Ports and arbiters under concurrency: exact delivery counts, batch sizes, join pairs,
//! choice exclusivity (dispatchers: `dispatchers.rs`; interleave: `interleave.rs`).
//! Every wait has a timeout; nothing asserts on timing.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;

use common::{all_exactly_once, counters, dispatcher, post_concurrently, wait_until, PATIENCE};
use heddle_task::ports::{Choice, Port};

#[test]
fn persistent_receive_handles_every_post_exactly_once() {
    const POSTERS: usize = 4;
    const EACH: usize = 10_000;
    const BACKLOG: usize = 100;
    let total = POSTERS * EACH + BACKLOG;
    let dispatcher = dispatcher(3);
    let port = Port::new();
    for i in 0..BACKLOG {
        port.post(POSTERS * EACH + i); // waiting before the receiver exists
    }
    let seen = counters(total);
    let handled = Arc::new(AtomicUsize::new(0));
    let (s, h) = (Arc::clone(&seen), Arc::clone(&handled));
    let activation = dispatcher.queue().receive(true, &port, move |i: usize| {
        s[i].fetch_add(1, Ordering::SeqCst);
        h.fetch_add(1, Ordering::SeqCst);
    });
    post_concurrently(&port, POSTERS, EACH, 0);
    assert!(wait_until(|| handled.load(Ordering::SeqCst) >= total), "not all items handled");
    assert!(all_exactly_once(&seen));
    assert_eq!(handled.load(Ordering::SeqCst), total);
    assert!(port.is_empty());
    assert!(activation.is_active());
    assert!(activation.cancel());
    assert!(!activation.is_active());
}

#[test]
fn one_shot_receive_takes_one_item_and_leaves_the_rest() {
    let dispatcher = dispatcher(2);
    for round in 0..20 {
        let port = Port::new();
        let handled = Arc::new(AtomicUsize::new(0));
        let h = Arc::clone(&handled);
        let activation = thread::scope(|scope| {
            for poster in 0..4 {
                let port = port.clone();
                scope.spawn(move || {
                    for k in 0..500 {
                        port.post(poster * 500 + k);
                    }
                });
            }
            dispatcher.queue().receive(false, &port, move |_: usize| {
                h.fetch_add(1, Ordering::SeqCst);
            })
        });
        assert!(wait_until(|| handled.load(Ordering::SeqCst) >= 1), "round {round}: never fired");
        assert!(!activation.is_active());
        assert!(!activation.cancel(), "a fired one-shot receiver cannot be cancelled");
        port.post(9999);
        assert_eq!(port.len(), 2000, "round {round}: exactly one item taken");
        assert_eq!(handled.load(Ordering::SeqCst), 1);
    }
}

#[test]
fn cancelled_receiver_leaves_later_posts_in_the_port() {
    let dispatcher = dispatcher(2);
    let port = Port::new();
    let handled = Arc::new(AtomicUsize::new(0));
    let h = Arc::clone(&handled);
    let activation = dispatcher.queue().receive(true, &port, move |_: u8| {
        h.fetch_add(1, Ordering::SeqCst);
    });
    for _ in 0..10 {
        port.post(1);
    }
    assert!(wait_until(|| handled.load(Ordering::SeqCst) == 10));
    assert!(activation.cancel());
    assert!(!activation.cancel());
    for _ in 0..5 {
        port.post(2);
    }
    assert_eq!(port.len(), 5);
    assert_eq!(handled.load(Ordering::SeqCst), 10);
}

#[test]
fn multiple_receive_batches_hold_exactly_n_items_in_post_order() {
    const N: usize = 7;
    const POSTERS: usize = 4;
    const EACH: usize = 7_000;
    let total = POSTERS * EACH;
    let dispatcher = dispatcher(3);
    let port = Port::new();
    let seen = counters(total);
    let batches = Arc::new(AtomicUsize::new(0));
    let bad_batches = Arc::new(AtomicUsize::new(0));
    let (s, b, bad) = (Arc::clone(&seen), Arc::clone(&batches), Arc::clone(&bad_batches));
    let activation =
        dispatcher.queue().multiple_receive(true, N, &port, move |batch: Vec<usize>| {
            if batch.len() != N {
                bad.fetch_add(1, Ordering::SeqCst);
            }
            // Items of one poster must keep their posting order inside a batch.
            for pair in batch.windows(2) {
                if pair[0] / EACH == pair[1] / EACH && pair[0] > pair[1] {
                    bad.fetch_add(1, Ordering::SeqCst);
                }
            }
            for &i in &batch {
                s[i].fetch_add(1, Ordering::SeqCst);
            }
            b.fetch_add(1, Ordering::SeqCst);
        });
    post_concurrently(&port, POSTERS, EACH, 0);
    assert!(wait_until(|| batches.load(Ordering::SeqCst) >= total / N), "not all batches handled");
    assert_eq!(batches.load(Ordering::SeqCst), total / N);
    assert_eq!(bad_batches.load(Ordering::SeqCst), 0);
    assert!(all_exactly_once(&seen));
    // A partial batch waits in the port.
    for i in 0..N - 1 {
        port.post(i);
    }
    assert_eq!(port.len(), N - 1);
    assert!(activation.cancel());
}

#[test]
fn one_shot_multiple_receive_takes_the_first_n_items_once() {
    let dispatcher = dispatcher(2);
    let port = Port::new();
    for i in 0..10u32 {
        port.post(i);
    }
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let activation =
        dispatcher.queue().multiple_receive(false, 4, &port, move |batch: Vec<u32>| {
            let _ = tx.lock().unwrap().send(batch);
        });
    assert_eq!(rx.recv_timeout(PATIENCE).expect("batch"), vec![0, 1, 2, 3]);
    assert!(!activation.is_active());
    assert_eq!(port.len(), 6);
    assert_eq!(port.try_take(), Some(4));
}

#[test]
#[should_panic(expected = "at least one item")]
fn multiple_receive_of_zero_items_is_refused() {
    let dispatcher = dispatcher(1);
    let _ = dispatcher.queue().multiple_receive(true, 0, &Port::<u8>::new(), |_| {});
}

#[test]
fn persistent_join_pairs_every_item_exactly_once() {
    const EACH: usize = 5_000;
    const EXTRA: usize = 3;
    let dispatcher = dispatcher(3);
    let (left, right) = (Port::<usize>::new(), Port::<String>::new());
    let (seen_left, seen_right) = (counters(2 * EACH + EXTRA), counters(2 * EACH));
    let pairs = Arc::new(AtomicUsize::new(0));
    let (sl, sr, p) = (Arc::clone(&seen_left), Arc::clone(&seen_right), Arc::clone(&pairs));
    let activation =
        dispatcher.queue().join(true, &left, &right, move |(a, b): (usize, String)| {
            sl[a].fetch_add(1, Ordering::SeqCst);
            sr[b.parse::<usize>().expect("a number")].fetch_add(1, Ordering::SeqCst);
            p.fetch_add(1, Ordering::SeqCst);
        });
    thread::scope(|scope| {
        for poster in 0..2 {
            let (left, right) = (left.clone(), right.clone());
            scope.spawn(move || {
                for k in 0..EACH {
                    left.post(poster * EACH + k);
                }
            });
            scope.spawn(move || {
                for k in 0..EACH {
                    right.post((poster * EACH + k).to_string());
                }
            });
        }
    });
    for k in 0..EXTRA {
        left.post(2 * EACH + k);
    }
    assert!(wait_until(|| pairs.load(Ordering::SeqCst) >= 2 * EACH), "not all pairs handled");
    assert!(all_exactly_once(&seen_right));
    assert!(seen_left[..2 * EACH].iter().all(|c| c.load(Ordering::SeqCst) == 1));
    assert_eq!(left.len(), EXTRA, "unpaired items wait in their port");
    assert!(right.is_empty());
    assert_eq!(pairs.load(Ordering::SeqCst), 2 * EACH);
    assert!(activation.cancel());
}

#[test]
fn one_shot_join_takes_exactly_one_pair_under_concurrent_posts() {
    let dispatcher = dispatcher(2);
    for round in 0..30 {
        let (left, right) = (Port::<u32>::new(), Port::<u32>::new());
        let fired = Arc::new(AtomicUsize::new(0));
        let f = Arc::clone(&fired);
        let activation = thread::scope(|scope| {
            for port in [&left, &right] {
                let port = port.clone();
                scope.spawn(move || {
                    for k in 0..100 {
                        port.post(k);
                    }
                });
            }
            dispatcher.queue().join(false, &left, &right, move |_| {
                f.fetch_add(1, Ordering::SeqCst);
            })
        });
        assert!(wait_until(|| fired.load(Ordering::SeqCst) >= 1), "round {round}: never fired");
        assert!(!activation.is_active());
        left.post(100);
        right.post(100);
        assert_eq!((left.len(), right.len()), (100, 100), "round {round}");
        assert_eq!(fired.load(Ordering::SeqCst), 1);
    }
}

#[test]
#[should_panic(expected = "two distinct ports")]
fn join_of_a_port_with_itself_is_refused() {
    let dispatcher = dispatcher(1);
    let port = Port::<u8>::new();
    let _ = dispatcher.queue().join(true, &port, &port.clone(), |_| {});
}

#[test]
fn choice_runs_exactly_one_branch_and_leaves_the_other_items() {
    let dispatcher = dispatcher(2);
    for round in 0..200 {
        let (numbers, words, signals) =
            (Port::<u32>::new(), Port::<String>::new(), Port::<()>::new());
        let ran = Arc::new(AtomicUsize::new(0));
        let winner = Arc::new(AtomicUsize::new(usize::MAX));
        let branch = |index: usize| {
            let (ran, winner) = (Arc::clone(&ran), Arc::clone(&winner));
            move || {
                ran.fetch_add(1, Ordering::SeqCst);
                winner.store(index, Ordering::SeqCst);
            }
        };
        let (b0, b1, b2) = (branch(0), branch(1), branch(2));
        let activation = thread::scope(|scope| {
            let (n, w, s) = (numbers.clone(), words.clone(), signals.clone());
            scope.spawn(move || n.post(1));
            scope.spawn(move || w.post("one".to_owned()));
            scope.spawn(move || s.post(()));
            dispatcher.queue().choice(
                Choice::new()
                    .branch(&numbers, move |_| b0())
                    .branch(&words, move |_| b1())
                    .branch(&signals, move |()| b2()),
            )
        });
        assert!(wait_until(|| ran.load(Ordering::SeqCst) >= 1), "round {round}: no branch ran");
        assert!(!activation.is_active());
        let left = [numbers.len(), words.len(), signals.len()];
        assert_eq!(left.iter().sum::<usize>(), 2, "round {round}: losers keep their items");
        assert_eq!(left[winner.load(Ordering::SeqCst)], 0, "round {round}");
        // Later posts are not consumed by the decided choice.
        numbers.post(2);
        words.post("two".to_owned());
        signals.post(());
        assert_eq!(numbers.len() + words.len() + signals.len(), 5, "round {round}");
        assert_eq!(ran.load(Ordering::SeqCst), 1, "round {round}");
    }
}

#[test]
fn cancelled_choice_runs_nothing() {
    let dispatcher = dispatcher(1);
    let (a, b) = (Port::<u8>::new(), Port::<u8>::new());
    let ran = Arc::new(AtomicBool::new(false));
    let (r0, r1) = (Arc::clone(&ran), Arc::clone(&ran));
    let activation = dispatcher.queue().choice(
        Choice::new()
            .branch(&a, move |_| r0.store(true, Ordering::SeqCst))
            .branch(&b, move |_| r1.store(true, Ordering::SeqCst)),
    );
    assert!(activation.is_active());
    assert!(activation.cancel());
    a.post(1);
    b.post(2);
    assert_eq!((a.len(), b.len()), (1, 1));
    assert!(!ran.load(Ordering::SeqCst));
}
