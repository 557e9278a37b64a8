//! The [`SpillSorter`]: buffers byte records within a memory budget, writes sorted runs to
//! the spill directories, and hands everything back merged in key order.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::{Error, Result};

use super::buffer::{Buffer, RECORD_OVERHEAD};
use super::merge::Merge;
use super::run_file::Run;
use super::run_store::RunStore;
use super::sorted::{BufferRecords, ByteRecords, SortedRecords};
use super::{KeyOrder, MERGE_WIDTH};

/// Where and when a [`SpillSorter`] spills.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpillConfig {
    /// Directories for run files, used round-robin (default: the system temp directory).
    pub dirs: Vec<PathBuf>,
    /// Buffered bytes (keys, values and a per-record estimate) above which a run is written
    /// (default 64 MiB).
    pub budget_bytes: usize,
}

impl Default for SpillConfig {
    fn default() -> Self {
        SpillConfig { dirs: vec![std::env::temp_dir()], budget_bytes: 64 << 20 }
    }
}

/// Sorts `(key, value)` records of any total size by key within a memory budget.
///
/// See the [module documentation](super) for an example.
pub struct SpillSorter {
    store: RunStore,
    budget_bytes: usize,
    order: KeyOrder,
    /// `order` is plain byte order: sort by an 8-byte prefix first.
    bytewise: bool,
    buffer: Buffer,
    buffered_bytes: usize,
    pub(super) runs: Vec<Run>,
    pushed: u64,
    spilled_bytes: u64,
}

impl SpillSorter {
    /// A sorter spilling to `config.dirs` in the key `order` (`None`: bytewise).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if `config.dirs` is empty or names something that is not a
    /// directory; [`Error::Io`] naming the directory if one does not exist or a file cannot
    /// be created in it (checked now, not at the first spill).
    pub fn new(config: SpillConfig, order: Option<KeyOrder>) -> Result<SpillSorter> {
        Ok(SpillSorter {
            store: RunStore::new(config.dirs)?,
            budget_bytes: config.budget_bytes,
            bytewise: order.is_none(),
            order: order.unwrap_or_else(|| Arc::new(|a: &[u8], b: &[u8]| a.cmp(b))),
            buffer: Buffer::default(),
            buffered_bytes: 0,
            runs: Vec::new(),
            pushed: 0,
            spilled_bytes: 0,
        })
    }

    /// Adds one record; writes a sorted run when the buffer passes the budget.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if the key or value has 4 GiB or more; [`Error::Io`] naming
    /// the file if a run cannot be written (the buffered records are kept).
    pub fn push(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<()> {
        self.push_slices(&key, &value)
    }

    /// Adds one record by copying `key` and `value`, as [`push`](Self::push) does, without
    /// needing them owned.
    ///
    /// # Errors
    ///
    /// As [`push`](Self::push).
    pub fn push_slices(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if u32::try_from(key.len()).is_err() || u32::try_from(value.len()).is_err() {
            return Err(Error::InvalidArgument(format!(
                "record with a {}-byte key and a {}-byte value cannot be spilled; keys and values \
                 must be under 4 GiB",
                key.len(),
                value.len()
            )));
        }
        self.buffered_bytes =
            self.buffered_bytes.saturating_add(key.len() + value.len() + RECORD_OVERHEAD);
        self.buffer.push(key, value);
        self.pushed += 1;
        if self.buffered_bytes > self.budget_bytes {
            self.spill()?;
        }
        Ok(())
    }

    /// Records pushed so far.
    pub fn len(&self) -> u64 {
        self.pushed
    }

    /// Whether no record was pushed.
    pub fn is_empty(&self) -> bool {
        self.pushed == 0
    }

    /// Bytes written to run files so far, headers included.
    pub fn spilled_bytes(&self) -> u64 {
        self.spilled_bytes
    }

    /// Sorted runs written to disk so far.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Every record pushed, in key order, equal keys in push order.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the file if a run cannot be read back, is corrupt, or (with more
    /// than [`MERGE_WIDTH`] runs) an intermediate run cannot be written.
    pub fn finish(self) -> Result<SortedRecords> {
        self.finish_with_width(MERGE_WIDTH)
    }

    pub(super) fn finish_with_width(mut self, width: usize) -> Result<SortedRecords> {
        let mut memory = std::mem::take(&mut self.buffer);
        memory.sort(&self.order, self.bytewise);
        let runs = std::mem::take(&mut self.runs);
        let memory = BufferRecords { buffer: memory, next: 0 };
        let format = ByteRecords(self.order.clone());
        let merge = Merge::with_width(format, runs, memory, &mut self.store, width)?;
        Ok(SortedRecords { merge })
    }

    fn spill(&mut self) -> Result<()> {
        self.buffer.sort(&self.order, self.bytewise);
        let mut writer = self.store.writer()?;
        for (key, value) in self.buffer.records() {
            writer.push(key, value)?;
        }
        let (run, bytes) = writer.finish()?;
        self.runs.push(run);
        self.spilled_bytes += bytes;
        self.buffer.clear();
        self.buffered_bytes = 0;
        Ok(())
    }
}

impl fmt::Debug for SpillSorter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpillSorter")
            .field("store", &self.store)
            .field("budget_bytes", &self.budget_bytes)
            .field("buffered_records", &self.buffer.len())
            .field("buffered_bytes", &self.buffered_bytes)
            .field("runs", &self.runs.len())
            .field("pushed", &self.pushed)
            .field("spilled_bytes", &self.spilled_bytes)
            .finish()
    }
}
