//! External sorting with disk spill for batch dataflow operations.
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
//! [`ScratchDir`] (mode 0700) that the sorter makes in each spill
//! directory it uses. They are removed when the sorter or the stream owning them is dropped:
//! after success, after an error, or half-way; the scratch directory goes with its last run
//! (see [`scratch`](heddle_comm::scratch) for the exits that drop nothing).
//!
//! # Run file format
//!
//! Integers are little-endian; `write_run` and `RunReader` mirror each other field by field.
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
//! and that exactly `n` records fill it; anything else is an [`Error::Io`] of kind
//! `InvalidData` naming the file, never a panic or an allocation larger than the file.
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
use std::collections::BinaryHeap;
use std::fmt;
use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::iter::FusedIterator;
use std::path::{Path, PathBuf};
use std::sync::atomic::{self, AtomicU64};
use std::sync::Arc;

use crate::{Error, Result};
use heddle_comm::scratch::ScratchDir;

mod buffer;

use buffer::{Buffer, RECORD_OVERHEAD};

/// A total order on keys; `None` where one is accepted means bytewise order.
///
/// It must be a total order (consistent, transitive); otherwise the output order is
/// unspecified and sorting the in-memory buffer may panic.
///
/// ```
/// use std::sync::Arc;
/// use heddle_dataflow::spill::{KeyOrder, SpillConfig, SpillSorter};
/// let longest_first: KeyOrder = Arc::new(|a: &[u8], b: &[u8]| b.len().cmp(&a.len()).then(a.cmp(b)));
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

const MAGIC: [u8; 4] = *b"HSPL";
const VERSION: u32 = 1;
const HEADER_BYTES: u64 = 16;
const RECORD_HEADER_BYTES: u64 = 8;
const IO_BUFFER_BYTES: usize = 64 << 10;
const FILE_PREFIX: &str = "heddle-spill-";
static NEXT_FILE: AtomicU64 = AtomicU64::new(0);

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
/// See the [module documentation](self) for an example.
pub struct SpillSorter {
    dirs: Vec<PathBuf>,
    budget_bytes: usize,
    order: KeyOrder,
    /// `order` is plain byte order: sort by an 8-byte prefix first.
    bytewise: bool,
    buffer: Buffer,
    buffered_bytes: usize,
    runs: Vec<SpillFile>,
    /// This sorter's scratch directory in each of `dirs`, made at its first run there.
    scratch: Vec<Option<Arc<ScratchDir>>>,
    next_dir: usize,
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
        if config.dirs.is_empty() {
            return Err(Error::InvalidArgument(
                "spill configuration names no directory; list at least one in SpillConfig::dirs"
                    .into(),
            ));
        }
        for dir in &config.dirs {
            check_dir(dir)?;
        }
        Ok(SpillSorter {
            scratch: vec![None; config.dirs.len()],
            dirs: config.dirs,
            budget_bytes: config.budget_bytes,
            bytewise: order.is_none(),
            order: order.unwrap_or_else(|| Arc::new(|a: &[u8], b: &[u8]| a.cmp(b))),
            buffer: Buffer::default(),
            buffered_bytes: 0,
            runs: Vec::new(),
            next_dir: 0,
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
                "record with a {}-byte key and a {}-byte value cannot be spilled; keys and values must be under 4 GiB",
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

    fn finish_with_width(mut self, width: usize) -> Result<SortedRecords> {
        let width = width.max(2);
        let order = self.order.clone();
        let mut memory = std::mem::take(&mut self.buffer);
        memory.sort(&order, self.bytewise);
        let mut runs = std::mem::take(&mut self.runs);
        // The in-memory remainder takes one merge slot too.
        while runs.len() >= width {
            let mut merged = Vec::with_capacity(runs.len().div_ceil(width));
            let mut rest = runs.into_iter();
            loop {
                let chunk: Vec<SpillFile> = rest.by_ref().take(width).collect();
                if chunk.len() <= 1 {
                    merged.extend(chunk);
                    break;
                }
                let records = chunk.iter().map(|run| run.records).sum();
                let sources = chunk.into_iter().map(|run| RunReader::open(run).map(Source::Run));
                let stream = SortedRecords::merge(sources.collect::<Result<_>>()?, order.clone())?;
                let dir = self.take_dir()?;
                merged.push(write_run(&dir, records, stream)?.0);
            }
            runs = merged;
        }
        let mut sources = runs
            .into_iter()
            .map(|run| RunReader::open(run).map(Source::Run))
            .collect::<Result<Vec<_>>>()?;
        sources.push(Source::Memory(memory, 0));
        SortedRecords::merge(sources, order)
    }

    fn spill(&mut self) -> Result<()> {
        self.buffer.sort(&self.order, self.bytewise);
        let dir = self.take_dir()?;
        let records = self.buffer.records().map(Ok);
        let (run, bytes) = write_run(&dir, self.buffer.len() as u64, records)?;
        self.runs.push(run);
        self.spilled_bytes += bytes;
        self.buffer.clear();
        self.buffered_bytes = 0;
        Ok(())
    }

    /// The scratch directory for the next run (spill directories in turn).
    fn take_dir(&mut self) -> Result<Arc<ScratchDir>> {
        let i = self.next_dir % self.dirs.len();
        self.next_dir += 1;
        if let Some(dir) = &self.scratch[i] {
            return Ok(dir.clone());
        }
        let dir = Arc::new(ScratchDir::create(&self.dirs[i]).map_err(|e| {
            Error::io(
                format!(
                    "making a private scratch directory in spill directory {} (fix its permissions or list another in SpillConfig::dirs)",
                    self.dirs[i].display()
                ),
                e,
            )
        })?);
        self.scratch[i] = Some(dir.clone());
        Ok(dir)
    }
}

impl fmt::Debug for SpillSorter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpillSorter")
            .field("dirs", &self.dirs)
            .field("budget_bytes", &self.budget_bytes)
            .field("buffered_records", &self.buffer.len())
            .field("buffered_bytes", &self.buffered_bytes)
            .field("runs", &self.runs.len())
            .field("pushed", &self.pushed)
            .field("spilled_bytes", &self.spilled_bytes)
            .finish()
    }
}

