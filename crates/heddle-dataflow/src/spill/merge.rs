//! The k-way merge of sorted runs and a sorted in-memory remainder ([`Merge`]), for any
//! record type with a [`RunFormat`]: the one merge behind every external sort.

use std::cmp::Ordering;
use std::fmt;
use std::io;
use std::iter::FusedIterator;

use crate::{Error, Result};

use super::run_file::{Run, RunReader, RunWriter};
use super::run_store::RunStore;
use super::MERGE_WIDTH;

/// How an external sort orders its records and stores them in run files.
///
/// The byte-record [`SpillSorter`](super::SpillSorter) uses one over raw keys and values;
/// a typed sort (the data API's `sort_by_key`) uses one that compares decoded keys and
/// stores records with bincode.
///
/// ```
/// use std::cmp::Ordering;
/// use heddle_dataflow::spill::{Merge, RunFormat, RunStore, RunWriter};
///
/// /// `u32` records, ordered by value, stored as 4 little-endian key bytes.
/// #[derive(Clone)]
/// struct Numbers;
/// impl RunFormat for Numbers {
///     type Record = u32;
///     fn cmp(&self, a: &u32, b: &u32) -> Ordering {
///         a.cmp(b)
///     }
///     fn write(&mut self, r: &u32, out: &mut RunWriter) -> heddle_dataflow::Result<()> {
///         out.push(&r.to_le_bytes(), &[])
///     }
///     fn read(&mut self, key: Vec<u8>, _: Vec<u8>) -> heddle_dataflow::Result<u32> {
///         let bytes = key.try_into().map_err(|_| {
///             heddle_dataflow::Error::InvalidArgument("not a u32".into())
///         })?;
///         Ok(u32::from_le_bytes(bytes))
///     }
/// }
///
/// let mut store = RunStore::new(vec![std::env::temp_dir()])?;
/// let (a, _) = store.write_run(&mut Numbers, [1, 4, 9].map(Ok))?;
/// let (b, _) = store.write_run(&mut Numbers, [2, 3].map(Ok))?;
/// let merged = Merge::new(Numbers, vec![a, b], vec![5, 8].into_iter(), &mut store)?;
/// assert_eq!(merged.collect::<Result<Vec<_>, _>>()?, [1, 2, 3, 4, 5, 8, 9]);
/// # Ok::<(), heddle_dataflow::Error>(())
/// ```
pub trait RunFormat: Clone {
    /// What is sorted.
    type Record;
    /// The sort order; it must be total. Equal records keep their order (earlier runs
    /// first, the in-memory remainder last).
    fn cmp(&self, a: &Self::Record, b: &Self::Record) -> Ordering;
    /// Appends `record` to a run.
    ///
    /// # Errors
    ///
    /// The record cannot be encoded or written.
    fn write(&mut self, record: &Self::Record, out: &mut RunWriter) -> Result<()>;
    /// The record stored as `key` and `value`.
    ///
    /// # Errors
    ///
    /// The bytes do not decode (reported as a damaged run naming its file).
    fn read(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<Self::Record>;
}

/// Runs of a [`RunFormat`] and an in-memory remainder `M` (already sorted), merged in
/// order as they are read: equal records come out oldest run first, the remainder last.
///
/// Holds one record and one 64 KiB read buffer per run. Yields `Err` at most once, then
/// ends. Dropping it removes the run files left. See [`RunFormat`] for an example.
pub struct Merge<F: RunFormat, M> {
    format: F,
    sources: Vec<Source<M>>,
    /// A binary min-heap of each unfinished source's next record.
    heap: Vec<Head<F::Record>>,
}

/// The next record of one source of a merge.
struct Head<T> {
    record: T,
    source: usize,
}

/// One input of a merge.
enum Source<M> {
    Run(RunReader),
    Memory(M),
    Done,
}

impl<F: RunFormat, M: Iterator<Item = F::Record>> Merge<F, M> {
    /// Merges `runs` (oldest first) and `memory` (the newest records). More than
    /// [`MERGE_WIDTH`] inputs are first merged in passes of that many into new runs in
    /// `store`, so open files and merge memory stay bounded however much was spilled.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the file if a run cannot be read back, is damaged, or an
    /// intermediate run cannot be written.
    pub fn new(format: F, runs: Vec<Run>, memory: M, store: &mut RunStore) -> Result<Self> {
        Self::with_width(format, runs, memory, store, MERGE_WIDTH)
    }

