//! External sorting with disk spill: the one run writer and k-way merge of every sort and
//! spilling operation.
//!
//! The parts: a [`RunStore`] makes run files in private scratch directories of the spill
//! directories (in turn), a [`RunWriter`] writes one, and a [`Merge`] merges runs with an
//! in-memory remainder for any record type with a [`RunFormat`] (its order and encoding).
//! The byte-record [`SpillSorter`] of the dataflow operations and the data API's typed
//! `sort_by_key` both sort through them.
//!
//! A [`SpillSorter`] buffers `(key, value)` records in memory. Once the buffered bytes pass
//! the budget it sorts them by key and writes them as one *sorted run* to a file in one of the
//! spill directories (round-robin), then carries on. [`SpillSorter::finish`] merges every run
//! with the sorted in-memory remainder into one [`SortedRecords`] stream in key order; records
//! with equal keys come out in the order they were pushed. The merge holds one record and one
//! read buffer per run; more than [`MERGE_WIDTH`] runs are first merged in passes of that
//! width, so open files and merge memory stay bounded however much was spilled: besides the
//! budget, a merge needs at most `MERGE_WIDTH` read buffers of 64 KiB.
//!
//! Run files are named `heddle-spill-<counter>.run`, mode 0600, in a private
//! [`ScratchDir`](heddle_comm::scratch::ScratchDir) (mode 0700) that the sorter makes in
//! each spill directory it uses. They are removed when the sorter or the stream owning them
//! is dropped: after success, after an error, or half-way; the scratch directory goes with
//! its last run (see [`scratch`](heddle_comm::scratch) for the exits that drop nothing).
//!
//! # Run file format
//!
//! Integers are little-endian; `RunWriter` and `RunReader` mirror each other field by field.
//!
//! ```text
//! 0      4         8                  16
//! +------+---------+------------------+
//! | HSPL | version | record count n   |   header: magic, u32 = 1, u64
//! +------+---------+------------------+
//! | key len u32 | value len u32 | key | value |   n times, in key order
//! ```
//!
//! A reader checks the magic and version, that every length fits in what is left of the file
//! and that exactly `n` records fill it; anything else is an
//! [`Error::Io`](crate::Error::Io) of kind `InvalidData` naming the file, never a panic or
//! an allocation larger than the file.
//!
//! ```
//! use heddle_dataflow::spill::{SpillConfig, SpillSorter};
//! let config = SpillConfig { budget_bytes: 1024, ..SpillConfig::default() };
//! let mut sorter = SpillSorter::new(config, None)?;
//! for i in 0..300u32 {
//!     sorter.push(format!("key{}", i % 7).into_bytes(), i.to_le_bytes().to_vec())?;
//! }
//! assert!(sorter.runs() > 0);
//! let groups: Vec<_> = sorter.finish()?.group_by_key().collect::<Result<_, _>>()?;
//! assert_eq!(groups.len(), 7);
//! assert_eq!(groups[0].0, b"key0");
//! assert_eq!(groups[0].1[1], 7u32.to_le_bytes()); // equal keys keep push order
//! # Ok::<(), heddle_dataflow::Error>(())
//! ```

use std::cmp::Ordering;
use std::sync::Arc;

mod buffer;
mod chunk;
mod merge;
mod run_file;
mod run_store;
mod sorted;
mod sorter;
#[cfg(test)]
mod tests;

pub use merge::{Merge, RunFormat};
pub use run_file::{Run, RunWriter};
pub use run_store::RunStore;
pub use sorted::{GroupedRecords, SortedRecords};
pub use sorter::{SpillConfig, SpillSorter};

/// A total order on keys; `None` where one is accepted means bytewise order.
///
/// It must be a total order (consistent, transitive); otherwise the output order is
/// unspecified and sorting the in-memory buffer may panic.
///
/// ```
/// use std::sync::Arc;
/// use heddle_dataflow::spill::{KeyOrder, SpillConfig, SpillSorter};
/// let longest_first: KeyOrder =
///     Arc::new(|a: &[u8], b: &[u8]| b.len().cmp(&a.len()).then(a.cmp(b)));
/// let mut sorter = SpillSorter::new(SpillConfig::default(), Some(longest_first))?;
/// for key in ["b", "ccc", "a", "dd"] {
///     sorter.push(key.into(), Vec::new())?;
/// }
/// let keys: Vec<Vec<u8>> = sorter.finish()?.map(|r| r.map(|(k, _)| k)).collect::<Result<_, _>>()?;
/// assert_eq!(keys, [&b"ccc"[..], b"dd", b"a", b"b"]);
/// # Ok::<(), heddle_dataflow::Error>(())
/// ```
pub type KeyOrder = Arc<dyn Fn(&[u8], &[u8]) -> Ordering + Send + Sync>;

/// Most runs merged at once; more are first merged in passes of this many.
pub const MERGE_WIDTH: usize = 64;
