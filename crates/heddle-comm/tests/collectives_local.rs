//! Every collective × every algorithm × world sizes 1–8 × element counts 0, 1, 7, 1000
//! and more than one buffer, on in-process rings, checked against naive references.

use heddle_comm::{local_world, Algorithm, CallOptions, CommConfig, Communicator, Op};

const COUNTS: &[usize] = &[0, 1, 7, 1000, 20_000];

mod common;

use common::{configs, on_every_rank, value};

/// Runs `f` on every rank of an in-process world of `n` ranks.
fn world(n: usize, config: CommConfig, f: impl Fn(&Communicator) + Sync) {
    on_every_rank(local_world(n, config).unwrap(), f);
}

fn contribution(rank: usize, n: usize) -> Vec<i64> {
    (0..n).map(|i| value(rank, i)).collect()
}

fn reference(p: usize, n: usize, op: fn(i64, i64) -> i64) -> Vec<i64> {
    (0..n).map(|i| (1..p).fold(value(0, i), |acc, r| op(acc, value(r, i)))).collect()
}

fn forced(a: Algorithm) -> CallOptions {
    CallOptions::default().algorithm(a)
}

#[test]
fn allreduce_every_algorithm_matches_reference() {
    let algs = [
        Algorithm::RecursiveDoubling,
        Algorithm::Ring,
        Algorithm::Rabenseifner,
        Algorithm::ReduceBroadcast,
    ];
    for config in configs() {
        for p in 1..=8 {
            world(p, config.clone(), |c| {
                for &n in COUNTS {
                    for alg in algs {
                        let mut buf = contribution(c.rank(), n);
                        c.allreduce_with(&mut buf, Op::Sum, forced(alg)).unwrap();
                        assert_eq!(buf, reference(p, n, |a, b| a + b), "sum p={p} n={n} {alg}");
                        let mut buf = contribution(c.rank(), n);
                        c.allreduce_with(&mut buf, Op::Max, forced(alg)).unwrap();
                        assert_eq!(buf, reference(p, n, i64::max), "max p={p} n={n} {alg}");
                    }
                }
            });
        }
    }
}

#[test]
fn allreduce_types_and_ops() {
    world(5, CommConfig::default(), |c| {
        let r = c.rank();
        let mut f = vec![r as f64 + 0.5; 33];
        c.allreduce(&mut f, Op::Sum).unwrap();
        assert!(f.iter().all(|&x| (x - 12.5).abs() < 1e-12));
        let mut f32s = vec![r as f32 + 1.0; 3];
        c.allreduce(&mut f32s, Op::Prod).unwrap();
        assert_eq!(f32s, vec![120.0; 3]);
        let mut u = [r as u32, 100 - r as u32];
        c.allreduce(&mut u, Op::Min).unwrap();
        assert_eq!(u, [0, 96]);
        let mut i = [r as i32 * 3 - 5];
        c.allreduce(&mut i, Op::Max).unwrap();
        assert_eq!(i, [7]);
        let mut x = [1u64 << r];
        c.allreduce(
            &mut x,
            Op::custom(|a: &mut [u64], b: &[u64]| a.iter_mut().zip(b).for_each(|(p, q)| *p |= *q)),
        )
        .unwrap();
        assert_eq!(x, [0b11111]);
        let mut b = [r as u8 + 1];
        c.allreduce(&mut b, Op::Sum).unwrap();
        assert_eq!(b, [15]);
    });
}

#[test]
fn reduce_and_reduce_scatter_match_reference() {
    for config in configs() {
        for p in 1..=8 {
            world(p, config.clone(), |c| {
                for &n in COUNTS {
                    for root in [0, p - 1, p / 2] {
                        let send = contribution(c.rank(), n);
                        let mut recv = if c.rank() == root { vec![0; n] } else { Vec::new() };
                        c.reduce(&send, &mut recv, Op::Sum, root).unwrap();
                        if c.rank() == root {
                            assert_eq!(
                                recv,
                                reference(p, n, |a, b| a + b),
                                "reduce p={p} n={n} root={root}"
                            );
                        }
                    }
                    // Uneven blocks: rank i gets n + i elements.
                    let counts: Vec<usize> = (0..p).map(|i| n + i).collect();
                    let total: usize = counts.iter().sum();
                    for alg in [Algorithm::Ring, Algorithm::ReduceBroadcast] {
                        let send = contribution(c.rank(), total);
                        let mut recv = vec![0; counts[c.rank()]];
                        c.reduce_scatter_with(&send, &mut recv, &counts, Op::Sum, forced(alg))
                            .unwrap();
                        let full = reference(p, total, |a, b| a + b);
                        let off: usize = counts[..c.rank()].iter().sum();
                        assert_eq!(
                            recv,
                            full[off..off + counts[c.rank()]],
                            "reduce_scatter p={p} n={n} {alg}"
                        );
                    }
                }
            });
        }
    }
}

