//! How far the batch stage a worker runs is, for the launcher's progress bar: what its
//! sources gave out of what they said they hold. A source counts records (a range, a
//! collection) or, when it reads files, bytes; one that can say neither leaves the total
//! unknown (a spinner instead of a bar).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::{enabled, lock, registry};

/// How far the batch stage running now is: what its sources gave out, of how much.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgressSample {
    /// The stage's number on this worker (1, 2, ...: each job run is one).
    pub stage: u64,
    /// Its vertices, in order (`range#0 → map#1 → collect`).
    pub name: String,
    /// Records the stage's sources gave out on this worker.
    pub done: u64,
    /// Records they will give out in all, when every source counts records and knows how
    /// many (`None`: unknown).
    pub total: Option<u64>,
    /// Bytes the stage's file sources read on this worker.
    #[serde(default)]
    pub bytes_done: u64,
    /// Bytes they will read in all, when every source reads files (`None`: unknown).
    #[serde(default)]
    pub bytes_total: Option<u64>,
}

/// The stage's counts on this worker.
#[derive(Debug, Default)]
pub(super) struct Stage {
    /// Its number and name.
    pub(super) name: Mutex<(u64, String)>,
    done: AtomicU64,
    total: AtomicU64,
    bytes_done: AtomicU64,
    bytes_total: AtomicU64,
    /// Some source said how many records it has; how many bytes; neither.
    records_known: AtomicBool,
    bytes_known: AtomicBool,
    unknown: AtomicBool,
}

impl Stage {
    /// A new stage named `name` starts: every count from zero.
    pub(super) fn start(&self, name: String) {
        let mut stage = lock(&self.name);
        *stage = (stage.0 + 1, name);
        for n in [&self.done, &self.total, &self.bytes_done, &self.bytes_total] {
            n.store(0, Ordering::Relaxed);
        }
        for flag in [&self.records_known, &self.bytes_known, &self.unknown] {
            flag.store(false, Ordering::Relaxed);
        }
    }

    /// The stage's sample (`None` before the first stage).
    pub(super) fn sample(&self) -> Option<ProgressSample> {
        let (stage, name) = lock(&self.name).clone();
        let unknown = self.unknown.load(Ordering::Relaxed);
        let records = self.records_known.load(Ordering::Relaxed);
        let bytes = self.bytes_known.load(Ordering::Relaxed);
        (stage > 0).then(|| ProgressSample {
            stage,
            name,
            done: self.done.load(Ordering::Relaxed),
            total: (records && !bytes && !unknown).then(|| self.total.load(Ordering::Relaxed)),
            bytes_done: self.bytes_done.load(Ordering::Relaxed),
            bytes_total: (bytes && !records && !unknown)
                .then(|| self.bytes_total.load(Ordering::Relaxed)),
        })
    }
}

/// A source of the stage will give out `records` records (`None`: it cannot say).
pub fn expect_records(records: Option<u64>) {
    if !enabled() {
        return;
    }
    let s = &registry().stage;
    match records {
        Some(n) => {
            s.total.fetch_add(n, Ordering::Relaxed);
            s.records_known.store(true, Ordering::Relaxed);
        }
        None => s.unknown.store(true, Ordering::Relaxed),
    }
}

/// A source of the stage gave out `n` more records.
pub fn records_done(n: u64) {
    if enabled() {
        registry().stage.done.fetch_add(n, Ordering::Relaxed);
    }
}

/// A source of the stage will read `bytes` bytes of files (instead of saying how many
/// records it holds).
///
/// ```
/// use heddle_comm::metrics;
/// metrics::expect_bytes(1000);
/// metrics::bytes_read(250);
/// ```
pub fn expect_bytes(bytes: u64) {
    if !enabled() {
        return;
    }
    let s = &registry().stage;
    s.bytes_total.fetch_add(bytes, Ordering::Relaxed);
    s.bytes_known.store(true, Ordering::Relaxed);
}

/// A file source of the stage read `n` more bytes.
pub fn bytes_read(n: u64) {
    if enabled() {
        registry().stage.bytes_done.fetch_add(n, Ordering::Relaxed);
    }
}
