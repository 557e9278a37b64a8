//! Non-blocking collectives against the blocking ones and a reference computed here: every
//! call at 1 to 5 ranks, over in-process and TCP links with default and tiny buffers,
//! small and ring-sized buffers; several outstanding at once and finished in any order;
//! interleaved with point-to-point and blocking collectives (which deadlocks if a call
//! shuts the others out); a dropped request; and the errors of mismatched calls. The
//! blocking v-forms with displacements (`*_blocks`) are checked on the same layouts.

mod common;

use std::time::Duration;

use common::{configs, on_every_rank, tcp_world, value};
use heddle_comm::{local_world, Blocks, CommConfig, Communicator, Error, Op};

fn worlds(n: usize) -> Vec<Vec<Communicator>> {
    configs()
        .into_iter()
        .flat_map(|c| [local_world(n, c.clone()).unwrap(), tcp_world(n, &c)])
        .collect()
}

fn data(rank: usize, len: usize) -> Vec<i64> {
    (0..len).map(|i| value(rank, i)).collect()
}

/// The elementwise sum of every rank's `data`.
fn summed(size: usize, len: usize) -> Vec<i64> {
    (0..len).map(|i| (0..size).map(|r| value(r, i)).sum()).collect()
}

#[test]
fn reductions_match_the_reference_and_the_blocking_calls() {
    for size in 1..=5 {
        // 7 elements: the tree; 9000 (72 KB): the ring.
        for len in [0, 7, 9000] {
            for comms in worlds(size) {
                on_every_rank(comms, |c| {
                    let r = c.rank();
                    let all = c.iallreduce(data(r, len), Op::Sum).unwrap().wait().unwrap();
                    assert_eq!(all, summed(size, len), "iallreduce size {size} len {len}");
                    let mut blocking = data(r, len);
                    c.allreduce(&mut blocking, Op::Sum).unwrap();
                    assert_eq!(all, blocking);
                    for root in 0..size {
                        let got = c.ireduce(data(r, len), Op::Sum, root).unwrap().wait().unwrap();
                        let want = if r == root { summed(size, len) } else { Vec::new() };
                        assert_eq!(got, want, "ireduce size {size} root {root}");
                    }
                    let maxed = c.iallreduce(data(r, len), Op::Max).unwrap().wait().unwrap();
                    let want: Vec<i64> =
                        (0..len).map(|i| (0..size).map(|q| value(q, i)).max().unwrap()).collect();
                    assert_eq!(maxed, want);
                    let per = len / size * size;
                    let block =
                        c.ireduce_scatter_block(data(r, per), Op::Sum).unwrap().wait().unwrap();
                    let k = per / size;
                    assert_eq!(block, summed(size, per)[r * k..(r + 1) * k]);
                    let counts: Vec<usize> = (0..size).map(|q| (q * 3 + len) % 5).collect();
                    let total: usize = counts.iter().sum();
                    let mine = c
                        .ireduce_scatter(data(r, total), &counts, Op::Sum)
                        .unwrap()
                        .wait()
                        .unwrap();
                    let start: usize = counts[..r].iter().sum();
                    assert_eq!(mine, summed(size, total)[start..start + counts[r]]);
                });
            }
        }
    }
}

/// x ↦ a·x + b as the pair (a, b); composing is associative but does not commute.
fn compose(acc: &mut [u64], later: &[u64]) {
    for (f, g) in acc.chunks_exact_mut(2).zip(later.chunks_exact(2)) {
        // acc holds the lower ranks' map: apply it first, then `later`.
        let (a, b) = (f[0], f[1]);
        f[0] = g[0].wrapping_mul(a);
        f[1] = g[0].wrapping_mul(b).wrapping_add(g[1]);
    }
}

