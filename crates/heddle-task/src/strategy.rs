//! When a task runs (the Granules scheduling strategies): when data arrives, every T
//! milliseconds, at most K times, or a combination. A task may change its strategy while
//! it runs ([`crate::Context::set_strategy`]).

use std::time::Duration;

/// A task's scheduling strategy.
///
/// ```
/// use std::time::Duration;
/// use heddle_task::Strategy;
/// // Run on every arrival, and also every 50 ms, at most 10 times in all.
/// let s = Strategy::on_data().every(Duration::from_millis(50)).at_most(10);
/// assert_eq!(s.max_runs(), Some(10));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Strategy {
    on_data: bool,
    period: Option<Duration>,
    max_runs: Option<u64>,
}

impl Default for Strategy {
    /// Run when data arrives, without limit.
    fn default() -> Self {
        Strategy::on_data()
    }
}

impl Strategy {
    /// Runs whenever input is waiting: each waiting message is executed at once.
    pub fn on_data() -> Strategy {
        Strategy { on_data: true, period: None, max_runs: None }
    }

    /// Runs every `period` only: input waits in the task's queue until the next run,
    /// which executes all of it and then calls [`crate::Compute::tick`].
    pub fn periodic(period: Duration) -> Strategy {
        Strategy { on_data: false, period: Some(period), max_runs: None }
    }

    /// Also runs every `period` (with no input waiting, just [`crate::Compute::tick`]).
    pub fn every(mut self, period: Duration) -> Strategy {
        self.period = Some(period);
        self
    }

    /// Retires the task after `runs` activations: it closes and its outputs end. Input
    /// that arrives later is counted as discarded.
    pub fn at_most(mut self, runs: u64) -> Strategy {
        self.max_runs = Some(runs);
        self
    }

    /// Whether arriving input activates the task.
    pub fn runs_on_data(&self) -> bool {
        self.on_data
    }

    /// The period of timed activations, if any.
    pub fn period(&self) -> Option<Duration> {
        self.period
    }

    /// The most activations before the task retires, if limited.
    pub fn max_runs(&self) -> Option<u64> {
        self.max_runs
    }
}
