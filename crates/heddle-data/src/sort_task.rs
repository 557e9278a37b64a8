//! The receiving side of `sort_by_key`: a typed external sort. Records are held decoded
//! up to a memory budget; beyond it the held records are sorted and written to disk as a
//! run; at the end the runs (and what is still held) are merged. Output leaves a slice at
//! a time ([`Compute::drain`]), so neither the input nor the output needs to fit in memory.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;

use heddle_comm::scratch::ScratchDir;

use heddle_task::{Compute, Context, Produced, Record, Result};
use serde::de::DeserializeOwned;

use crate::Error;

/// Records emitted per `drain` call.
const SLICE: usize = 4096;
/// Runs merged at once (and so the most run files a partition has open): spilling merges
/// the newest `FAN_IN` runs of one level into a run of the next level (so each record is
/// rewritten once per level, log_FAN_IN of the runs), and the final merge first merges the
/// oldest runs while there are more than `FAN_IN`.
const FAN_IN: usize = 64;
/// Run files made by this process so far (for unique names).
static RUNS: AtomicU64 = AtomicU64::new(0);

/// Sorts its partition by key (stable: equal keys in arrival order), spilling runs beyond
/// `max_held` records to `dirs`.
pub(crate) struct ExternalSort<K, V> {
    held: Vec<(K, V)>,
    max_held: usize,
    dirs: Vec<PathBuf>,
    /// This sort's private scratch directory in each of `dirs`, made at its first run there.
    scratch: Vec<Option<Arc<ScratchDir>>>,
    runs: Vec<Run<K, V>>,
    /// Run files written so far (which spill directory is next).
    written: usize,
    out: Output<K, V>,
}

/// What `drain` hands out.
enum Output<K, V> {
    Idle,
    Memory(std::vec::IntoIter<(K, V)>),
    Merge(BinaryHeap<Head<K>>),
}

impl<K: Record + Ord, V: Record> ExternalSort<K, V> {
    /// Holds up to `max_held` records; spills to `dirs` in turn (the system temp
    /// directory if none is given).
    pub(crate) fn new(max_held: usize, dirs: Vec<PathBuf>) -> Self {
        let dirs = if dirs.is_empty() { vec![std::env::temp_dir()] } else { dirs };
        let scratch = vec![None; dirs.len()];
        ExternalSort {
            held: Vec::new(),
            max_held: max_held.max(1),
            dirs,
            scratch,
            runs: Vec::new(),
            written: 0,
            out: Output::Idle,
        }
    }

    /// Takes one record.
    fn push(&mut self, x: (K, V)) -> crate::Result<()> {
        self.held.push(x);
        if self.held.len() >= self.max_held {
            self.spill()?;
        }
        Ok(())
    }

    /// Writes `records` (sorted) as a new run.
    fn write_run(
        &mut self,
        records: impl IntoIterator<Item = crate::Result<(K, V)>>,
    ) -> crate::Result<Run<K, V>> {
        let i = self.written % self.dirs.len();
        self.written += 1;
        let dir = match &self.scratch[i] {
            Some(dir) => dir.clone(),
            None => {
                let root = &self.dirs[i];
                let dir =
                    Arc::new(ScratchDir::create(root).map_err(|source| Error::Io {
                        path: root.display().to_string(),
                        source,
                    })?);
                self.scratch[i] = Some(dir.clone());
                dir
            }
        };
        let name = format!("heddle-sort-{}.run", RUNS.fetch_add(1, AtomicOrdering::Relaxed));
        let (path, file) = dir.create_file(&name).map_err(|source| Error::Io {
            path: dir.path().join(&name).display().to_string(),
            source,
        })?;
        let io = |source| Error::Io { path: path.display().to_string(), source };
        let mut w = BufWriter::with_capacity(1 << 20, file);
        // The run file goes away with the run, whatever happens next; the scratch
        // directory with the last run.
        let mut run = Run {
            path: Some(path.clone()),
            reader: None,
            memory: None,
            left: 0,
            value: None,
            level: 0,
            _dir: Some(dir),
            _k: PhantomData,
        };
        for rec in records {
            bincode::serialize_into(&mut w, &rec?).map_err(|e| {
                Error::InvalidArgument(format!("{}: encoding a record: {e}", path.display()))
            })?;
            run.left += 1;
        }
        w.flush().map_err(io)?;
        Ok(run)
    }