/// The records of a [`SpillSorter`] in key order, merged from its runs as they are read.
///
/// Yields `Err` at most once, then ends. Dropping it removes the run files left.
pub struct SortedRecords {
    sources: Vec<Source>,
    heap: BinaryHeap<Head>,
    order: KeyOrder,
}

impl SortedRecords {
    fn merge(mut sources: Vec<Source>, order: KeyOrder) -> Result<SortedRecords> {
        let mut heap = BinaryHeap::with_capacity(sources.len());
        for (source, input) in sources.iter_mut().enumerate() {
            match input.next_record()? {
                Some((key, value)) => heap.push(Head { key, value, source, order: order.clone() }),
                None => *input = Source::Done,
            }
        }
        Ok(SortedRecords { sources, heap, order })
    }

    /// Groups the records by key: each key once, with all its values in push order.
    ///
    /// Keys are equal when the sorter's order says so; the first one pushed is reported.
    /// One key's values are held in memory together.
    pub fn group_by_key(self) -> GroupedRecords {
        GroupedRecords { records: self, pending: None }
    }
}

impl Iterator for SortedRecords {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut head = self.heap.pop()?;
        match self.sources[head.source].next_record() {
            Ok(Some((key, value))) => {
                let record = (
                    std::mem::replace(&mut head.key, key),
                    std::mem::replace(&mut head.value, value),
                );
                self.heap.push(head);
                Some(Ok(record))
            }
            Ok(None) => {
                self.sources[head.source] = Source::Done;
                Some(Ok((head.key, head.value)))
            }
            Err(e) => {
                self.heap.clear();
                self.sources.clear();
                Some(Err(e))
            }
        }
    }
}

impl FusedIterator for SortedRecords {}

impl fmt::Debug for SortedRecords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let open = self.sources.iter().filter(|s| matches!(s, Source::Run(_))).count();
        f.debug_struct("SortedRecords")
            .field("open_runs", &open)
            .field("heads", &self.heap.len())
            .finish()
    }
}

/// Each key of a [`SortedRecords`] once, with all its values in push order.
#[derive(Debug)]
pub struct GroupedRecords {
    records: SortedRecords,
    pending: Option<(Vec<u8>, Vec<u8>)>,
}

impl Iterator for GroupedRecords {
    type Item = Result<(Vec<u8>, Vec<Vec<u8>>)>;

