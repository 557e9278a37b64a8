//! What the data-API tests share.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use heddle_comm::{local_world, CommConfig};
use heddle_data::Session;
use heddle_dataflow::Options;

/// Runs `body(session)` on every worker of an in-process world of `n` (threads) and
/// returns every worker's result, in rank order. A failure shows within 20 s.
pub fn on_workers<R: Send>(n: usize, body: impl Fn(&Session) -> R + Sync) -> Vec<R> {
    on_owned_sessions(n, |s| body(&s))
}

/// As [`on_workers`], each worker running its tasks on `threads` executor threads.
pub fn on_workers_with<R: Send>(
    n: usize,
    threads: usize,
    body: impl Fn(&Session) -> R + Sync,
) -> Vec<R> {
    on_owned_sessions(n, |s| body(&s.with_threads(threads).expect("threads")))
}

/// As [`on_workers`], the sessions using `opts` (a memory budget, spill directories).
pub fn on_sessions_with_options<R: Send>(
    n: usize,
    opts: Options,
    body: impl Fn(&Session) -> R + Sync,
) -> Vec<R> {
    on_owned_sessions(n, |s| body(&s.with_options(opts.clone()).expect("options")))
}

/// As [`on_workers`], the session handed over (so a test can set its partitions, threads
/// or options first).
pub fn on_owned_sessions<R: Send>(n: usize, body: impl Fn(Session) -> R + Sync) -> Vec<R> {
    let config = CommConfig { timeout: Duration::from_secs(20), ..CommConfig::default() };
    let comms = local_world(n, config).expect("a local world");
    std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .into_iter()
            .map(|c| {
                let body = &body;
                s.spawn(move || body(Session::new(c).expect("session")))
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("worker")).collect()
    })
}
