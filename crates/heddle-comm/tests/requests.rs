//! Non-blocking point-to-point messages: rings of `isend`/`irecv` far larger than the
//! credit window (which deadlock with blocking calls), receives from any source and with
//! any tag in MPI's matching order, probes, cancel, dropped requests, and errors that
//! name the ranks and tags — over in-process and TCP links, default and tiny buffers.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{configs, on_every_rank, tcp_world};
use heddle_comm::{local_world, CommConfig, Communicator, Error, Request};

fn worlds(n: usize) -> Vec<Vec<Communicator>> {
    configs()
        .into_iter()
        .flat_map(|c| [local_world(n, c.clone()).unwrap(), tcp_world(n, &c)])
        .collect()
}

fn payload(rank: usize, len: usize) -> Vec<u64> {
    (0..len).map(|i| (rank * 1_000_003 + i) as u64).collect()
}

#[test]
fn ring_of_nonblocking_messages_larger_than_the_window() {
    for n in [2, 3, 4] {
        for len in [0, 1, 1000, 600_000] {
            for comms in worlds(n) {
                on_every_rank(comms, |c| {
                    let (r, p) = (c.rank(), c.size());
                    let (right, left) = ((r + 1) % p, (r + p - 1) % p);
                    // Receives posted after the sends: the sends must not wait for them.
                    let mut send = c.isend(payload(r, len), right, 5).unwrap();
                    let mut recv = c.irecv(vec![0u64; len], Some(left), Some(5)).unwrap();
                    let st = Request::wait_all(&mut [&mut send, &mut recv]).unwrap();
                    assert_eq!(st[0], None, "a send has no status");
                    let got = st[1].unwrap();
                    assert_eq!((got.source, got.tag, got.bytes), (left, 5, len * 8));
                    assert_eq!(recv.into_buffer().unwrap(), payload(left, len));
                });
            }
        }
    }
}

#[test]
fn isend_then_blocking_recv_both_ways_does_not_deadlock() {
    // Both ranks send 4 MiB first: the blocking receive must push the pending send.
    for comms in worlds(2) {
        on_every_rank(comms, |c| {
            let other = 1 - c.rank();
            let send = c.isend(payload(c.rank(), 1 << 19), other, 1).unwrap();
            let mut buf = vec![0u64; 1 << 19];
            assert_eq!(c.recv(&mut buf, other, 1).unwrap(), 1 << 19);
            assert_eq!(buf, payload(other, 1 << 19));
            send.into_buffer().unwrap();
        });
    }
}

#[test]
fn any_source_receives_every_rank_once_with_its_status() {
    for comms in worlds(4) {
        on_every_rank(comms, |c| {
            if c.rank() != 0 {
                c.send(&payload(c.rank(), c.rank() * 10), 0, 100 + c.rank() as u32).unwrap();
                return;
            }
            let mut seen = BTreeSet::new();
            for _ in 1..c.size() {
                let mut buf = vec![0u64; 64];
                let st = c.recv_any(&mut buf, None, None).unwrap();
                assert_eq!(st.tag, 100 + st.source as u32);
                assert_eq!(st.bytes, st.source * 80);
                assert_eq!(buf[..st.source * 10], payload(st.source, st.source * 10));
                assert_eq!(st.dtype, Some(heddle_comm::Dtype::U64));
                seen.insert(st.source);
            }
            assert_eq!(seen, BTreeSet::from([1, 2, 3]));
        });
    }
}

#[test]
fn any_tag_keeps_the_order_messages_were_sent_in() {
    for comms in worlds(2) {
        on_every_rank(comms, |c| {
            let tags = [9u32, 3, 7, 3, 1];
            if c.rank() == 1 {
                for (i, &t) in tags.iter().enumerate() {
                    c.send(&[i as u32], 0, t).unwrap();
                }
                c.barrier().unwrap();
            } else {
                c.barrier().unwrap(); // every message is stored before any receive
                for (i, &t) in tags.iter().enumerate() {
                    let mut x = [u32::MAX];
                    let st = c.recv_any(&mut x, Some(1), None).unwrap();
                    assert_eq!((st.tag, x[0]), (t, i as u32));
                }
            }
        });
    }
}

#[test]
fn an_earlier_irecv_matches_before_a_later_blocking_recv() {
    for comms in worlds(2) {
        on_every_rank(comms, |c| {
            if c.rank() == 0 {
                c.send(&[1i32], 1, 0).unwrap();
                c.send(&[2i32], 1, 0).unwrap();
            } else {
                let first = c.irecv(vec![0i32], Some(0), Some(0)).unwrap();
                let mut second = [0i32];
                c.recv(&mut second, 0, 0).unwrap();
                assert_eq!((first.into_buffer().unwrap()[0], second[0]), (1, 2));
            }
        });
    }
}

