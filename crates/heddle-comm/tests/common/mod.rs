//! Helpers shared by the collective tests: run a world's ranks on threads, a world over
//! loopback TCP, the buffer configurations to sweep, and the deterministic values ranks
//! contribute.

// Each test binary uses some of these helpers.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};

use heddle_comm::{CommConfig, Communicator, WorldBuilder};

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

/// A world of `n` ranks in this process, every pair joined by a loopback TCP socket.
pub(crate) fn tcp_world(n: usize, config: &CommConfig) -> Vec<Communicator> {
    let mut builders: Vec<WorldBuilder> =
        (0..n).map(|r| WorldBuilder::new(r, n, config.clone()).unwrap()).collect();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    for a in 0..n {
        for b in a + 1..n {
            let out = TcpStream::connect(addr).unwrap();
            let (inc, _) = listener.accept().unwrap();
            builders[a].add_tcp(b, out).unwrap();
            builders[b].add_tcp(a, inc).unwrap();
        }
    }
    builders.into_iter().map(|b| b.build().unwrap()).collect()
}