    /// Merges `runs` (consecutive, oldest first) into one run of level `level`; their
    /// files are removed.
    fn merge_runs(&mut self, mut runs: Vec<Run<K, V>>, level: u32) -> crate::Result<Run<K, V>> {
        let mut heap = open(&mut runs)?;
        let mut merged =
            self.write_run(std::iter::from_fn(|| pop(&mut heap, &mut runs).transpose()))?;
        merged.level = level;
        Ok(merged)
    }

    /// Sorts what is held and writes it as a run; merges the newest [`FAN_IN`] runs while
    /// they are of one level.
    fn spill(&mut self) -> crate::Result<()> {
        let mut held = std::mem::take(&mut self.held);
        held.sort_by(|a, b| a.0.cmp(&b.0));
        let run = self.write_run(held.into_iter().map(Ok))?;
        self.runs.push(run);
        while let Some(level) = self.full_level() {
            let group = self.runs.split_off(self.runs.len() - FAN_IN);
            let merged = self.merge_runs(group, level + 1)?;
            self.runs.push(merged);
        }
        Ok(())
    }

    /// The level of the newest [`FAN_IN`] runs, if they are that many and of one level.
    fn full_level(&self) -> Option<u32> {
        let tail = self.runs.get(self.runs.len().checked_sub(FAN_IN)?..)?;
        tail.iter().all(|r| r.level == tail[0].level).then_some(tail[0].level)
    }

    /// Starts the output: sorted in memory, or merged from the runs.
    fn start(&mut self) -> crate::Result<()> {
        if self.runs.is_empty() {
            self.held.sort_by(|a, b| a.0.cmp(&b.0));
            self.out = Output::Memory(std::mem::take(&mut self.held).into_iter());
            return Ok(());
        }
        if !self.held.is_empty() {
            // The rest stays in memory, merged as the newest run.
            let mut held = std::mem::take(&mut self.held);
            held.sort_by(|a, b| a.0.cmp(&b.0));
            let left = held.len() as u64;
            self.runs.push(Run {
                path: None,
                reader: None,
                memory: Some(held.into_iter()),
                left,
                value: None,
                level: 0,
                _dir: None,
                _k: PhantomData,
            });
        }
        while self.runs.len() > FAN_IN {
            let group: Vec<Run<K, V>> = self.runs.drain(..FAN_IN).collect();
            let merged = self.merge_runs(group, 0)?;
            self.runs.insert(0, merged);
        }
        self.out = Output::Merge(open(&mut self.runs)?);
        Ok(())
    }

    /// The next record of the output, or `None` at its end (the run files are removed).
    fn next_out(&mut self) -> crate::Result<Option<(K, V)>> {
        let next = match &mut self.out {
            Output::Idle => None,
            Output::Memory(records) => records.next(),
            Output::Merge(heap) => pop(heap, &mut self.runs)?,
        };
        if next.is_none() {
            self.out = Output::Idle;
            self.runs.clear();
        }
        Ok(next)
    }
}

/// Opens `runs` for merging: the heap of their first keys.
fn open<K: DeserializeOwned + Ord, V: DeserializeOwned>(
    runs: &mut [Run<K, V>],
) -> crate::Result<BinaryHeap<Head<K>>> {
    let mut heap = BinaryHeap::with_capacity(runs.len());
    for (i, run) in runs.iter_mut().enumerate() {
        if let Some(key) = run.next()? {
            heap.push(Head { key, run: i });
        }
    }
    Ok(heap)
}

/// The least record of the merge of `runs` (equal keys: the earlier run's first).
fn pop<K: DeserializeOwned + Ord, V: DeserializeOwned>(
    heap: &mut BinaryHeap<Head<K>>,
    runs: &mut [Run<K, V>],
) -> crate::Result<Option<(K, V)>> {
    let Some(Head { key, run }) = heap.pop() else { return Ok(None) };
    let r = &mut runs[run];
    let value = r.value.take().expect("a run's head has its value");
    if let Some(k) = r.next()? {
        heap.push(Head { key: k, run });
    }
    Ok(Some((key, value)))
}

impl<K: Record + Ord, V: Record> Compute for ExternalSort<K, V> {
    type In = (K, V);
    type Out = (K, V);

    fn execute(&mut self, _: &mut Context<'_, (K, V)>, x: (K, V)) -> Result<()> {
        self.push(x).map_err(Error::into_task)
    }

    fn end_of_input(&mut self, _: &mut Context<'_, (K, V)>) -> Result<()> {
        self.start().map_err(Error::into_task)
    }

    fn drain(&mut self, ctx: &mut Context<'_, (K, V)>) -> Result<Produced> {
        for _ in 0..SLICE {
            match self.next_out().map_err(Error::into_task)? {
                Some(rec) => ctx.emit(rec),
                None => return Ok(Produced::Done),
            }
        }
        Ok(Produced::More)
    }
}