#[test]
fn probe_reports_a_message_larger_than_the_early_store() {
    for comms in worlds(2) {
        on_every_rank(comms, |c| {
            let len = 300_000;
            if c.rank() == 0 {
                c.send(&payload(0, len), 1, 8).unwrap();
            } else {
                assert!(c.iprobe(Some(0), Some(9)).unwrap().is_none(), "nothing has tag 9");
                let st = c.probe(None, None).unwrap();
                assert_eq!((st.source, st.tag, st.bytes), (0, 8, len * 8));
                let mut buf = vec![0u64; st.bytes / 8];
                c.recv(&mut buf, st.source, st.tag).unwrap();
                assert_eq!(buf, payload(0, len));
            }
        });
    }
}

#[test]
fn test_polls_until_done_and_any_length_receives_take_their_bytes() {
    for comms in worlds(2) {
        on_every_rank(comms, |c| {
            if c.rank() == 0 {
                let mut r = c.isend_bytes(b"abc".repeat(50_000), 1, 2).unwrap();
                while !r.test().unwrap() {}
                assert!(r.wait().unwrap().is_none(), "waiting again returns at once");
            } else {
                let mut r = c.irecv_bytes(Some(0), None).unwrap();
                let mut polls = 0u64;
                while !r.test().unwrap() {
                    polls += 1;
                }
                assert_eq!(r.status().unwrap().bytes, 150_000, "after {polls} polls");
                assert_eq!(r.take_bytes().unwrap(), b"abc".repeat(50_000));
            }
        });
    }
}

#[test]
fn wait_any_returns_the_request_that_finished() {
    for comms in worlds(3) {
        on_every_rank(comms, |c| {
            if c.rank() == 2 {
                c.send(&[22u8], 0, 0).unwrap();
                c.barrier().unwrap();
                c.send(&[11u8], 0, 0).unwrap();
            } else if c.rank() == 0 {
                let mut from1 = c.irecv(vec![0u8], Some(1), Some(0)).unwrap();
                let mut from2 = c.irecv(vec![0u8], Some(2), Some(0)).unwrap();
                let (i, st) = Request::wait_any(&mut [&mut from1, &mut from2]).unwrap().unwrap();
                assert_eq!((i, st.unwrap().source), (1, 2));
                c.barrier().unwrap();
                let (i, _) = Request::wait_any(&mut [&mut from1, &mut from2]).unwrap().unwrap();
                assert_eq!(i, 0);
                assert!(Request::wait_any(&mut [&mut from1, &mut from2]).unwrap().is_none());
            } else {
                c.barrier().unwrap();
                c.send(&[11u8], 0, 0).unwrap();
            }
        });
    }
}

#[test]
fn cancelled_and_dropped_requests_leave_the_message_stream_intact() {
    for comms in worlds(2) {
        on_every_rank(comms, |c| {
            if c.rank() == 0 {
                let mut r = c.irecv(vec![0u16; 4], Some(1), Some(1)).unwrap();
                assert!(r.cancel(), "nothing was sent yet: the receive can be cancelled");
                assert!(r.is_cancelled() && r.wait().unwrap().is_none());
                c.barrier().unwrap();
                let mut x = vec![0u64; 200_000];
                c.recv(&mut x, 1, 1).unwrap();
                assert_eq!(x, payload(1, 200_000));
                c.barrier().unwrap();
            } else {
                c.barrier().unwrap();
                // Dropped before it has left: it goes on from a copy, moved by the barrier.
                drop(c.isend(payload(1, 200_000), 0, 1).unwrap());
                c.barrier().unwrap();
            }
        });
    }
}

#[test]
fn a_receive_nobody_sends_times_out_naming_rank_and_tag() {
    let config = CommConfig { timeout: Duration::from_millis(300), ..CommConfig::default() };
    on_every_rank(local_world(2, config).unwrap(), |c| {
        if c.rank() == 1 {
            let e = c.recv_any(&mut [0u8; 1], Some(0), Some(77)).unwrap_err();
            let text = e.to_string();
            assert!(matches!(e, Error::Timeout { .. }), "{text}");
            assert!(text.contains("rank 0 with tag 77") && text.contains("rank 1"), "{text}");
        }
    });
}

#[test]
fn a_message_longer_than_the_receive_buffer_is_an_error() {
    on_every_rank(local_world(2, CommConfig::default()).unwrap(), |c| {
        if c.rank() == 0 {
            c.send(&[1u32; 10], 1, 0).unwrap();
        } else {
            // Reported by `irecv` if the message came first, else by `wait`.
            let e = c.irecv(vec![0u32; 4], None, None).and_then(|mut r| r.wait()).unwrap_err();
            assert!(matches!(e, Error::Truncated { rank: 0, got: 40, capacity: 16 }), "{e}");
        }
    });
}

#[test]
fn a_thread_waiting_does_not_shut_out_another_threads_send() {
    let config = CommConfig { timeout: Duration::from_secs(5), ..CommConfig::default() };
    let world = heddle_comm::WorldBuilder::new(0, 1, config).unwrap().build().unwrap();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let mut r = world.irecv(vec![0u32; 2], Some(0), Some(1)).unwrap();
            r.wait().unwrap().unwrap().bytes
        });
        std::thread::sleep(Duration::from_millis(50)); // the waiter is in `wait` by now
        let mut send = world.isend(vec![7u32, 9], 0, 1).unwrap();
        send.wait().unwrap();
        assert_eq!(waiter.join().unwrap(), 8);
    });
}
