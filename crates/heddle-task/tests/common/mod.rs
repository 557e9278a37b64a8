//! What the task-system tests share: in-process worlds, a numbers source, and bounded
//! waits.

#![allow(dead_code, unreachable_pub)]

use std::thread;
use std::time::{Duration, Instant};

use heddle_comm::{local_world, CommConfig, Communicator};
use heddle_task::ports::Dispatcher;
use heddle_task::{Compute, Context, Produced, Result, Source};

/// Runs `body(comm)` on every worker of an in-process world of `n` (threads) and returns
/// their results in rank order. A failure shows as a timeout in seconds, not minutes.
pub fn on_workers<R: Send>(n: usize, body: impl Fn(&Communicator) -> R + Sync) -> Vec<R> {
    let config = CommConfig { timeout: Duration::from_secs(20), ..CommConfig::default() };
    let comms = local_world(n, config).expect("a local world");
    thread::scope(|s| {
        let hs: Vec<_> = comms.iter().map(|c| s.spawn(|| body(c))).collect();
        hs.into_iter().map(|h| h.join().expect("worker thread")).collect()
    })
}

/// Upper bound for any wait; only reached if something is broken.
pub const PATIENCE: Duration = Duration::from_secs(30);

pub fn dispatcher(threads: usize) -> Dispatcher {
    Dispatcher::new(threads).expect("start a dispatcher")
}

/// Polls `done` until it holds or [`PATIENCE`] runs out.
pub fn wait_until(done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        if Instant::now() > deadline {
            return false;
        }
        thread::sleep(Duration::from_micros(200));
    }
    true
}

/// Emits `next..end`, `per_call` numbers per call.
pub struct Numbers {
    pub next: u64,
    pub end: u64,
    pub per_call: u64,
}

impl Source for Numbers {
    type Out = u64;
    fn next(&mut self, ctx: &mut Context<'_, u64>) -> Result<Produced> {
        let stop = (self.next + self.per_call).min(self.end);
        for x in self.next..stop {
            ctx.emit(x);
        }
        self.next = stop;
        Ok(if self.next == self.end { Produced::Done } else { Produced::More })
    }
}

/// Emits `(x % keys, 1)`.
pub struct Keyed {
    pub keys: u64,
}

impl Compute for Keyed {
    type In = u64;
    type Out = (u64, u64);
    fn execute(&mut self, ctx: &mut Context<'_, (u64, u64)>, x: u64) -> Result<()> {
        ctx.emit((x % self.keys, 1));
        Ok(())
    }
}

pub fn counters(n: usize) -> std::sync::Arc<Vec<std::sync::atomic::AtomicU32>> {
    std::sync::Arc::new((0..n).map(|_| std::sync::atomic::AtomicU32::new(0)).collect())
}

pub fn all_exactly_once(seen: &[std::sync::atomic::AtomicU32]) -> bool {
    seen.iter().all(|count| count.load(std::sync::atomic::Ordering::SeqCst) == 1)
}

/// Posts `posters × each` distinct numbers to `port` from `posters` threads at once.
pub fn post_concurrently(
    port: &heddle_task::ports::Port<usize>,
    posters: usize,
    each: usize,
    offset: usize,
) {
    thread::scope(|scope| {
        for poster in 0..posters {
            let port = port.clone();
            scope.spawn(move || {
                for k in 0..each {
                    port.post(offset + poster * each + k);
                }
            });
        }
    });
}
