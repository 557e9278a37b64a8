//! Prefix reductions against a sequential fold in rank order: sums and maxima, and a
//! non-commutative operator (composition of affine maps) whose result is right only if
//! the operands are combined in rank order; every world size from 1 to 9, over
//! in-process and TCP transports; and ranks calling scan against exscan fail, named.

mod common;

use common::tcp_world;
use heddle_comm::{local_world, CommConfig, Communicator, Error, Op};

/// Rank r's input: a few values that differ per rank and element.
fn input(rank: usize, len: usize) -> Vec<i64> {
    (0..len).map(|i| (rank as i64 * 7919 + i as i64 * 104_729) % 1000 - 500).collect()
}

/// Composition of affine maps x → a·x + b mod 2⁶⁴, stored as (a, b) pairs: applying `acc`
/// then `inc`. Not commutative.
fn compose(acc: &mut [u64], inc: &[u64]) {
    for (m, n) in acc.chunks_exact_mut(2).zip(inc.chunks_exact(2)) {
        let (a1, b1, a2, b2) = (m[0], m[1], n[0], n[1]);
        m[0] = a2.wrapping_mul(a1);
        m[1] = a2.wrapping_mul(b1).wrapping_add(b2);
    }
}

fn affine(rank: usize) -> Vec<u64> {
    vec![3 + 2 * rank as u64, rank as u64 * 11 + 1, 5 + rank as u64, 7]
}

/// The fold of `inputs[..=r]` (inclusive) or `inputs[..r]` (exclusive; `None` for r = 0).
fn fold<T: Clone>(
    inputs: &[Vec<T>],
    r: usize,
    inclusive: bool,
    f: impl Fn(&mut [T], &[T]),
) -> Option<Vec<T>> {
    let upto = if inclusive { r + 1 } else { r };
    let mut acc = inputs.first()?.clone();
    if upto == 0 {
        return None;
    }
    for x in &inputs[1..upto] {
        f(&mut acc, x);
    }
    Some(acc)
}

fn on(comms: &[Communicator], body: impl Fn(&Communicator) -> Result<(), Error> + Sync) {
    std::thread::scope(|s| {
        for c in comms {
            let body = &body;
            s.spawn(move || body(c).unwrap_or_else(|e| panic!("rank {}: {e}", c.rank())));
        }
    });
}

fn check_world(comms: &[Communicator]) {
    let n = comms.len();
    let sums: Vec<Vec<i64>> = (0..n).map(|r| input(r, 5)).collect();
    let maps: Vec<Vec<u64>> = (0..n).map(affine).collect();
    let add = |a: &mut [i64], b: &[i64]| a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
    let max = |a: &mut [i64], b: &[i64]| a.iter_mut().zip(b).for_each(|(x, y)| *x = (*x).max(*y));
    on(comms, |c| {
        let r = c.rank();
        for inclusive in [true, false] {
            let run = |buf: &mut Vec<i64>, op: Op<i64>| {
                if inclusive {
                    c.scan(buf, op)
                } else {
                    c.exscan(buf, op)
                }
            };
            let mut x = input(r, 5);
            run(&mut x, Op::Sum)?;
            let want = fold(&sums, r, inclusive, add).unwrap_or_else(|| input(r, 5));
            assert_eq!(x, want, "{n} ranks, rank {r}, sum, inclusive {inclusive}");
            let mut x = input(r, 5);
            run(&mut x, Op::Max)?;
            let want = fold(&sums, r, inclusive, max).unwrap_or_else(|| input(r, 5));
            assert_eq!(x, want, "{n} ranks, rank {r}, max, inclusive {inclusive}");
            let mut m = affine(r);
            let op = Op::custom(compose);
            if inclusive {
                c.scan(&mut m, op)?
            } else {
                c.exscan(&mut m, op)?
            }
            let want = fold(&maps, r, inclusive, compose).unwrap_or_else(|| affine(r));
            assert_eq!(m, want, "{n} ranks, rank {r}, composition, inclusive {inclusive}");
        }
        Ok(())
    });
}

#[test]
fn scans_match_a_fold_in_rank_order_on_every_world_size() {
    for n in 1..=9 {
        check_world(&local_world(n, CommConfig::default()).unwrap());
    }
    for n in [3, 5] {
        check_world(&tcp_world(n, &CommConfig::default()));
    }
}

#[test]
fn scan_against_exscan_fails_naming_both_calls() {
    let comms = local_world(3, CommConfig::default()).unwrap();
    let results: Vec<Result<(), Error>> = std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .iter()
            .map(|c| {
                s.spawn(move || {
                    let mut x = [1u32; 4];
                    let r = if c.rank() == 1 {
                        c.exscan(&mut x, Op::Sum)
                    } else {
                        c.scan(&mut x, Op::Sum)
                    };
                    r.and_then(|()| c.barrier())
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let named =
        results.iter().filter_map(|r| r.as_ref().err()).map(ToString::to_string).find(|e| {
            e.contains("exscan of 4 u32 with sum") && e.contains("scan of 4 u32 with sum")
        });
    assert!(named.is_some(), "{results:?}");
    assert!(results.iter().all(Result::is_err), "{results:?}");
}
