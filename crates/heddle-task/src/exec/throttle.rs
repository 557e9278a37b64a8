//! Network contracts (`Resources::net_bytes_per_s`): a token bucket per task instance in
//! front of its outgoing edges. An edge's pump offers a source's records only while its
//! bucket holds tokens, and takes out what the records cost once the operation has
//! packed them into messages; the records it holds back stay in the task's outbox, which
//! then fills and holds the task itself back. The bucket may go below zero by one
//! message's bytes, so the rate holds over any stretch longer than a message's worth.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use heddle_dataflow::TaskId;

use super::inbox::lock;

/// Seconds of traffic the bucket holds when full: the burst a task may send after idling.
const BURST_S: f64 = 0.05;

/// A task instance's token bucket, shared by its outgoing edges.
#[derive(Debug)]
pub(crate) struct Throttle {
    rate: f64,
    /// Tokens (bytes) and when they were last topped up.
    state: Mutex<(f64, Instant)>,
}

impl Throttle {
    /// A full bucket for `rate` bytes per second.
    pub(crate) fn new(rate: u64) -> Throttle {
        let rate = rate as f64;
        Throttle { rate, state: Mutex::new((rate * BURST_S, Instant::now())) }
    }

    /// Whether the task may send now (the bucket holds tokens).
    pub(crate) fn open(&self) -> bool {
        let mut s = lock(&self.state);
        let now = Instant::now();
        s.0 = (s.0 + now.duration_since(s.1).as_secs_f64() * self.rate).min(self.rate * BURST_S);
        s.1 = now;
        s.0 > 0.0
    }

    /// Takes out what `bytes` sent cost.
    pub(crate) fn spend(&self, bytes: u64) {
        lock(&self.state).0 -= bytes as f64;
    }
}

/// The buckets of the task instances with a network contract, by instance.
pub(crate) type Throttles = HashMap<TaskId, Arc<Throttle>>;

/// One bucket per instance in `instances` (instance, its rate; 0: none).
pub(crate) fn buckets(instances: impl IntoIterator<Item = (TaskId, u64)>) -> Throttles {
    instances
        .into_iter()
        .filter(|&(_, rate)| rate > 0)
        .map(|(t, rate)| (t, Arc::new(Throttle::new(rate))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_bucket_never_lets_more_than_its_rate_through() {
        // 1 MB/s, spent in 64 KiB messages whenever open, for 0.3 s: never more than the
        // rate over the time, the burst and one message (however the thread is scheduled).
        let t = Throttle::new(1_000_000);
        let (start, mut sent) = (Instant::now(), 0u64);
        while start.elapsed() < Duration::from_millis(300) {
            if t.open() {
                t.spend(64 << 10);
                sent += 64 << 10;
            } else {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        let bound = 1e6 * (start.elapsed().as_secs_f64() + BURST_S) + (64 << 10) as f64;
        assert!(sent as f64 <= bound, "{sent} bytes through, at most {bound}");
        assert!(sent > 0);
        assert!(buckets([(1, 0), (2, 5)]).keys().eq([&2]));
    }
}