    fn next(&mut self) -> Option<Self::Item> {
        let (key, first) = match self.pending.take() {
            Some(record) => record,
            None => match self.records.next()? {
                Ok(record) => record,
                Err(e) => return Some(Err(e)),
            },
        };
        let mut values = vec![first];
        loop {
            match self.records.next() {
                None => break,
                Some(Err(e)) => return Some(Err(e)),
                Some(Ok((k, v))) if (self.records.order)(&k, &key) == Ordering::Equal => {
                    values.push(v)
                }
                Some(Ok(record)) => {
                    self.pending = Some(record);
                    break;
                }
            }
        }
        Some(Ok((key, values)))
    }
}

impl FusedIterator for GroupedRecords {}

/// The smallest unread record of one merge source; the heap's greatest is the next out.
struct Head {
    key: Vec<u8>,
    value: Vec<u8>,
    source: usize,
    order: KeyOrder,
}

impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: smaller key first, then the earlier source (stability).
        (self.order)(&other.key, &self.key).then(other.source.cmp(&self.source))
    }
}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head {}

enum Source {
    Run(RunReader),
    /// The sorted in-memory buffer and the position of its next record.
    Memory(Buffer, usize),
    Done,
}

impl Source {
    fn next_record(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        match self {
            Source::Run(run) => run.next_record(),
            Source::Memory(buffer, next) => Ok(buffer.get(*next).map(|(key, value)| {
                *next += 1;
                (key.to_vec(), value.to_vec())
            })),
            Source::Done => Ok(None),
        }
    }
}

/// A run file on disk, removed when dropped (and its scratch directory with the last run).
#[derive(Debug)]
struct SpillFile {
    path: PathBuf,
    records: u64,
    _dir: Arc<ScratchDir>,
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_file(&self.path) {
            if e.kind() != io::ErrorKind::NotFound {
                tracing::warn!(path = %self.path.display(), error = %e, "could not remove spill file");
            }
        }
    }
}

/// Creates a new, uniquely named, empty private file in `dir`.
fn create_spill_file(dir: &Arc<ScratchDir>) -> io::Result<(File, SpillFile)> {
    let n = NEXT_FILE.fetch_add(1, atomic::Ordering::Relaxed);
    let (path, file) = dir.create_file(&format!("{FILE_PREFIX}{n}.run"))?;
    Ok((file, SpillFile { path, records: 0, _dir: dir.clone() }))
}

fn check_dir(dir: &Path) -> Result<()> {
    let meta = fs::metadata(dir).map_err(|e| {
        Error::io(
            format!(
                "spill directory {} is unusable (create it or list another in SpillConfig::dirs)",
                dir.display()
            ),
            e,
        )
    })?;
    if !meta.is_dir() {
        return Err(Error::InvalidArgument(format!(
            "spill directory {} is not a directory; list a directory in SpillConfig::dirs",
            dir.display()
        )));
    }
    let _probe = ScratchDir::create(dir).map_err(|e| {
        Error::io(
            format!(
                "spill directory {} is not writable (fix its permissions or list another in SpillConfig::dirs)",
                dir.display()
            ),
            e,
        )
    })?;
    Ok(())
}

/// Writes `records` (already in key order, exactly `count` of them) as a new run in `dir`;
/// returns it and the bytes written.
fn write_run<K: AsRef<[u8]>, V: AsRef<[u8]>>(
    dir: &Arc<ScratchDir>,
    count: u64,
    records: impl Iterator<Item = Result<(K, V)>>,
) -> Result<(SpillFile, u64)> {
    let (file, mut run) = create_spill_file(dir).map_err(|e| {
        Error::io(
            format!(
                "creating a spill run in {} (free space there or list another directory in SpillConfig::dirs)",
                dir.path().display()
            ),
            e,
        )
    })?;
    let failed = |e| Error::io(format!("writing spill run {}", run.path.display()), e);
    let mut out = BufWriter::with_capacity(IO_BUFFER_BYTES, file);
    let mut header = [0u8; HEADER_BYTES as usize];
    header[0..4].copy_from_slice(&MAGIC);
    header[4..8].copy_from_slice(&VERSION.to_le_bytes());
    header[8..16].copy_from_slice(&count.to_le_bytes());
    out.write_all(&header).map_err(failed)?;
    let mut written = HEADER_BYTES;
    for record in records {
        let (key, value) = record?;
        let (key, value) = (key.as_ref(), value.as_ref());
        for len in [key.len(), value.len()] {
            let len = u32::try_from(len)
                .map_err(|_| failed(io::Error::other("key or value of 4 GiB or more")))?;
            out.write_all(&len.to_le_bytes()).map_err(failed)?;
        }
        out.write_all(key).map_err(failed)?;
        out.write_all(value).map_err(failed)?;
        written += RECORD_HEADER_BYTES + key.len() as u64 + value.len() as u64;
    }
    out.into_inner().map_err(|e| failed(e.into_error()))?;
    run.records = count;
    Ok((run, written))
}

