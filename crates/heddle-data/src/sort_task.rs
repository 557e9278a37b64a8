//! The receiving side of `sort_by_key`: a typed external sort on the one run writer and
//! merge of [`heddle_dataflow::spill`]. Records are held decoded up to a count; beyond it
//! the held records are sorted and written to disk as a run (key and value encoded with
//! bincode); at the end the runs and what is still held are merged, comparing decoded
//! keys. Output leaves a slice at a time ([`Compute::drain`]), so neither the input nor
//! the output needs to fit in memory.

use std::cmp::Ordering;
use std::marker::PhantomData;
use std::path::PathBuf;

use heddle_dataflow::spill::{Merge, Run, RunFormat, RunStore, RunWriter};
use heddle_task::{Compute, Context, Produced, Record, Result};

/// Records emitted per `drain` call.
const SLICE: usize = 4096;

/// Sorts its partition by key (stable: equal keys in arrival order), spilling runs beyond
/// `max_held` records to `dirs`.
pub(crate) struct ExternalSort<K: Record + Ord, V: Record> {
    held: Vec<(K, V)>,
    max_held: usize,
    dirs: Vec<PathBuf>,
    /// Where runs go, made (and its directories checked) at the first spill.
    store: Option<RunStore>,
    /// Spilled runs, oldest first.
    runs: Vec<Run>,
    format: ByKey<K, V>,
    out: Output<K, V>,
}

/// What `drain` hands out.
enum Output<K: Record + Ord, V: Record> {
    Idle,
    Memory(std::vec::IntoIter<(K, V)>),
    Merge(Merge<ByKey<K, V>, std::vec::IntoIter<(K, V)>>),
}

impl<K: Record + Ord, V: Record> ExternalSort<K, V> {
    /// Holds up to `max_held` records; spills to `dirs` in turn (the system temp
    /// directory if none is given).
    pub(crate) fn new(max_held: usize, dirs: Vec<PathBuf>) -> Self {
        let dirs = if dirs.is_empty() { vec![std::env::temp_dir()] } else { dirs };
        ExternalSort {
            held: Vec::new(),
            max_held: max_held.max(1),
            dirs,
            store: None,
            runs: Vec::new(),
            format: ByKey::default(),
            out: Output::Idle,
        }
    }

    /// The run store, made at the first call.
    fn store(&mut self) -> heddle_dataflow::Result<&mut RunStore> {
        if self.store.is_none() {
            self.store = Some(RunStore::new(self.dirs.clone())?);
        }
        Ok(self.store.as_mut().expect("made above"))
    }

    /// Takes one record.
    fn push(&mut self, x: (K, V)) -> heddle_dataflow::Result<()> {
        self.held.push(x);
        if self.held.len() >= self.max_held {
            self.spill()?;
        }
        Ok(())
    }

    /// Sorts what is held and writes it as a run.
    fn spill(&mut self) -> heddle_dataflow::Result<()> {
        let mut held = std::mem::take(&mut self.held);
        held.sort_by(|a, b| a.0.cmp(&b.0));
        let mut format = self.format.clone();
        let (run, _) = self.store()?.write_run(&mut format, held.into_iter().map(Ok))?;
        self.runs.push(run);
        Ok(())
    }

    /// Starts the output: sorted in memory, or merged from the runs.
    fn start(&mut self) -> heddle_dataflow::Result<()> {
        let mut held = std::mem::take(&mut self.held);
        held.sort_by(|a, b| a.0.cmp(&b.0));
        if self.runs.is_empty() {
            self.out = Output::Memory(held.into_iter());
            return Ok(());
        }
        let runs = std::mem::take(&mut self.runs);
        let format = self.format.clone();
        let merge = Merge::new(format, runs, held.into_iter(), self.store()?)?;
        self.out = Output::Merge(merge);
        Ok(())
    }

