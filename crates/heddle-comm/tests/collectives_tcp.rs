//! The TCP transport inside one process: every pair of ranks joined by a loopback socket,
//! so fragmentation, credit flow control and partial writes are exercised by the same
//! collectives as the ring transports, with buffers small enough to force them.

use heddle_comm::{Algorithm, CallOptions, CommConfig, Communicator, Op};

mod common;

use common::{configs, on_every_rank, tcp_world, value};

fn world(n: usize, config: CommConfig, f: impl Fn(&Communicator) + Sync) {
    on_every_rank(tcp_world(n, &config), f);
}

#[test]
fn allreduce_and_alltoall_over_tcp() {
    for config in configs() {
        for p in [2, 3, 5] {
            world(p, config.clone(), |c| {
                let r = c.rank();
                for n in [0, 1, 7, 1000, 50_000] {
                    for alg in
                        [Algorithm::RecursiveDoubling, Algorithm::Ring, Algorithm::Rabenseifner]
                    {
                        let mut buf: Vec<i64> = (0..n).map(|i| value(r, i)).collect();
                        c.allreduce_with(&mut buf, Op::Sum, CallOptions::default().algorithm(alg))
                            .unwrap();
                        let expect: Vec<i64> =
                            (0..n).map(|i| (0..p).map(|q| value(q, i)).sum()).collect();
                        assert_eq!(buf, expect, "p={p} n={n} {alg}");
                    }
                    let send: Vec<i64> = (0..p * n).map(|j| (r * 1_000_000 + j) as i64).collect();
                    let mut recv = vec![0i64; p * n];
                    c.alltoall(&send, &mut recv).unwrap();
                    for q in 0..p {
                        let expect: Vec<i64> =
                            (r * n..(r + 1) * n).map(|j| (q * 1_000_000 + j) as i64).collect();
                        assert_eq!(recv[q * n..(q + 1) * n], expect[..], "alltoall p={p} n={n}");
                    }
                }
            });
        }
    }
}

#[test]
fn broadcast_and_out_of_order_messages_over_tcp() {
    for config in configs() {
        world(3, config, |c| {
            let r = c.rank();
            let big: Vec<u8> = (0..300_000).map(|i| (i % 251) as u8).collect();
            let mut buf = if r == 1 { big.clone() } else { vec![0u8; big.len()] };
            c.broadcast_with(
                &mut buf,
                1,
                CallOptions::default().algorithm(Algorithm::ScatterAllgather),
            )
            .unwrap();
            assert_eq!(buf, big);
            if r == 0 {
                c.send(&big, 2, 1).unwrap();
                c.send(&[9u8], 2, 2).unwrap();
            } else if r == 2 {
                let mut one = [0u8];
                c.recv(&mut one, 0, 2).unwrap();
                let mut all = vec![0u8; big.len()];
                c.recv(&mut all, 0, 1).unwrap();
                assert_eq!((one[0], &all[..]), (9, &big[..]));
            }
            c.barrier().unwrap();
        });
    }
}

#[test]
fn a_closed_peer_is_reported_only_when_needed() {
    let mut comms = tcp_world(3, &CommConfig::default());
    // Rank 2 leaves after a barrier; ranks 0 and 1 keep talking, then 0 waits on 2.
    let c2 = comms.pop().unwrap();
    std::thread::scope(|s| {
        s.spawn(move || {
            c2.barrier().unwrap();
            drop(c2);
        });
        let handles: Vec<_> = comms
            .iter()
            .map(|c| {
                s.spawn(move || {
                    c.barrier().unwrap();
                    let other = 1 - c.rank();
                    let mut got = [0u32];
                    c.sendrecv(&[c.rank() as u32], other, &mut got, other, 5).unwrap();
                    assert_eq!(got[0] as usize, other);
                    if c.rank() == 0 {
                        let err = c.recv(&mut got, 2, 0).unwrap_err().to_string();
                        assert!(err.contains("rank 2 is gone"), "{err}");
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
}
