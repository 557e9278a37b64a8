//! Synchronous sends: an `issend` finishes only once the destination has matched it —
//! through a receive posted before it arrived, a receive posted after it was stored, a
//! blocking receive, or a message too large to store — and NBX termination detection
//! (`issend`, `iprobe`, `ibarrier`) delivers every message; over in-process and TCP links.

mod common;

use std::time::{Duration, Instant};

use common::{configs, on_every_rank, tcp_world};
use heddle_comm::{local_world, CommConfig, Communicator, Request};

fn worlds(n: usize) -> Vec<Vec<Communicator>> {
    configs()
        .into_iter()
        .flat_map(|c| [local_world(n, c.clone()).unwrap(), tcp_world(n, &c)])
        .collect()
}

#[test]
fn an_issend_waits_for_its_receive_whether_stored_or_left_in_the_link() {
    for len in [3usize, 1 << 20] {
        for comms in worlds(2) {
            on_every_rank(comms, |c| {
                if c.rank() == 0 {
                    let data: Vec<u64> = (0..len as u64).collect();
                    let mut req = c.issend(data, 1, 5).unwrap();
                    // Rank 1 receives only after "go": until then the send is unfinished.
                    let until = Instant::now() + Duration::from_millis(100);
                    while Instant::now() < until {
                        assert!(!req.test().unwrap(), "finished before its receive (len {len})");
                    }
                    c.send(&[1u8], 1, 6).unwrap();
                    req.wait().unwrap();
                } else {
                    c.recv(&mut [0u8], 0, 6).unwrap();
                    let mut buf = vec![0u64; len];
                    assert_eq!(c.recv(&mut buf, 0, 5).unwrap(), len);
                    assert!(buf.iter().enumerate().all(|(i, &x)| x == i as u64));
                }
            });
        }
    }
}

#[test]
fn ssend_to_a_posted_receive_and_to_a_blocking_one() {
    for comms in worlds(2) {
        on_every_rank(comms, |c| {
            if c.rank() == 0 {
                c.barrier().unwrap(); // rank 1's irecv is posted
                c.ssend(&[4i32, 5], 1, 1).unwrap();
                c.ssend(&[6i32], 1, 2).unwrap(); // rank 1 sits in a blocking recv
            } else {
                let mut r = c.irecv(vec![0i32; 2], Some(0), Some(1)).unwrap();
                c.barrier().unwrap();
                assert_eq!(r.wait().unwrap().unwrap().bytes, 8);
                assert_eq!(r.into_buffer().unwrap(), [4, 5]);
                let mut one = [0i32];
                c.recv(&mut one, 0, 2).unwrap();
                assert_eq!(one, [6]);
            }
        });
    }
}

#[test]
fn an_ssend_nobody_receives_times_out_naming_it() {
    let config = CommConfig { timeout: Duration::from_millis(800), ..CommConfig::default() };
    let comms = local_world(2, config).unwrap();
    on_every_rank(comms, |c| {
        if c.rank() == 0 {
            let e = c.ssend(&[1u8; 10], 1, 9).unwrap_err().to_string();
            assert!(
                e.contains("a synchronous send (its receive not posted yet) to rank 1 with tag 9"),
                "{e}"
            );
        }
        // Rank 1 never receives; both leave (the message stays unmatched).
    });
}

/// NBX (Hoefler et al.): each rank sends to a few others without them knowing how many
/// messages to expect; a rank whose synchronous sends have all matched enters a
/// non-blocking barrier, and everyone stops once the barrier completes. With sends that
/// finish when the data has merely left, a rank could stop before receiving.
#[test]
fn nbx_termination_detection_delivers_every_message() {
    for size in [2, 3, 4] {
        for comms in worlds(size) {
            on_every_rank(comms, |c| {
                let (r, p) = (c.rank(), c.size());
                let dests: Vec<usize> =
                    (1..p).filter(|k| (r + k) % 2 == 1).map(|k| (r + k) % p).collect();
                let mut sends: Vec<Request<Vec<u64>>> = dests
                    .iter()
                    .map(|&d| c.issend(vec![(r * 100 + d) as u64; 2000], d, 3).unwrap())
                    .collect();
                let mut got = Vec::new();
                let mut barrier: Option<heddle_comm::CollectiveRequest<u8>> = None;
                loop {
                    if let Some(st) = c.iprobe(None, Some(3)).unwrap() {
                        let mut buf = vec![0u64; 2000];
                        c.recv(&mut buf, st.source, 3).unwrap();
                        got.push(buf[0]);
                    }
                    if let Some(b) = &mut barrier {
                        if b.test().unwrap() {
                            break;
                        }
                    } else {
                        let mut done = true;
                        for s in &mut sends {
                            done &= s.test().unwrap();
                        }
                        if done {
                            barrier = Some(c.ibarrier().unwrap());
                        }
                    }
                }
                got.sort_unstable();
                let mut want: Vec<u64> = (0..p)
                    .filter(|&q| q != r && (1..p).any(|k| (q + k) % p == r && (q + k) % 2 == 1))
                    .map(|q| (q * 100 + r) as u64)
                    .collect();
                want.sort_unstable();
                assert_eq!(got, want, "rank {r} of {p}");
            });
        }
    }
}

/// Legal MPI: rank 0 has a large message on its way to rank 1 that rank 1 has not asked for
/// yet when rank 1's `ssend` to rank 0 needs its ack back. The ack comes behind that
/// message, so rank 1 takes the message aside instead of leaving it parked in the link.
#[test]
fn an_ack_behind_a_message_nobody_asked_for_yet_still_arrives() {
    let config = CommConfig {
        buffer_bytes: 1024,
        window: 2,
        timeout: Duration::from_secs(20),
        ..CommConfig::default()
    };
    let comms = local_world(2, config).unwrap();
    on_every_rank(comms, |c| {
        if c.rank() == 0 {
            let mut big = c.isend(vec![1u8; 100_000], 1, 1).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            let mut x = [0u8; 1];
            c.recv(&mut x, 1, 2).unwrap();
            assert_eq!(x, [5]);
            big.wait().unwrap();
        } else {
            std::thread::sleep(Duration::from_millis(20));
            c.ssend(&[5u8], 0, 2).unwrap();
            let mut buf = vec![0u8; 100_000];
            c.recv(&mut buf, 0, 1).unwrap();
            assert!(buf.iter().all(|&b| b == 1));
        }
    });
}
