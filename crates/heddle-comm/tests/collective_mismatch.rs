//! Ranks that make different collective calls at the same point (another collective,
//! element type, count or reduction) fail, every one of them, naming both calls — never
//! a wrong result and never a hang.

use heddle_comm::{local_world, Algorithm, CallOptions, CommConfig, Communicator, Error, Op};

/// Runs `body` then a barrier on every rank of a world of `n` and returns each rank's
/// result. (A rank may finish its side of a mismatched call before the mismatch is seen,
/// as a broadcast's root does: its next call fails.)
fn run(
    n: usize,
    body: impl Fn(&Communicator) -> Result<(), Error> + Sync,
) -> Vec<Result<(), Error>> {
    let comms = local_world(n, CommConfig::default()).unwrap();
    std::thread::scope(|s| {
        let hs: Vec<_> =
            comms.iter().map(|c| s.spawn(|| body(c).and_then(|()| c.barrier()))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Every rank failed; at least one saw the mismatch itself and named `theirs` and `ours`
/// (in either order: which rank notices first depends on the algorithm); the others were
/// aborted with that message.
fn assert_mismatch(results: &[Result<(), Error>], a: &str, b: &str) {
    let mut seen = 0;
    for (rank, r) in results.iter().enumerate() {
        let text = match r {
            Err(e @ Error::CollectiveMismatch { .. }) => {
                seen += 1;
                e.to_string()
            }
            Err(Error::Aborted(cause)) => cause.message.clone(),
            other => panic!("rank {rank} should have failed: {other:?}"),
        };
        assert!(
            text.contains(a) && text.contains(b),
            "rank {rank}: {text:?} should name {a:?} and {b:?}"
        );
    }
    assert!(seen >= 1, "no rank detected the mismatch: {results:?}");
}

#[test]
fn allreduce_of_different_counts_fails_on_every_rank_with_every_algorithm() {
    for n in [2, 3, 4] {
        for alg in [
            Algorithm::Ring,
            Algorithm::RecursiveDoubling,
            Algorithm::Rabenseifner,
            Algorithm::ReduceBroadcast,
        ] {
            let results = run(n, |c| {
                let len = if c.rank() == 1 { 6 } else { 8 };
                let mut buf = vec![1.0f64; len];
                c.allreduce_with(&mut buf, Op::Sum, CallOptions::default().algorithm(alg))
            });
            assert_mismatch(&results, "allreduce of 6 f64 with sum", "allreduce of 8 f64 with sum");
        }
    }
}

#[test]
fn allreduce_with_different_operations_or_types_fails() {
    let results = run(3, |c| {
        let mut buf = [1i64; 4];
        c.allreduce(&mut buf, if c.rank() == 2 { Op::Max } else { Op::Sum })
    });
    assert_mismatch(&results, "with max", "with sum");
    let results = run(2, |c| {
        if c.rank() == 0 {
            c.allreduce(&mut [1.0f64; 4], Op::Sum)
        } else {
            c.allreduce(&mut [1i32; 4], Op::Sum)
        }
    });
    assert_mismatch(&results, "allreduce of 4 f64", "allreduce of 4 i32");
}

#[test]
fn different_collectives_at_the_same_point_fail() {
    let results = run(2, |c| {
        let mut buf = [7u32; 3];
        if c.rank() == 0 {
            c.broadcast(&mut buf, 0)
        } else {
            c.allreduce(&mut buf, Op::Sum)
        }
    });
    assert_mismatch(&results, "broadcast of 3 u32", "allreduce of 3 u32 with sum");
    let results = run(3, |c| {
        let mut all = vec![0u16; 3 * 2];
        if c.rank() == 1 {
            c.allgather(&[1u16, 2, 3], &mut [0u16; 9])
        } else {
            c.allgather(&[1u16, 2], &mut all)
        }
    });
    assert_mismatch(&results, "allgather of 9 u16", "allgather of 6 u16");
}

#[test]
fn matching_calls_and_the_v_variants_still_work() {
    let results = run(3, |c| {
        let mut buf = vec![c.rank() as f64; 5];
        c.allreduce(&mut buf, Op::Sum)?;
        assert_eq!(buf, vec![3.0; 5]);
        // allgatherv: ranks send different counts, as they may.
        let counts = [1, 2, 3];
        let send = vec![c.rank() as u8; counts[c.rank()]];
        let mut recv = vec![0u8; 6];
        c.allgatherv(&send, &mut recv, &counts)?;
        assert_eq!(recv, [0, 1, 1, 2, 2, 2]);
        Ok(())
    });
    for r in results {
        r.unwrap();
    }
}
