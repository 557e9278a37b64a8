//! How a blocked call waits for progress: spin, then yield, then sleep ([`Idle`]).

use std::time::{Duration, Instant};

/// Quiet time after which a waiting thread sleeps between polls instead of yielding.
const DROWSY_AFTER: Duration = Duration::from_millis(20);
/// How often a waiting thread checks that the peers it needs are alive.
const ALIVE_CHECK_EVERY: Duration = Duration::from_millis(100);

/// The state of a wait for progress: spin (lowest latency), then yield the core
/// (oversubscribed hosts), and after a long quiet spell sleep briefly so an idle worker
/// does not burn a core. Reset it whenever a pass makes progress.
#[derive(Debug, Default)]
pub(crate) struct Idle {
    polls: u32,
    since: Option<Instant>,
    drowsy: bool,
    last_check: Option<Instant>,
}

impl Idle {
    /// Waits once; every 64 polls past the spin phase returns the time, for checks.
    pub(crate) fn wait(&mut self, spin_polls: u32) -> Option<Instant> {
        self.polls = self.polls.saturating_add(1);
        if self.polls < spin_polls {
            std::hint::spin_loop();
            return None;
        }
        if self.drowsy {
            std::thread::sleep(Duration::from_micros(50));
        } else {
            std::thread::yield_now();
        }
        if !self.polls.is_multiple_of(64) {
            return None;
        }
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        self.drowsy = now - since > DROWSY_AFTER;
        Some(now)
    }

    /// Whether it is time to check peers' liveness again.
    pub(crate) fn check_due(&mut self, now: Instant) -> bool {
        let due = self.last_check.is_none_or(|t| now - t > ALIVE_CHECK_EVERY);
        if due {
            self.last_check = Some(now);
        }
        due
    }

    /// How long nothing has moved.
    pub(crate) fn waited(&self, now: Instant) -> Duration {
        self.since.map_or(Duration::ZERO, |s| now - s)
    }
}