/// A sorted run, read back one record at a time: on disk (the file open only while it is
/// read, and removed on drop), or the last one still in memory.
struct Run<K, V> {
    /// The run's file (`None` for the last run of a sort, kept in memory).
    path: Option<PathBuf>,
    reader: Option<BufReader<File>>,
    /// The records of a run kept in memory.
    memory: Option<std::vec::IntoIter<(K, V)>>,
    /// Records not read yet.
    left: u64,
    /// The value of the run's current head.
    value: Option<V>,
    /// How many merges made it (0: spilled from memory).
    level: u32,
    /// The scratch directory holding the file, kept while the run is.
    _dir: Option<Arc<ScratchDir>>,
    _k: PhantomData<fn() -> K>,
}

impl<K: DeserializeOwned, V: DeserializeOwned> Run<K, V> {
    /// The next record's key (its value kept as `value`), or `None` at the end. The file
    /// is opened at the first call and closed at the end.
    fn next(&mut self) -> crate::Result<Option<K>> {
        if self.left == 0 {
            self.reader = None;
            return Ok(None);
        }
        let (k, v) = match (&mut self.memory, &self.path) {
            (Some(records), _) => records.next().expect("`left` counts the records"),
            (None, None) => return Ok(None),
            (None, Some(path)) => {
                if self.reader.is_none() {
                    // Our own run, still private (not swapped for a symlink or another's file).
                    let file = heddle_comm::private::open_owned(path, false)?;
                    self.reader = Some(BufReader::with_capacity(1 << 16, file));
                }
                let reader = self.reader.as_mut().expect("opened above");
                bincode::deserialize_from::<_, (K, V)>(reader).map_err(|e| {
                    Error::InvalidArgument(format!(
                        "{}: a spilled run is damaged ({} records short): {e}",
                        path.display(),
                        self.left
                    ))
                })?
            }
        };
        self.left -= 1;
        self.value = Some(v);
        Ok(Some(k))
    }
}

impl<K, V> Drop for Run<K, V> {
    fn drop(&mut self) {
        if let Some(path) = &self.path {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The head of a run in the merge: least key first, then the earlier run (stability).
struct Head<K> {
    key: K,
    run: usize,
}

impl<K: Ord> Ord for Head<K> {
    fn cmp(&self, other: &Self) -> Ordering {
        other.key.cmp(&self.key).then(other.run.cmp(&self.run))
    }
}

impl<K: Ord> PartialOrd for Head<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<K: Ord> PartialEq for Head<K> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<K: Ord> Eq for Head<K> {}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// A scratch directory of its own, removed at the end.
    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("heddle-sort-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// The sorted records, the most runs held while spilling, and the runs merged at the end.
    fn sorted_by(
        max_held: usize,
        records: &[(u32, u32)],
        dir: &Path,
    ) -> (Vec<(u32, u32)>, usize, usize) {
        let mut sort = ExternalSort::new(max_held, vec![dir.to_path_buf()]);
        let mut most_runs = 0;
        for &r in records {
            sort.push(r).unwrap();
            most_runs = most_runs.max(sort.runs.len());
        }
        sort.start().unwrap();
        let merged = sort.runs.len();
        let mut out = Vec::new();
        while let Some(r) = sort.next_out().unwrap() {
            out.push(r);
        }
        (out, most_runs, merged)
    }

    #[test]
    fn many_runs_are_merged_in_passes_and_the_sort_stays_stable() {
        // Keys repeat (stability shows), values number the records in arrival order.
        let records: Vec<(u32, u32)> =
            (0..20_000u32).map(|i| (i.wrapping_mul(2_654_435_761) % 997, i)).collect();
        let mut want = records.clone();
        // Stable: equal keys keep arrival order.
        want.sort_by_key(|r| r.0);
        // 20,000 runs of one record (three levels of merges), 2,858 of 7, 400 of 50, 20 of
        // 1,000, none.
        for max_held in [1, 7, 50, 1000, 100_000] {
            let dir = scratch(&format!("runs{max_held}"));
            let (got, most_runs, merged) = sorted_by(max_held, &records, &dir);
            assert_eq!(got, want, "max_held {max_held}");
            assert!(most_runs < 3 * FAN_IN, "max_held {max_held}: {most_runs} runs at once");
            assert!(merged <= FAN_IN, "max_held {max_held}: {merged} runs in the final merge");
            assert_eq!(
                std::fs::read_dir(&dir).unwrap().count(),
                0,
                "max_held {max_held}: run files left behind"
            );
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}
