//! The shared-memory broadcast channel: buffers of many chunks (more than the root's area
//! has slots), every root, calls back to back reusing the slots, mixed with other
//! collectives; and where the ranks share no memory (TCP), the forced algorithm falls back.

mod common;

use common::{on_every_rank, tcp_world, value};
use heddle_comm::{local_world, Algorithm, CallOptions, CommConfig, Op};

/// 512 KiB slots: 6 chunks and a few bytes, past the 4 slots of an area.
const MANY_CHUNKS: usize = 6 * 512 * 1024 / 8 + 3;

fn channel() -> CallOptions {
    CallOptions::default().algorithm(Algorithm::ShmChannel)
}

fn payload(root: usize, call: usize, n: usize) -> Vec<i64> {
    (0..n).map(|i| value(root * 31 + call, i)).collect()
}

#[test]
fn many_chunks_from_every_root_back_to_back() {
    for p in [2, 3, 5] {
        on_every_rank(local_world(p, CommConfig::default()).unwrap(), |c| {
            for call in 0..3 {
                for root in 0..p {
                    for n in [1, 65_537, MANY_CHUNKS] {
                        let expect = payload(root, call, n);
                        let mut buf = if c.rank() == root { expect.clone() } else { vec![0; n] };
                        c.broadcast_with(&mut buf, root, channel()).unwrap();
                        assert!(buf == expect, "p={p} root={root} n={n} call={call}");
                    }
                    // Another collective between broadcasts: the channel's messages are
                    // matched per call and leave nothing behind.
                    let mut x = [c.rank() as i64];
                    c.allreduce(&mut x, Op::Sum).unwrap();
                    assert_eq!(x[0], (p * (p - 1) / 2) as i64);
                }
            }
        });
    }
}

#[test]
fn sub_communicators_use_their_own_roots_area() {
    on_every_rank(local_world(6, CommConfig::default()).unwrap(), |c| {
        let sub = c.split(Some((c.rank() % 2) as u32), -(c.rank() as i64)).unwrap().unwrap();
        let root = 1;
        let expect = payload(c.rank() % 2, 0, MANY_CHUNKS);
        let mut buf = if sub.rank() == root { expect.clone() } else { vec![0; MANY_CHUNKS] };
        sub.broadcast_with(&mut buf, root, channel()).unwrap();
        assert!(buf == expect, "rank {}", c.rank());
    });
}

#[test]
fn without_shared_memory_the_forced_channel_falls_back() {
    on_every_rank(tcp_world(3, &CommConfig::default()), |c| {
        let expect = payload(2, 0, MANY_CHUNKS);
        let mut buf = if c.rank() == 2 { expect.clone() } else { vec![0; MANY_CHUNKS] };
        c.broadcast_with(&mut buf, 2, channel()).unwrap();
        assert!(buf == expect);
    });
}
