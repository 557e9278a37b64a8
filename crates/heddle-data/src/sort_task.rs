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

use heddle_task::{Compute, Context, Produced, Record, Result};
use serde::de::DeserializeOwned;

use crate::Error;

/// Records emitted per `drain` call.
const SLICE: usize = 4096;
/// Run files made by this process so far (for unique names).
static RUNS: AtomicU64 = AtomicU64::new(0);

/// Sorts its partition by key (stable: equal keys in arrival order), spilling runs beyond
/// `max_held` records to `dirs`.
pub(crate) struct ExternalSort<K, V> {
    held: Vec<(K, V)>,
    max_held: usize,
    dirs: Vec<PathBuf>,
    runs: Vec<Run<K, V>>,
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
        ExternalSort { held: Vec::new(), max_held: max_held.max(1), dirs, runs: Vec::new(), out: Output::Idle }
    }

    /// Sorts what is held and writes it as a run.
    fn spill(&mut self) -> crate::Result<()> {
        self.held.sort_by(|a, b| a.0.cmp(&b.0));
        let dir = &self.dirs[self.runs.len() % self.dirs.len()];
        let path = dir.join(format!("heddle-sort-{}-{}.run", std::process::id(), RUNS.fetch_add(1, AtomicOrdering::Relaxed)));
        let io = |source| Error::Io { path: path.display().to_string(), source };
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&path).map_err(io)?);
        // The run file goes away with the run, whatever happens next.
        let mut run = Run { path: path.clone(), reader: None, left: self.held.len() as u64, value: None, _k: PhantomData };
        for rec in self.held.drain(..) {
            bincode::serialize_into(&mut w, &rec).map_err(|e| Error::InvalidArgument(format!("{}: encoding a record: {e}", path.display())))?;
        }
        w.flush().map_err(io)?;
        drop(w);
        run.reader = Some(BufReader::with_capacity(1 << 16, File::open(&path).map_err(io)?));
        self.runs.push(run);
        Ok(())
    }

    /// Starts the output: sorted in memory, or merged from the runs.
    fn start(&mut self) -> crate::Result<()> {
        if self.runs.is_empty() {
            self.held.sort_by(|a, b| a.0.cmp(&b.0));
            self.out = Output::Memory(std::mem::take(&mut self.held).into_iter());
            return Ok(());
        }
        if !self.held.is_empty() {
            self.spill()?;
        }
        let mut heap = BinaryHeap::new();
        for (i, run) in self.runs.iter_mut().enumerate() {
            if let Some(key) = run.next()? {
                heap.push(Head { key, run: i });
            }
        }
        self.out = Output::Merge(heap);
        Ok(())
    }
}

impl<K: Record + Ord, V: Record> Compute for ExternalSort<K, V> {
    type In = (K, V);
    type Out = (K, V);

    fn execute(&mut self, _: &mut Context<'_, (K, V)>, x: (K, V)) -> Result<()> {
        self.held.push(x);
        if self.held.len() >= self.max_held {
            self.spill().map_err(Error::into_task)?;
        }
        Ok(())
    }

    fn end_of_input(&mut self, _: &mut Context<'_, (K, V)>) -> Result<()> {
        self.start().map_err(Error::into_task)
    }

    fn drain(&mut self, ctx: &mut Context<'_, (K, V)>) -> Result<Produced> {
        for _ in 0..SLICE {
            let next = match &mut self.out {
                Output::Idle => None,
                Output::Memory(records) => records.next(),
                Output::Merge(heap) => match heap.pop() {
                    None => None,
                    Some(Head { key, run }) => {
                        let r = &mut self.runs[run];
                        let value = r.value.take().expect("a run's head has its value");
                        if let Some(k) = r.next().map_err(Error::into_task)? {
                            heap.push(Head { key: k, run });
                        }
                        Some((key, value))
                    }
                },
            };
            match next {
                Some(rec) => ctx.emit(rec),
                None => {
                    self.out = Output::Idle;
                    self.runs.clear(); // removes the run files
                    return Ok(Produced::Done);
                }
            }
        }
        Ok(Produced::More)
    }
}

/// A sorted run on disk, read back one record at a time; the file is removed on drop.
struct Run<K, V> {
    path: PathBuf,
    reader: Option<BufReader<File>>,
    /// Records not read yet.
    left: u64,
    /// The value of the run's current head.
    value: Option<V>,
    _k: PhantomData<fn() -> K>,
}

impl<K: DeserializeOwned, V: DeserializeOwned> Run<K, V> {
    /// The next record's key (its value kept as `value`), or `None` at the end.
    fn next(&mut self) -> crate::Result<Option<K>> {
        let Some(reader) = self.reader.as_mut().filter(|_| self.left > 0) else { return Ok(None) };
        let (k, v) = bincode::deserialize_from::<_, (K, V)>(reader)
            .map_err(|e| Error::InvalidArgument(format!("{}: a spilled run is damaged ({} records short): {e}", self.path.display(), self.left)))?;
        self.left -= 1;
        self.value = Some(v);
        Ok(Some(k))
    }
}

impl<K, V> Drop for Run<K, V> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
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