/// Reads one run file back, record by record, checking every length against the file.
struct RunReader {
    input: BufReader<File>,
    left_records: u64,
    left_bytes: u64,
    run: SpillFile,
}

impl RunReader {
    fn open(run: SpillFile) -> Result<RunReader> {
        let failed = |e| Error::io(format!("reading spill run {}", run.path.display()), e);
        // Our own run, still private (not swapped for a symlink or another's file).
        let file = heddle_comm::private::open_owned(&run.path, false)?;
        let len = file.metadata().map_err(failed)?.len();
        if len < HEADER_BYTES {
            return Err(corrupt(
                &run.path,
                format!("{len} bytes is shorter than the {HEADER_BYTES}-byte header"),
            ));
        }
        let mut input = BufReader::with_capacity(IO_BUFFER_BYTES, file);
        let mut header = [0u8; HEADER_BYTES as usize];
        input.read_exact(&mut header).map_err(failed)?;
        if header[0..4] != MAGIC {
            return Err(corrupt(&run.path, format!("bad magic {:02x?}", &header[0..4])));
        }
        let version = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        if version != VERSION {
            return Err(corrupt(&run.path, format!("version {version}, expected {VERSION}")));
        }
        let mut count = [0u8; 8];
        count.copy_from_slice(&header[8..16]);
        let count = u64::from_le_bytes(count);
        if count != run.records {
            return Err(corrupt(
                &run.path,
                format!("header says {count} records but {} were written", run.records),
            ));
        }
        Ok(RunReader { input, left_records: count, left_bytes: len - HEADER_BYTES, run })
    }

    fn next_record(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let path = &self.run.path;
        if self.left_records == 0 {
            return match self.left_bytes {
                0 => Ok(None),
                extra => Err(corrupt(path, format!("{extra} bytes follow the last record"))),
            };
        }
        let index = self.run.records - self.left_records;
        if self.left_bytes < RECORD_HEADER_BYTES {
            return Err(corrupt(
                path,
                format!("ends inside record {index} of {}", self.run.records),
            ));
        }
        let failed = |e| Error::io(format!("reading spill run {}", path.display()), e);
        let mut lens = [0u8; RECORD_HEADER_BYTES as usize];
        self.input.read_exact(&mut lens).map_err(failed)?;
        let key_len = u32::from_le_bytes([lens[0], lens[1], lens[2], lens[3]]);
        let value_len = u32::from_le_bytes([lens[4], lens[5], lens[6], lens[7]]);
        let body = u64::from(key_len) + u64::from(value_len);
        let left = self.left_bytes - RECORD_HEADER_BYTES;
        if body > left {
            return Err(corrupt(
                path,
                format!("record {index} claims {body} bytes but {left} remain"),
            ));
        }
        let mut key = vec![0; key_len as usize];
        self.input.read_exact(&mut key).map_err(failed)?;
        let mut value = vec![0; value_len as usize];
        self.input.read_exact(&mut value).map_err(failed)?;
        self.left_bytes = left - body;
        self.left_records -= 1;
        Ok(Some((key, value)))
    }
}