#[test]
fn broadcast_every_algorithm_and_root() {
    for config in configs() {
        for p in 1..=8 {
            world(p, config.clone(), |c| {
                for &n in COUNTS {
                    for alg in [
                        Algorithm::BinomialTree,
                        Algorithm::ScatterAllgather,
                        Algorithm::ShmChannel,
                    ] {
                        for root in [0, p - 1, p / 2] {
                            let expect = contribution(root + 100, n);
                            let mut buf =
                                if c.rank() == root { expect.clone() } else { vec![0; n] };
                            c.broadcast_with(&mut buf, root, forced(alg)).unwrap();
                            assert_eq!(buf, expect, "broadcast p={p} n={n} {alg} root={root}");
                        }
                    }
                }
            });
        }
    }
}

#[test]
fn gather_scatter_and_v_variants() {
    for config in configs() {
        for p in 1..=8 {
            world(p, config.clone(), |c| {
                let r = c.rank();
                for &n in COUNTS {
                    let root = p / 2;
                    let mut all = if r == root { vec![0; n * p] } else { Vec::new() };
                    c.gather(&contribution(r, n), &mut all, root).unwrap();
                    if r == root {
                        assert_eq!(
                            all,
                            (0..p).flat_map(|q| contribution(q, n)).collect::<Vec<_>>(),
                            "gather p={p} n={n}"
                        );
                    }
                    let counts: Vec<usize> = (0..p).map(|q| (n + q * 3) % 11).collect();
                    let mut all = if r == root { vec![0; counts.iter().sum()] } else { Vec::new() };
                    c.gatherv(&contribution(r, counts[r]), &mut all, &counts, root).unwrap();
                    if r == root {
                        assert_eq!(
                            all,
                            (0..p).flat_map(|q| contribution(q, counts[q])).collect::<Vec<_>>(),
                            "gatherv p={p}"
                        );
                    }
                    let src: Vec<i64> = if r == root {
                        (0..p).flat_map(|q| contribution(q, n)).collect()
                    } else {
                        Vec::new()
                    };
                    let mut mine = vec![0; n];
                    c.scatter(&src, &mut mine, root).unwrap();
                    assert_eq!(mine, contribution(r, n), "scatter p={p} n={n}");
                    let src: Vec<i64> = if r == root {
                        (0..p).flat_map(|q| contribution(q, counts[q])).collect()
                    } else {
                        Vec::new()
                    };
                    let mut mine = vec![0; counts[r]];
                    c.scatterv(&src, &counts, &mut mine, root).unwrap();
                    assert_eq!(mine, contribution(r, counts[r]), "scatterv p={p}");
                }
            });
        }
    }
}

#[test]
fn allgather_every_algorithm_and_v() {
    for config in configs() {
        for p in 1..=8 {
            world(p, config.clone(), |c| {
                let r = c.rank();
                for &n in COUNTS {
                    for alg in [Algorithm::Ring, Algorithm::RecursiveDoubling, Algorithm::Bruck] {
                        let mut all = vec![0; n * p];
                        c.allgather_with(&contribution(r, n), &mut all, forced(alg)).unwrap();
                        assert_eq!(
                            all,
                            (0..p).flat_map(|q| contribution(q, n)).collect::<Vec<_>>(),
                            "allgather p={p} n={n} {alg}"
                        );
                    }
                    let counts: Vec<usize> =
                        (0..p).map(|q| if q % 3 == 1 { 0 } else { n + q }).collect();
                    let mut all = vec![0; counts.iter().sum()];
                    c.allgatherv(&contribution(r, counts[r]), &mut all, &counts).unwrap();
                    assert_eq!(
                        all,
                        (0..p).flat_map(|q| contribution(q, counts[q])).collect::<Vec<_>>(),
                        "allgatherv p={p} n={n}"
                    );
                }
            });
        }
    }
}

