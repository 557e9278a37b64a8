//! An idle worker sleeps on its doorbell: a message from a peer, or the job's abort, wakes
//! it long before its limit; a world with a TCP link cannot sleep that way and says so.

mod common;

use std::time::{Duration, Instant};

use common::tcp_world;
use heddle_comm::{local_world, AbortCause, CommConfig};

const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn a_message_wakes_a_parked_rank() {
    let comms = local_world(2, CommConfig::default()).unwrap();
    assert!(comms.iter().all(|c| c.sleeps_until_woken()));
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(100));
            comms[1].send(&[42u64], 0, 3).unwrap();
        });
        let t = Instant::now();
        comms[0].park(LIMIT);
        assert!(t.elapsed() < LIMIT / 2, "slept {:?} with a message waiting", t.elapsed());
        let mut got = [0u64];
        comms[0].recv(&mut got, 1, 3).unwrap();
        assert_eq!(got, [42]);
    });
}

#[test]
fn an_abort_wakes_a_parked_rank() {
    let comms = local_world(3, CommConfig::default()).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(100));
            comms[2].abort(AbortCause::new(2, "Test", "stop"));
        });
        // Every rank sharing the abort hears it, not only the first.
        let t = Instant::now();
        comms[1].park(LIMIT);
        assert!(t.elapsed() < LIMIT / 2, "slept {:?} through the abort", t.elapsed());
        assert!(comms[0].barrier().is_err(), "the job is aborted");
    });
}

#[test]
fn a_world_over_tcp_does_not_sleep_until_woken() {
    let comms = tcp_world(2, &CommConfig::default());
    assert!(comms.iter().all(|c| !c.sleeps_until_woken()));
    let t = Instant::now();
    comms[0].park(Duration::from_millis(20));
    assert!(t.elapsed() < LIMIT / 2);
}