#[test]
fn scans_keep_rank_order_like_the_blocking_scan() {
    for size in 1..=5 {
        for comms in worlds(size) {
            on_every_rank(comms, |c| {
                let r = c.rank() as u64;
                let mine = vec![2 * r + 3, r + 1, 5, r];
                let op = Op::custom(compose);
                let incl = c.iscan(mine.clone(), op.clone()).unwrap().wait().unwrap();
                let mut want = mine.clone();
                c.scan(&mut want, op.clone()).unwrap();
                assert_eq!(incl, want, "iscan at size {size}");
                // The reference: compose the maps of ranks 0..=r here.
                let mut reference = vec![1, 0, 1, 0];
                for q in 0..=r {
                    compose(&mut reference, &[2 * q + 3, q + 1, 5, q]);
                }
                assert_eq!(incl, reference);
                let excl = c.iexscan(mine.clone(), op.clone()).unwrap().wait().unwrap();
                let mut want = mine.clone();
                c.exscan(&mut want, op).unwrap();
                assert_eq!(excl, want, "iexscan at size {size}");
                let sums = c.iexscan(vec![r + 1], Op::Sum).unwrap().wait().unwrap();
                assert_eq!(sums, [if r == 0 { 1 } else { r * (r + 1) / 2 }]);
            });
        }
    }
}

#[test]
fn data_movement_matches_the_reference() {
    for size in 1..=5 {
        for len in [0, 3, 5000] {
            for comms in worlds(size) {
                on_every_rank(comms, |c| check_movement(c, len));
            }
        }
    }
}

fn check_movement(c: &Communicator, len: usize) {
    let (r, size) = (c.rank(), c.size());
    let concat = |counts: &dyn Fn(usize) -> usize| -> Vec<i64> {
        (0..size).flat_map(|q| data(q, counts(q))).collect()
    };
    for root in 0..size {
        let mine = if r == root { data(root, len) } else { vec![0; len] };
        assert_eq!(c.ibcast(mine, root).unwrap().wait().unwrap(), data(root, len));
        let all = c.igather(data(r, len), root).unwrap().wait().unwrap();
        assert_eq!(all, if r == root { concat(&|_| len) } else { Vec::new() });
        let send = if r == root { concat(&|_| len) } else { Vec::new() };
        assert_eq!(c.iscatter(send, len, root).unwrap().wait().unwrap(), data(r, len));
        // v-forms with gaps, blocks in reverse rank order.
        let counts: Vec<usize> = (0..size).map(|q| (q + len) % 4).collect();
        let mut at = 0;
        let mut displs = vec![0; size];
        for q in (0..size).rev() {
            displs[q] = at + 1;
            at += counts[q] + 1;
        }
        let blocks = Blocks::new(&counts, &displs).unwrap();
        let mut laid_out = vec![0i64; blocks.extent()];
        for q in 0..size {
            laid_out[displs[q]..displs[q] + counts[q]].copy_from_slice(&data(q, counts[q]));
        }
        let got = c.igatherv(data(r, counts[r]), &blocks, root).unwrap().wait().unwrap();
        assert_eq!(got, if r == root { laid_out.clone() } else { Vec::new() });
        let send = if r == root { laid_out.clone() } else { Vec::new() };
        assert_eq!(c.iscatterv(send, &blocks, root).unwrap().wait().unwrap(), data(r, counts[r]));
        let got = c.iallgatherv(data(r, counts[r]), &blocks).unwrap().wait().unwrap();
        assert_eq!(got, laid_out);
        // The blocking forms with the same displacements.
        let mut got = vec![0i64; blocks.extent()];
        c.gatherv_blocks(&data(r, counts[r]), &mut got, &blocks, root).unwrap();
        assert_eq!(got, if r == root { laid_out.clone() } else { vec![0; blocks.extent()] });
        let mut mine = vec![0i64; counts[r]];
        let send = if r == root { laid_out.clone() } else { Vec::new() };
        c.scatterv_blocks(&send, &blocks, &mut mine, root).unwrap();
        assert_eq!(mine, data(r, counts[r]));
        let mut got = vec![0i64; blocks.extent()];
        c.allgatherv_blocks(&data(r, counts[r]), &mut got, &blocks).unwrap();
        assert_eq!(got, laid_out);
    }
    assert_eq!(c.iallgather(data(r, len)).unwrap().wait().unwrap(), concat(&|_| len));
    // All-to-all: rank q sends (q + 1)·(i + 1) elements to rank i, valued q·1000 + i.
    let piece = |from: usize, to: usize| vec![(from * 1000 + to) as i64; (from + 1) * (to + 1)];
    let send: Vec<i64> = (0..size).flat_map(|i| piece(r, i)).collect();
    let sends = Blocks::packed(&(0..size).map(|i| (r + 1) * (i + 1)).collect::<Vec<_>>());
    let recvs = Blocks::packed(&(0..size).map(|q| (q + 1) * (r + 1)).collect::<Vec<_>>());
    let got = c.ialltoallv(send.clone(), &sends, &recvs).unwrap().wait().unwrap();
    assert_eq!(got, (0..size).flat_map(|q| piece(q, r)).collect::<Vec<_>>());
    // Blocking, with the receive blocks in reverse rank order.
    let counts: Vec<usize> = (0..size).map(|q| (q + 1) * (r + 1)).collect();
    let mut displs = vec![0; size];
    let mut at = 0;
    for q in (0..size).rev() {
        displs[q] = at;
        at += counts[q];
    }
    let reversed = Blocks::new(&counts, &displs).unwrap();
    let mut got = vec![0i64; reversed.extent()];
    c.alltoallv_blocks(&send, &sends, &mut got, &reversed).unwrap();
    assert_eq!(got, (0..size).rev().flat_map(|q| piece(q, r)).collect::<Vec<_>>());
    let send: Vec<i64> = (0..size).flat_map(|i| vec![(r * 10 + i) as i64; len]).collect();
    let got = c.ialltoall(send).unwrap().wait().unwrap();
    assert_eq!(got, (0..size).flat_map(|q| vec![(q * 10 + r) as i64; len]).collect::<Vec<_>>());
}

