//! Every collective takes [`CallOptions`]: each `_with` variant gives the same result as
//! the plain call, and a per-call timeout applies to it.

use std::time::Duration;

use heddle_comm::{local_world, CallOptions, CommConfig, Error, Op};

#[test]
fn every_collective_has_a_with_variant_that_gives_the_same_result() {
    let comms = local_world(3, CommConfig::default()).unwrap();
    std::thread::scope(|s| {
        for c in &comms {
            s.spawn(move || {
                let o = CallOptions::default().timeout(Duration::from_secs(30));
                let r = c.rank() as u32;
                let mut all = vec![0u32; 3];
                c.gather_with(&[r], &mut all, 0, o).unwrap();
                if r == 0 {
                    assert_eq!(all, [0, 1, 2]);
                }
                let mut v = vec![0u32; 6];
                c.gatherv_with(&vec![r; r as usize + 1], &mut v, &[1, 2, 3], 2, o).unwrap();
                if r == 2 {
                    assert_eq!(v, [0, 1, 1, 2, 2, 2]);
                }
                let mut one = [9u32];
                c.scatter_with(&[10, 11, 12], &mut one, 1, o).unwrap();
                assert_eq!(one[0], 10 + r);
                let mut mine = vec![0u32; r as usize + 1];
                c.scatterv_with(&[5, 6, 6, 7, 7, 7], &[1, 2, 3], &mut mine, 0, o).unwrap();
                assert_eq!(mine, vec![5 + r; r as usize + 1]);
                let mut g = vec![0u32; 6];
                c.allgatherv_with(&vec![r; r as usize + 1], &mut g, &[1, 2, 3], o).unwrap();
                assert_eq!(g, [0, 1, 1, 2, 2, 2]);
                // Rank i sends j+1 copies of i to rank j.
                let send: Vec<u32> = (0..3).flat_map(|j| vec![r; j + 1]).collect();
                let mut recv = vec![0u32; 3 * (r as usize + 1)];
                let rc = vec![r as usize + 1; 3];
                c.alltoallv_with(&send, &[1, 2, 3], &mut recv, &rc, o).unwrap();
                let want: Vec<u32> = (0..3).flat_map(|i| vec![i; r as usize + 1]).collect();
                assert_eq!(recv, want);
                let mut block = [0u64; 2];
                c.reduce_scatter_block_with(&[1u64; 6], &mut block, Op::Sum, o).unwrap();
                assert_eq!(block, [3, 3]);
            });
        }
    });
}

#[test]
fn a_per_call_timeout_applies_to_gather() {
    let comms = local_world(2, CommConfig::default()).unwrap();
    // Rank 1 never joins: rank 0's gather gives up after the call's own timeout, not the
    // configured one.
    let configured = comms[0].config().timeout;
    let call = Duration::from_millis(300);
    assert!(call < configured);
    let mut all = [0u8; 2];
    match comms[0]
        .gather_with(&[1u8], &mut all, 0, CallOptions::default().timeout(call))
        .unwrap_err()
    {
        Error::Timeout { waited, .. } => {
            assert!(waited >= call && waited < configured, "waited {waited:?}")
        }
        other => panic!("{other}"),
    }
}
