//! A collective that fails on one rank aborts the job: the other ranks' pending calls
//! return `Error::Aborted` naming the origin, promptly (not after the timeout), and every
//! later call fails the same way.

use std::time::{Duration, Instant};

use heddle_comm::{local_world, CommConfig, Error, Op};

#[test]
fn a_failed_receive_on_one_rank_aborts_the_others_pending_calls() {
    let config = CommConfig { timeout: Duration::from_secs(60), ..CommConfig::default() };
    let comms = local_world(3, config).unwrap();
    let started = Instant::now();
    let results: Vec<Result<(), Error>> = std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .iter()
            .map(|c| {
                s.spawn(move || -> Result<(), Error> {
                    match c.rank() {
                        0 => c.send(&[1u64, 2, 3, 4], 1, 7),
                        // A buffer too small for the message: this rank fails.
                        1 => c.recv(&mut [0u64; 2], 0, 7).map(|_| ()),
                        _ => {
                            let mut x = [1.0f64; 4];
                            c.allreduce(&mut x, Op::Sum)
                        }
                    }?;
                    // Rank 0 reaches a collective that rank 1 never joins.
                    c.barrier()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(started.elapsed() < Duration::from_secs(30), "the abort must not wait for the timeout");
    assert!(matches!(&results[1], Err(Error::Truncated { .. })), "{:?}", results[1]);
    for r in [0, 2] {
        match &results[r] {
            Err(Error::Aborted(cause)) => {
                assert_eq!((cause.origin, cause.kind.as_str()), (1, "Truncated"), "rank {r}");
                assert!(cause.message.contains("does not fit"), "{cause}");
            }
            other => panic!("rank {r}: {other:?}"),
        }
    }
    // Every later call fails at once with the same cause.
    let err = comms[0].barrier().unwrap_err();
    assert!(matches!(&err, Error::Aborted(c) if c.origin == 1), "{err}");
    assert!(err.to_string().starts_with("the job was aborted: rank 1 failed: Truncated:"), "{err}");
}
