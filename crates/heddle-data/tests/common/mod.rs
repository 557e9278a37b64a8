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

/// Checks the part files of `out`, lines `ID KEY COUNT`: every ID of `want` (ID to KEY)
/// exactly once with its key, each key's counts 1..n, no file left in progress.
pub fn check_exactly_once(out: &std::path::Path, want: &std::collections::HashMap<u64, u64>) {
    use std::collections::HashMap;
    let mut seen: HashMap<u64, u32> = HashMap::new();
    let mut counts: HashMap<u64, Vec<u64>> = HashMap::new();
    for e in std::fs::read_dir(out).expect("output").flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        assert!(!name.ends_with(".inprogress"), "left in progress: {name}");
        for line in std::fs::read_to_string(e.path()).expect("part").lines() {
            let f: Vec<u64> = line.split(' ').map(|x| x.parse().expect("a number")).collect();
            assert_eq!(want.get(&f[0]), Some(&f[1]), "{line}");
            *seen.entry(f[0]).or_default() += 1;
            counts.entry(f[1]).or_default().push(f[2]);
        }
    }
    assert_eq!(seen.len(), want.len(), "records missing");
    assert!(seen.values().all(|&n| n == 1), "records written twice");
    for (k, mut c) in counts {
        c.sort_unstable();
        assert_eq!(c, (1..=c.len() as u64).collect::<Vec<_>>(), "key {k}");
    }
}