#[test]
fn many_outstanding_finish_in_any_order_beside_other_calls() {
    for size in 2..=4 {
        for comms in worlds(size) {
            on_every_rank(comms, |c| {
                let r = c.rank();
                let barrier = c.ibarrier().unwrap();
                let big = c.iallreduce(data(r, 20_000), Op::Sum).unwrap();
                let small = c.iallreduce(vec![r as u64 + 1], Op::Sum).unwrap();
                let gathered = c.iallgather(vec![r as u32; 3]).unwrap();
                // A blocking collective and a ring of point-to-point messages meanwhile.
                let mut x = [r as u64];
                c.allreduce(&mut x, Op::Sum).unwrap();
                assert_eq!(x[0] as usize, size * (size - 1) / 2);
                let (right, left) = ((r + 1) % size, (r + size - 1) % size);
                let send = c.isend(data(r, 50_000), right, 9).unwrap();
                let mut buf = vec![0i64; 50_000];
                c.recv(&mut buf, left, 9).unwrap();
                assert_eq!(buf, data(left, 50_000));
                send.into_buffer().unwrap();
                // Finish them last to first.
                let want: Vec<u32> = (0..size as u32).flat_map(|q| [q; 3]).collect();
                assert_eq!(gathered.wait().unwrap(), want);
                assert_eq!(small.wait().unwrap(), [(size * (size + 1) / 2) as u64]);
                assert_eq!(big.wait().unwrap(), summed(size, 20_000));
                assert!(barrier.wait().unwrap().is_empty());
            });
        }
    }
}

#[test]
fn a_blocking_message_between_start_and_wait_does_not_deadlock() {
    // Legal MPI: rank 0 starts the barrier and then sends; rank 1 receives first and
    // starts the barrier after. Neither call may hold the worker while it waits.
    for comms in worlds(2) {
        on_every_rank(comms, |c| {
            if c.rank() == 0 {
                let barrier = c.ibarrier().unwrap();
                c.send(&data(0, 300_000), 1, 4).unwrap();
                barrier.wait().unwrap();
            } else {
                let mut buf = vec![0i64; 300_000];
                c.recv(&mut buf, 0, 4).unwrap();
                assert_eq!(buf, data(0, 300_000));
                c.ibarrier().unwrap().wait().unwrap();
            }
        });
    }
}