    /// The next record of the output, or `None` at its end (the run files are removed).
    fn next_out(&mut self) -> heddle_dataflow::Result<Option<(K, V)>> {
        let next = match &mut self.out {
            Output::Idle => None,
            Output::Memory(records) => records.next(),
            Output::Merge(merge) => merge.next().transpose()?,
        };
        if next.is_none() {
            self.out = Output::Idle;
        }
        Ok(next)
    }
}

impl<K: Record + Ord, V: Record> Compute for ExternalSort<K, V> {
    type In = (K, V);
    type Out = (K, V);

    fn execute(&mut self, _: &mut Context<'_, (K, V)>, x: (K, V)) -> Result<()> {
        Ok(self.push(x)?)
    }

    fn end_of_input(&mut self, _: &mut Context<'_, (K, V)>) -> Result<()> {
        Ok(self.start()?)
    }

    fn drain(&mut self, ctx: &mut Context<'_, (K, V)>) -> Result<Produced> {
        for _ in 0..SLICE {
            match self.next_out()? {
                Some(rec) => ctx.emit(rec),
                None => return Ok(Produced::Done),
            }
        }
        Ok(Produced::More)
    }
}

/// `(key, value)` records ordered by key, stored as the bincode of each.
struct ByKey<K, V> {
    key: Vec<u8>,
    value: Vec<u8>,
    _records: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Default for ByKey<K, V> {
    fn default() -> Self {
        ByKey { key: Vec::new(), value: Vec::new(), _records: PhantomData }
    }
}

impl<K, V> Clone for ByKey<K, V> {
    fn clone(&self) -> Self {
        ByKey::default()
    }
}

impl<K: Record + Ord, V: Record> RunFormat for ByKey<K, V> {
    type Record = (K, V);

    fn cmp(&self, a: &(K, V), b: &(K, V)) -> Ordering {
        a.0.cmp(&b.0)
    }

    fn write(&mut self, (k, v): &(K, V), out: &mut RunWriter) -> heddle_dataflow::Result<()> {
        self.key.clear();
        self.value.clear();
        bincode::serialize_into(&mut self.key, k)?;
        bincode::serialize_into(&mut self.value, v)?;
        out.push(&self.key, &self.value)
    }

    fn read(&mut self, key: Vec<u8>, value: Vec<u8>) -> heddle_dataflow::Result<(K, V)> {
        Ok((bincode::deserialize(&key)?, bincode::deserialize(&value)?))
    }
}

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

    /// The sorted records, and the runs spilled before the merge.
    fn sorted_by(max_held: usize, records: &[(u32, u32)], dir: &Path) -> (Vec<(u32, u32)>, usize) {
        let mut sort = ExternalSort::new(max_held, vec![dir.to_path_buf()]);
        for &r in records {
            sort.push(r).unwrap();
        }
        let runs = sort.runs.len();
        sort.start().unwrap();
        let mut out = Vec::new();
        while let Some(r) = sort.next_out().unwrap() {
            out.push(r);
        }
        (out, runs)
    }

    #[test]
    fn many_runs_are_merged_in_passes_and_the_sort_stays_stable() {
        // Keys repeat (stability shows), values number the records in arrival order.
        let records: Vec<(u32, u32)> =
            (0..20_000u32).map(|i| (i.wrapping_mul(2_654_435_761) % 997, i)).collect();
        let mut want = records.clone();
        // Stable: equal keys keep arrival order.
        want.sort_by_key(|r| r.0);
        // 20,000 runs of one record (three passes of merges), 2,857 of 7, 400 of 50, 20 of
        // 1,000, none.
        for (max_held, runs) in [(1, 20_000), (7, 2_857), (50, 400), (1000, 20), (100_000, 0)] {
            let dir = scratch(&format!("runs{max_held}"));
            let (got, spilled) = sorted_by(max_held, &records, &dir);
            assert_eq!(got, want, "max_held {max_held}");
            assert_eq!(spilled, runs, "max_held {max_held}");
            assert_eq!(
                std::fs::read_dir(&dir).unwrap().count(),
                0,
                "max_held {max_held}: run files left behind"
            );
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}
