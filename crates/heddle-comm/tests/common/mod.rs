//! Helpers shared by the collective tests: run a world's ranks on threads, the buffer
//! configurations to sweep, and the deterministic values ranks contribute.

use heddle_comm::{CommConfig, Communicator};

/// Runs `f` on every communicator of a world, one thread per rank.
pub(crate) fn on_every_rank(comms: Vec<Communicator>, f: impl Fn(&Communicator) + Sync) {
    std::thread::scope(|s| {
        let handles: Vec<_> = comms.iter().map(|c| s.spawn(|| f(c))).collect();
        for h in handles {
            h.join().expect("a rank panicked");
        }
    });
}

/// Configurations: the default, and tiny buffers with a short window (many fragments,
/// constant back-pressure).
pub(crate) fn configs() -> Vec<CommConfig> {
    vec![
        CommConfig::default(),
        CommConfig { buffer_bytes: 1024, window: 2, ..CommConfig::default() },
    ]
}

/// Element `i` of rank `rank`'s contribution.
pub(crate) fn value(rank: usize, i: usize) -> i64 {
    ((rank * 7919 + i * 104_729) % 2003) as i64 - 1000
}