#[test]
fn a_blocking_send_half_out_and_a_schedule_send_to_the_same_peer_both_finish() {
    // Tiny buffers: the blocking send of 1.6 MB is half out when the credit runs out, and
    // the collective's round posts its own message to the same peer meanwhile.
    let config = CommConfig {
        buffer_bytes: 1024,
        window: 2,
        timeout: Duration::from_secs(20),
        ..CommConfig::default()
    };
    let comms = local_world(2, config).unwrap();
    on_every_rank(comms, |c| {
        let req = c.iallreduce(vec![c.rank() as u64 + 1], Op::Sum).unwrap();
        if c.rank() == 0 {
            std::thread::sleep(Duration::from_millis(50));
            c.send(&vec![7u64; 200_000], 1, 4).unwrap();
        } else {
            let mut buf = vec![0u64; 200_000];
            c.recv(&mut buf, 0, 4).unwrap();
            assert!(buf.iter().all(|&x| x == 7));
        }
        assert_eq!(req.wait().unwrap(), vec![3]);
    });
}

#[test]
fn a_dropped_request_runs_on_for_the_other_ranks() {
    for comms in worlds(3) {
        on_every_rank(comms, |c| {
            let r = c.rank();
            let req = c.iallreduce(data(r, 30_000), Op::Sum).unwrap();
            if r == 1 {
                drop(req); // rank 1 does not want the result; the others still need its part
            } else {
                assert_eq!(req.wait().unwrap(), summed(3, 30_000));
            }
            // The next call on the communicator still lines up.
            let all = c.iallgather(vec![r as u8]).unwrap().wait().unwrap();
            assert_eq!(all, [0, 1, 2]);
        });
    }
}

#[test]
fn mismatched_calls_fail_naming_both() {
    let config = CommConfig { timeout: Duration::from_secs(5), ..CommConfig::default() };
    let comms = local_world(2, config.clone()).unwrap();
    let errors = std::sync::Mutex::new(Vec::new());
    on_every_rank(comms, |c| {
        let r = if c.rank() == 0 {
            c.iallreduce(vec![1.0f64; 4], Op::Sum).and_then(|q| q.wait())
        } else {
            c.iallgather(vec![1.0f64; 4]).and_then(|q| q.wait())
        };
        errors.lock().unwrap().push(r.unwrap_err().to_string());
    });
    let errors = errors.into_inner().unwrap();
    assert!(
        errors.iter().any(|e| e.contains("allreduce of 4 f64") && e.contains("allgather")),
        "{errors:?}"
    );
    // v-forms carry no count in their signature: rank 1 expects 3 elements from rank 0,
    // which sends 2. The short message is named, and the job aborts.
    let comms = local_world(2, config).unwrap();
    let errors = std::sync::Mutex::new(Vec::new());
    on_every_rank(comms, |c| {
        let counts = if c.rank() == 0 { [2, 2] } else { [3, 2] };
        let blocks = Blocks::packed(&counts);
        let r = c.iallgatherv(vec![0u32; counts[c.rank()]], &blocks).and_then(|q| q.wait());
        errors.lock().unwrap().push((c.rank(), r.map_err(|e| e.to_string())));
    });
    let mut errors = errors.into_inner().unwrap();
    errors.sort_by_key(|e| e.0);
    // Rank 0 got what it expected; it may also hear of rank 1's failure (the job aborts).
    let first = &errors[0].1;
    assert!(
        *first == Ok(vec![0; 4]) || first.as_ref().is_err_and(|e| e.contains("expecting 12")),
        "{first:?}"
    );
    let e = errors[1].1.clone().unwrap_err();
    let named = "rank 0 called iallgatherv sending 8 bytes where this rank called iallgatherv \
                 expecting 12 bytes from it";
    assert!(e.contains(named), "{e}");
}

#[test]
fn bad_arguments_are_refused_at_the_call() {
    let c = heddle_comm::solo(CommConfig::default()).unwrap();
    let e = c.ibcast(vec![1u8], 3).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    let comms = local_world(2, CommConfig::default()).unwrap();
    on_every_rank(comms, |c| {
        let e = c.ialltoall(vec![1u8; 3]).unwrap_err().to_string();
        assert!(e.contains("3 elements do not split into 2"), "{e}");
        let e = c.igatherv(vec![1u8; 3], &Blocks::packed(&[1, 1]), 0).unwrap_err().to_string();
        assert!(e.contains("holds 1 elements but it sends 3"), "{e}");
        assert!(Blocks::new(&[1], &[0, 1]).is_err());
    });
}