    pub(super) fn with_width(
        mut format: F,
        mut runs: Vec<Run>,
        memory: M,
        store: &mut RunStore,
        width: usize,
    ) -> Result<Self> {
        let width = width.max(2);
        // The in-memory remainder takes one merge slot too.
        while runs.len() >= width {
            let mut merged = Vec::with_capacity(runs.len().div_ceil(width));
            let mut rest = runs.into_iter();
            loop {
                let chunk: Vec<Run> = rest.by_ref().take(width).collect();
                if chunk.len() <= 1 {
                    merged.extend(chunk);
                    break;
                }
                let pass = Merge::<F, std::iter::Empty<F::Record>>::start(
                    format.clone(),
                    chunk,
                    std::iter::empty(),
                )?;
                merged.push(store.write_run(&mut format, pass)?.0);
            }
            runs = merged;
        }
        Merge::start(format, runs, memory)
    }

    /// The merge of `runs` and `memory`, all at once.
    fn start(format: F, runs: Vec<Run>, memory: M) -> Result<Self> {
        let mut sources: Vec<Source<M>> = runs
            .into_iter()
            .map(|run| RunReader::open(run).map(Source::Run))
            .collect::<Result<_>>()?;
        sources.push(Source::Memory(memory));
        let mut merge = Merge { format, heap: Vec::with_capacity(sources.len()), sources };
        for source in 0..merge.sources.len() {
            match merge.read(source)? {
                Some(record) => merge.heap.push(Head { record, source }),
                None => merge.sources[source] = Source::Done,
            }
        }
        for i in (0..merge.heap.len() / 2).rev() {
            merge.sift_down(i);
        }
        Ok(merge)
    }

    /// The next record of `source`.
    fn read(&mut self, source: usize) -> Result<Option<F::Record>> {
        match &mut self.sources[source] {
            Source::Run(run) => match run.next_record()? {
                None => Ok(None),
                Some((key, value)) => self.format.read(key, value).map(Some).map_err(|e| {
                    Error::io(
                        format!("reading spill run {}", run.path().display()),
                        io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
                    )
                }),
            },
            Source::Memory(records) => Ok(records.next()),
            Source::Done => Ok(None),
        }
    }

    /// Whether `a` comes out before `b`: the lesser record, then the earlier source.
    fn before(&self, a: &Head<F::Record>, b: &Head<F::Record>) -> bool {
        match self.format.cmp(&a.record, &b.record) {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => a.source < b.source,
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        loop {
            let (left, right) = (2 * i + 1, 2 * i + 2);
            let mut least = i;
            if left < self.heap.len() && self.before(&self.heap[left], &self.heap[least]) {
                least = left;
            }
            if right < self.heap.len() && self.before(&self.heap[right], &self.heap[least]) {
                least = right;
            }
            if least == i {
                return;
            }
            self.heap.swap(i, least);
            i = least;
        }
    }

    /// The merge's order.
    pub fn format(&self) -> &F {
        &self.format
    }
}

impl<F: RunFormat, M: Iterator<Item = F::Record>> Iterator for Merge<F, M> {
    type Item = Result<F::Record>;

    fn next(&mut self) -> Option<Self::Item> {
        let source = self.heap.first()?.source;
        match self.read(source) {
            Ok(Some(record)) => {
                let out = std::mem::replace(&mut self.heap[0].record, record);
                self.sift_down(0);
                Some(Ok(out))
            }
            Ok(None) => {
                self.sources[source] = Source::Done;
                let head = self.heap.swap_remove(0);
                self.sift_down(0);
                Some(Ok(head.record))
            }
            Err(e) => {
                self.heap.clear();
                self.sources.clear();
                Some(Err(e))
            }
        }
    }
}

impl<F: RunFormat, M: Iterator<Item = F::Record>> FusedIterator for Merge<F, M> {}

impl<F: RunFormat, M> fmt::Debug for Merge<F, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let open = self.sources.iter().filter(|s| matches!(s, Source::Run(_))).count();
        f.debug_struct("Merge").field("open_runs", &open).field("heads", &self.heap.len()).finish()
    }
}
