//! What a bridge measures (`spec/bridge.md` §8).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::control::FilterStatus;
use crate::Transport;

/// Latency samples kept for the percentiles.
const SAMPLES: usize = 4096;

/// A snapshot of one bridge's measurements.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostics {
    /// The transport in use.
    pub transport: Transport,
    /// The channel's number (1 + switches).
    pub epoch: u32,
    /// Records sent to the filter.
    pub records_sent: u64,
    /// Records received from it.
    pub records_received: u64,
    /// Payload bytes sent.
    pub bytes_sent: u64,
    /// Payload bytes received.
    pub bytes_received: u64,
    /// Records sent and not yet granted back (queue depth).
    pub in_flight: u64,
    /// The most ever in flight.
    pub max_in_flight: u64,
    /// Largest record sent, in bytes.
    pub max_record_sent: u64,
    /// Latency from a record's DATA to the credit that covers it, in microseconds.
    pub latency_p50_us: f64,
    /// 99th percentile of the same.
    pub latency_p99_us: f64,
    /// Records per second since the bridge started.
    pub records_per_s: f64,
    /// Durations of the switches so far.
    pub switches: Vec<Duration>,
    /// The filter's last STATUS answer.
    pub filter: Option<FilterStatus>,
    /// Bytes of shared memory the channel holds (the shm transport).
    pub shm_bytes: u64,
    /// Descriptors open in this (the host's) process.
    pub host_open_fds: u64,
    /// Sockets open in this process.
    pub host_open_sockets: u64,
    /// Mean payload of the records sent lately (exponential average over ~32 records).
    pub mean_record_bytes: f64,
    /// Why each policy switch happened, in order.
    pub switch_reasons: Vec<String>,
}

/// The running counters behind [`Diagnostics`].
#[derive(Debug)]
pub(crate) struct Meter {
    started: Instant,
    pub(crate) records_sent: u64,
    pub(crate) records_received: u64,
    pub(crate) bytes_sent: u64,
    pub(crate) bytes_received: u64,
    granted: u64,
    max_in_flight: u64,
    max_record_sent: u64,
    sent_at: VecDeque<Instant>,
    samples: VecDeque<u32>,
    pub(crate) switches: Vec<Duration>,
    pub(crate) filter: Option<FilterStatus>,
    mean_bytes: f64,
    pub(crate) switch_reasons: Vec<String>,
    pub(crate) last_switch: Option<Instant>,
}

impl Meter {
    pub(crate) fn new() -> Meter {
        Meter {
            started: Instant::now(),
            records_sent: 0,
            records_received: 0,
            bytes_sent: 0,
            bytes_received: 0,
            granted: 0,
            max_in_flight: 0,
            max_record_sent: 0,
            sent_at: VecDeque::new(),
            samples: VecDeque::new(),
            switches: Vec::new(),
            filter: None,
            mean_bytes: 0.0,
            switch_reasons: Vec::new(),
            last_switch: None,
        }
    }

    pub(crate) fn sent(&mut self, bytes: usize) {
        self.records_sent += 1;
        self.bytes_sent += bytes as u64;
        self.max_record_sent = self.max_record_sent.max(bytes as u64);
        self.mean_bytes = if self.records_sent == 1 {
            bytes as f64
        } else {
            self.mean_bytes + (bytes as f64 - self.mean_bytes) / 32.0
        };
        self.sent_at.push_back(Instant::now());
        self.max_in_flight = self.max_in_flight.max(self.records_sent - self.granted);
    }

    pub(crate) fn received(&mut self, bytes: usize) {
        self.records_received += 1;
        self.bytes_received += bytes as u64;
    }

    /// The filter granted `n` records back: the last of them finished now.
    pub(crate) fn granted(&mut self, n: u32) {
        let n = (n as usize).min(self.sent_at.len());
        if n == 0 {
            return;
        }
        let last = self.sent_at.drain(..n).next_back();
        self.granted += n as u64;
        if let Some(t) = last {
            if self.samples.len() == SAMPLES {
                self.samples.pop_front();
            }
            self.samples.push_back(u32::try_from(t.elapsed().as_micros()).unwrap_or(u32::MAX));
        }
    }

    /// The measurements now; the process's descriptors and sockets (a walk of
    /// `/proc/self/fd`) only when `resources` asks for them, 0 otherwise.
    pub(crate) fn snapshot(
        &self,
        transport: Transport,
        epoch: u32,
        shm_bytes: u64,
        resources: bool,
    ) -> Diagnostics {
        let mut s: Vec<u32> = self.samples.iter().copied().collect();
        s.sort_unstable();
        let pct = |q: f64| {
            if s.is_empty() {
                0.0
            } else {
                f64::from(s[((s.len() - 1) as f64 * q).round() as usize])
            }
        };
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        let fds = if resources { open_fds() } else { (0, 0) };
        Diagnostics {
            transport,
            epoch,
            records_sent: self.records_sent,
            records_received: self.records_received,
            bytes_sent: self.bytes_sent,
            bytes_received: self.bytes_received,
            in_flight: self.records_sent - self.granted,
            max_in_flight: self.max_in_flight,
            max_record_sent: self.max_record_sent,
            latency_p50_us: pct(0.5),
            latency_p99_us: pct(0.99),
            records_per_s: self.records_sent as f64 / secs,
            switches: self.switches.clone(),
            filter: self.filter,
            shm_bytes,
            host_open_fds: fds.0,
            host_open_sockets: fds.1,
            mean_record_bytes: self.mean_bytes,
            switch_reasons: self.switch_reasons.clone(),
        }
    }
}

/// Descriptors and sockets open in this process.
fn open_fds() -> (u64, u64) {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return (0, 0) };
    let (mut fds, mut sockets) = (0, 0);
    for e in dir.flatten() {
        fds += 1;
        if std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().starts_with("socket:")) {
            sockets += 1;
        }
    }
    (fds, sockets)
}
