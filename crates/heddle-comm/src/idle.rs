//! How a blocked call waits for progress: spin, then yield, then sleep ([`Idle`]).

use std::time::{Duration, Instant};

/// Quiet time after which a waiting thread sleeps between polls instead of yielding.
const DROWSY_AFTER: Duration = Duration::from_millis(20);
/// The first sleep between polls once drowsy, and the longest: a sleep grows with the
/// quiet spell (a 64th of it), so that a worker idle for long polls 500 times a second,
/// not 20,000, while one that was busy a moment ago still answers within 50 µs.
const FIRST_SLEEP: Duration = Duration::from_micros(50);
const LONGEST_SLEEP: Duration = Duration::from_millis(2);
/// The longest sleep on a doorbell, which peers ring when they write: it bounds only how
/// late a waiter notices what does not ring (an abort, a stop, a dead peer).
pub(crate) const LONGEST_PARK: Duration = Duration::from_millis(50);
/// How often a waiting thread checks that the peers it needs are alive.
const ALIVE_CHECK_EVERY: Duration = Duration::from_millis(100);

/// The state of a wait for progress: spin (lowest latency), then yield the core
/// (oversubscribed hosts), and after a quiet spell sleep, longer the longer it lasts, so
/// an idle worker does not burn a core. Reset it whenever a pass makes progress.
#[derive(Debug, Default)]
pub(crate) struct Idle {
    polls: u32,
    since: Option<Instant>,
    /// The sleep between polls (zero: yield instead).
    sleep: Duration,
    last_check: Option<Instant>,
}

impl Idle {
    /// Waits once; every 64 polls past the spin phase returns the time, for checks. Its
    /// sleeps go to `sleep`, which parks on a doorbell when `parks` (and may then be long)
    /// or sleeps for the time given.
    pub(crate) fn wait(
        &mut self,
        spin_polls: u32,
        parks: bool,
        sleep: &dyn Fn(Duration),
    ) -> Option<Instant> {
        self.polls = self.polls.saturating_add(1);
        if self.polls < spin_polls {
            std::hint::spin_loop();
            return None;
        }
        if self.sleep.is_zero() {
            std::thread::yield_now();
        } else {
            sleep(self.sleep);
        }
        // Every 64 polls, or every poll once the sleeps are long.
        if !self.polls.is_multiple_of(64) && self.sleep < Duration::from_micros(500) {
            return None;
        }
        let now = Instant::now();
        let quiet = now - *self.since.get_or_insert(now);
        let longest = if parks { LONGEST_PARK } else { LONGEST_SLEEP };
        self.sleep = if quiet > DROWSY_AFTER {
            (quiet / 64).clamp(FIRST_SLEEP, longest)
        } else {
            Duration::ZERO
        };
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