fn corrupt(path: &Path, detail: String) -> Error {
    Error::io(
        format!("reading spill run {}", path.display()),
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{detail}; the file is truncated or corrupt"),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory, removed with its contents on drop (also when a test fails).
    struct Scratch(PathBuf);

    impl std::ops::Deref for Scratch {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl AsRef<Path> for Scratch {
        fn as_ref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn scratch(name: &str) -> Scratch {
        use std::time::{SystemTime, UNIX_EPOCH};
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir()
            .join(format!("heddle-spill-unit-{name}-{}-{nanos}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn sorter(dir: &Path, budget_bytes: usize) -> SpillSorter {
        SpillSorter::new(SpillConfig { dirs: vec![dir.to_path_buf()], budget_bytes }, None).unwrap()
    }

    /// Pushes 40 records over 4 keys with a budget that spills every two records.
    fn filled(dir: &Path) -> SpillSorter {
        let mut s = sorter(dir, 2 * (RECORD_OVERHEAD + 2));
        for i in 0..40u8 {
            s.push(vec![b'a' + i % 4], vec![i]).unwrap();
        }
        s
    }

    fn expected() -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut all: Vec<_> = (0..40u8).map(|i| (vec![b'a' + i % 4], vec![i])).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    #[test]
    fn run_file_golden_bytes() {
        let dir = scratch("golden");
        let private = Arc::new(ScratchDir::create(&dir).unwrap());
        let (run, bytes) = write_run(&private, 1, [Ok((b"k", b"vv"))].into_iter()).unwrap();
        let want: &[u8] = &[
            b'H', b'S', b'P', b'L', 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, // header
            1, 0, 0, 0, 2, 0, 0, 0, b'k', b'v', b'v', // record
        ];
        assert_eq!(fs::read(&run.path).unwrap(), want);
        assert_eq!(bytes, want.len() as u64);
        let mut reader = RunReader::open(run).unwrap();
        assert_eq!(reader.next_record().unwrap(), Some((b"k".to_vec(), b"vv".to_vec())));
        assert_eq!(reader.next_record().unwrap(), None);
        drop((reader, private));
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
        fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn multi_pass_merge_is_stable() {
        let dir = scratch("passes");
        let s = filled(&dir);
        assert!(s.runs() >= 10, "{} runs", s.runs());
        let out: Vec<_> = s.finish_with_width(3).unwrap().collect::<Result<_>>().unwrap();
        assert_eq!(out, expected());
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
        fs::remove_dir(&dir).unwrap();
    }

    /// Every truncation of a run file and a few corruptions give an error naming the file.
    #[test]
    fn damaged_run_is_an_error_not_a_panic() {
        let dir = scratch("damaged");
        let s = filled(&dir);
        let path = s.runs[1].path.clone();
        let good = fs::read(&path).unwrap();
        let mut damaged: Vec<Vec<u8>> = (0..good.len()).map(|n| good[..n].to_vec()).collect();
        let mut huge = good.clone();
        huge[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        damaged.push(huge);
        let mut magic = good.clone();
        magic[0] = b'X';
        damaged.push(magic);
        let mut trailing = good.clone();
        trailing.push(0);
        damaged.push(trailing);
        drop(s);
        for bytes in damaged {
            let s = filled(&dir);
            fs::write(&s.runs[1].path, &bytes).unwrap();
            let err = match s.finish() {
                Err(e) => e,
                Ok(records) => {
                    records.filter_map(|r| r.err()).next().expect("damage went unnoticed")
                }
            };
            let message = err.to_string();
            assert!(
                message.contains("reading spill run") && message.contains(&*dir.to_string_lossy()),
                "{message}"
            );
            assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
        }
        assert!(path.to_string_lossy().contains(FILE_PREFIX));
        fs::remove_dir(&dir).unwrap();
    }

    /// A run damaged while being merged ends the stream with one error.
    #[test]
    fn error_ends_the_stream_and_removes_files() {
        let dir = scratch("fused");
        let mut s = sorter(&dir, 1000);
        s.push(b"a".to_vec(), vec![1]).unwrap();
        s.push(b"a".to_vec(), vec![2; 200 << 10]).unwrap(); // larger than the read buffer
        s.push(b"b".to_vec(), vec![3]).unwrap();
        assert_eq!(s.runs(), 1);
        let path = s.runs[0].path.clone();
        let mut records = s.finish().unwrap();
        fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(100).unwrap();
        let results: Vec<_> = records.by_ref().collect();
        assert_eq!(results.iter().filter(|r| r.is_err()).count(), 1);
        let err = results.last().unwrap().as_ref().unwrap_err().to_string();
        assert!(err.contains(&*path.to_string_lossy()), "{err}");
        assert!(records.next().is_none());
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
        fs::remove_dir(&dir).unwrap();
    }
}
