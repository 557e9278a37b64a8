//! Host-aware collectives: ranks placed on simulated hosts (in-process rings, the host of
//! each rank given), every layout — even, interleaved, uneven, a host of one rank — every
//! root, small and large buffers (fewer elements than ranks a host too), against naive
//! references; picked by the table and forced (the two-level allreduce as well).

use heddle_comm::{local_world_on_hosts, Algorithm, CallOptions, CommConfig, Communicator, Op};

mod common;

use common::{configs, on_every_rank, value};

const LAYOUTS: &[&[u32]] = &[
    &[0, 0, 1, 1, 2, 2],
    &[0, 0, 0, 1, 1, 1],
    &[0, 1, 2, 0, 1, 2],
    &[0, 0, 0, 1],
    &[0, 1, 1, 1, 1],
    &[2, 2, 1, 1, 1, 0, 0, 0],
    &[0, 1],
];

const COUNTS: &[usize] = &[1, 7, 1000, 300_000];

fn on_hosts(hosts: &[u32], f: impl Fn(&Communicator) + Sync) {
    on_hosts_with(hosts, CommConfig::default(), f);
}

fn on_hosts_with(hosts: &[u32], config: CommConfig, f: impl Fn(&Communicator) + Sync) {
    on_every_rank(local_world_on_hosts(hosts, config).unwrap(), f);
}

fn contribution(rank: usize, n: usize) -> Vec<i64> {
    (0..n).map(|i| value(rank, i)).collect()
}

fn reference(p: usize, n: usize, op: fn(i64, i64) -> i64) -> Vec<i64> {
    (0..n).map(|i| (1..p).fold(value(0, i), |acc, r| op(acc, value(r, i)))).collect()
}

/// The table's choice and the forced algorithm.
fn options() -> [CallOptions; 2] {
    [CallOptions::default(), CallOptions::default().algorithm(Algorithm::Hierarchical)]
}

#[test]
fn allreduce_on_every_layout() {
    for (hosts, config) in LAYOUTS.iter().flat_map(|h| configs().into_iter().map(move |c| (h, c))) {
        let p = hosts.len();
        on_hosts_with(hosts, config, |c| {
            for &n in COUNTS {
                let two_level = CallOptions::default().algorithm(Algorithm::TwoLevel);
                for opts in options().into_iter().chain([two_level]) {
                    let mut buf = contribution(c.rank(), n);
                    c.allreduce_with(&mut buf, Op::Sum, opts).unwrap();
                    assert_eq!(buf, reference(p, n, |a, b| a + b), "{hosts:?} n={n}");
                    let mut buf = contribution(c.rank(), n);
                    c.allreduce_with(&mut buf, Op::Min, opts).unwrap();
                    assert_eq!(buf, reference(p, n, i64::min), "{hosts:?} n={n} min");
                }
            }
        });
    }
}

#[test]
fn broadcast_and_reduce_from_every_root() {
    for hosts in LAYOUTS {
        let p = hosts.len();
        on_hosts(hosts, |c| {
            for &n in &COUNTS[..3] {
                for root in 0..p {
                    for opts in options() {
                        let expect = contribution(root + 100, n);
                        let mut buf = if c.rank() == root { expect.clone() } else { vec![0; n] };
                        c.broadcast_with(&mut buf, root, opts).unwrap();
                        assert_eq!(buf, expect, "broadcast {hosts:?} n={n} root={root}");
                        let send = contribution(c.rank(), n);
                        let mut recv = vec![0; if c.rank() == root { n } else { 0 }];
                        c.reduce_with(&send, &mut recv, Op::Sum, root, opts).unwrap();
                        if c.rank() == root {
                            assert_eq!(recv, reference(p, n, |a, b| a + b), "reduce {hosts:?}");
                        }
                    }
                }
            }
        });
    }
}

#[test]
fn sub_communicators_keep_their_hosts() {
    // Even ranks of [a a b b c c d d]: one per host, so flat algorithms; the first half:
    // two hosts of two.
    on_hosts(&[0, 0, 1, 1, 2, 2, 3, 3], |c| {
        for color in [c.rank() % 2, c.rank() / 4] {
            let sub = c.split(Some(color as u32), 0).unwrap().unwrap();
            let mut x = contribution(sub.rank(), 500);
            sub.allreduce(&mut x, Op::Sum).unwrap();
            assert_eq!(x, reference(sub.size(), 500, |a, b| a + b));
        }
    });
}

#[test]
fn allgather_and_allgatherv_on_every_layout() {
    for hosts in LAYOUTS {
        let p = hosts.len();
        on_hosts(hosts, |c| {
            for &n in &COUNTS[..3] {
                for opts in options() {
                    let send = contribution(c.rank(), n);
                    let mut recv = vec![0; n * p];
                    c.allgather_with(&send, &mut recv, opts).unwrap();
                    let want: Vec<i64> = (0..p).flat_map(|r| contribution(r, n)).collect();
                    assert_eq!(recv, want, "allgather {hosts:?} n={n}");
                    // Rank r contributes r + n elements.
                    let counts: Vec<usize> = (0..p).map(|r| r + n).collect();
                    let send = contribution(c.rank(), counts[c.rank()]);
                    let mut recv = vec![0; counts.iter().sum()];
                    c.allgatherv_with(&send, &mut recv, &counts, opts).unwrap();
                    let want: Vec<i64> = (0..p).flat_map(|r| contribution(r, counts[r])).collect();
                    assert_eq!(recv, want, "allgatherv {hosts:?} n={n}");
                }
            }
        });
    }
}