#[test]
fn alltoall_every_algorithm_and_v() {
    // Element j of the block from rank a to rank b.
    let piece = |a: usize, b: usize, len: usize| -> Vec<i64> {
        (0..len).map(|j| (a * 1_000_000 + b * 1000 + j) as i64).collect()
    };
    for config in configs() {
        for p in 1..=8 {
            world(p, config.clone(), |c| {
                let r = c.rank();
                for &n in COUNTS {
                    for alg in [Algorithm::Pairwise, Algorithm::Linear] {
                        let send: Vec<i64> = (0..p).flat_map(|b| piece(r, b, n)).collect();
                        let mut recv = vec![0; n * p];
                        c.alltoall_with(&send, &mut recv, forced(alg)).unwrap();
                        assert_eq!(
                            recv,
                            (0..p).flat_map(|a| piece(a, r, n)).collect::<Vec<_>>(),
                            "alltoall p={p} n={n} {alg}"
                        );
                    }
                    let len = |a: usize, b: usize| (a + 2 * b + n) % 13;
                    let sc: Vec<usize> = (0..p).map(|b| len(r, b)).collect();
                    let rc: Vec<usize> = (0..p).map(|a| len(a, r)).collect();
                    let send: Vec<i64> = (0..p).flat_map(|b| piece(r, b, len(r, b))).collect();
                    let mut recv = vec![0; rc.iter().sum()];
                    c.alltoallv(&send, &sc, &mut recv, &rc).unwrap();
                    assert_eq!(
                        recv,
                        (0..p).flat_map(|a| piece(a, r, len(a, r))).collect::<Vec<_>>(),
                        "alltoallv p={p}"
                    );
                }
            });
        }
    }
}

#[test]
fn barrier_orders_phases() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    for p in 1..=8 {
        let arrived = AtomicUsize::new(0);
        world(p, CommConfig::default(), |c| {
            for round in 1..=5 {
                arrived.fetch_add(1, Ordering::SeqCst);
                c.barrier().unwrap();
                assert!(
                    arrived.load(Ordering::SeqCst) >= round * p,
                    "a rank left the barrier early"
                );
                c.barrier().unwrap();
            }
        });
    }
}

#[test]
fn point_to_point_tags_order_and_sizes() {
    for config in configs() {
        world(3, config, |c| {
            let r = c.rank();
            if r == 0 {
                // Sent in one order, received in another: tags keep them apart.
                c.send(&[1i32, 2, 3], 1, 7).unwrap();
                c.send(&contribution(0, 5000), 1, 8).unwrap();
                c.send_bytes(b"", 2, 0).unwrap();
                c.send_object(&("hello".to_string(), vec![1u8, 2]), 2, 1).unwrap();
            } else if r == 1 {
                let mut big = vec![0i64; 5000];
                assert_eq!(c.recv(&mut big, 0, 8).unwrap(), 5000);
                assert_eq!(big, contribution(0, 5000));
                let mut small = [0i32; 10];
                assert_eq!(c.recv(&mut small, 0, 7).unwrap(), 3);
                assert_eq!(&small[..3], &[1, 2, 3]);
            } else {
                assert_eq!(c.recv_bytes(0, 0).unwrap(), Vec::<u8>::new());
                let o: (String, Vec<u8>) = c.recv_object(0, 1).unwrap();
                assert_eq!(o, ("hello".to_string(), vec![1, 2]));
            }
            // Ring shift with sendrecv.
            let p = c.size();
            let mut got = [0u64; 2];
            c.sendrecv(&[r as u64; 2], (r + 1) % p, &mut got, (r + p - 1) % p, 3).unwrap();
            assert_eq!(got, [((r + p - 1) % p) as u64; 2]);
        });
    }
}

#[test]
fn large_messages_received_out_of_order() {
    // Far larger than the unexpected-message budget of the small configuration.
    for config in configs() {
        world(2, config, |c| {
            let big = contribution(0, 100_000);
            if c.rank() == 0 {
                c.send(&big, 1, 1).unwrap();
                c.send(&[5i64], 1, 2).unwrap();
                c.send(&big[..50_000], 1, 3).unwrap();
            } else {
                let mut small = [0i64; 1];
                c.recv(&mut small, 0, 2).unwrap();
                assert_eq!(small, [5]);
                let mut half = vec![0i64; 50_000];
                let mut all = vec![0i64; 100_000];
                c.recv(&mut half, 0, 3).unwrap();
                c.recv(&mut all, 0, 1).unwrap();
                assert_eq!((&half[..], &all[..]), (&big[..50_000], &big[..]));
            }
        });
    }
}

#[test]
fn truncated_receive_is_an_error() {
    world(2, CommConfig::default(), |c| {
        if c.rank() == 0 {
            c.send(&[1u8; 10], 1, 0).unwrap();
        } else {
            let mut small = [0u8; 4];
            let err = c.recv(&mut small, 0, 0).unwrap_err();
            assert!(err.to_string().contains("does not fit"), "{err}");
        }
    });
}

#[test]
fn split_forms_independent_groups() {
    for p in 1..=8 {
        world(p, CommConfig::default(), |c| {
            let r = c.rank();
            // Reverse order inside each color by key.
            let sub = c.split(Some((r % 3) as u32), -(r as i64)).unwrap().unwrap();
            let members: Vec<usize> = (0..p).filter(|q| q % 3 == r % 3).rev().collect();
            assert_eq!(sub.size(), members.len());
            assert_eq!(sub.world_rank(sub.rank()), r);
            let mut x = [r as i64];
            sub.allreduce(&mut x, Op::Sum).unwrap();
            assert_eq!(x[0], members.iter().sum::<usize>() as i64);
            // Interleave a collective on the parent to check contexts stay apart.
            let mut y = [1i64];
            c.allreduce(&mut y, Op::Sum).unwrap();
            assert_eq!(y[0], p as i64);
            let none = c.split(if r == 0 { None } else { Some(0) }, 0).unwrap();
            assert_eq!(none.is_none(), r == 0);
            if let Some(n) = none {
                n.barrier().unwrap();
                assert_eq!(n.size(), p - 1);
            }
        });
    }
}

#[test]
fn object_collectives() {
    world(4, CommConfig::default(), |c| {
        let r = c.rank();
        let payload = vec!["a".to_string(); 3];
        let v = c.broadcast_object(if r == 2 { Some(&payload) } else { None }, 2).unwrap();
        assert_eq!(v, vec!["a".to_string(); 3]);
        let all = c.allgather_object(&format!("rank{r}").repeat(r)).unwrap();
        assert_eq!(all, (0..4).map(|q| format!("rank{q}").repeat(q)).collect::<Vec<_>>());
        let g = c.gather_object(&(r, r * r), 1).unwrap();
        assert_eq!(g.is_some(), r == 1);
        if let Some(g) = g {
            assert_eq!(g, (0..4).map(|q| (q, q * q)).collect::<Vec<_>>());
        }
        let items: Vec<String> = (0..4).map(|q| "x".repeat(q + 1)).collect();
        let mine: String =
            c.scatter_object(if r == 0 { Some(&items[..]) } else { None }, 0).unwrap();
        assert_eq!(mine, "x".repeat(r + 1));
        let out: Vec<(usize, usize)> = (0..4).map(|q| (r, q)).collect();
        let back: Vec<(usize, usize)> = c.alltoall_object(&out).unwrap();
        assert_eq!(back, (0..4).map(|q| (q, r)).collect::<Vec<_>>());
    });
}

#[test]
fn bad_arguments_are_clear_errors() {
    world(2, CommConfig::default(), |c| {
        let e = c.broadcast(&mut [0u8; 4], 5).unwrap_err().to_string();
        assert!(e.contains("root 5 is outside"), "{e}");
        let e = c.allgather(&[1u8; 3], &mut [0u8; 5]).unwrap_err().to_string();
        assert!(e.contains("counts sum to 6 but the buffer holds 5"), "{e}");
        let e = c.send(&[1u8], 9, 0).unwrap_err().to_string();
        assert!(e.contains("destination rank 9"), "{e}");
    });
}
