//! Actions on data sets: collecting, counting, reducing, visiting records, caching and
//! iterating. Each compiles what the data set depends on into one task graph and runs it
//! on every worker (collective).

use std::sync::{Arc, Mutex};

use heddle_task::{Edge, Record};

use crate::dataset::DataSet;
use crate::tasks::{CollectTask, FoldTask, SinkTask};
use crate::Locked;
use crate::Result;

impl<T: Record> DataSet<T> {
    /// Computes the data set now and keeps every partition in memory, so later actions
    /// start from there (the records must fit in memory).
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let squares = s.range(0, 4).map(|x| x * x).cache()?; // computed once, here
    /// assert_eq!(squares.count()?, 4);
    /// assert_eq!(squares.reduce(|a, b| a + b)?, Some(14));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As any action.
    pub fn cache(&self) -> Result<DataSet<T>> {
        let parts: Arc<Mutex<Vec<Vec<T>>>> =
            Arc::new(Mutex::new(vec![Vec::new(); self.parallelism() as usize]));
        let keep = parts.clone();
        self.for_each_partition(move |i, records| {
            keep.locked()[i as usize] = records;
            Ok(())
        })?;
        let p = parts.clone();
        let mut cached = crate::sources::from_partitions(&self.session, "cached", move |i, _| {
            p.locked()[i as usize].clone()
        });
        cached.cached = Some(parts);
        Ok(cached)
    }

    /// Every record, in partition order, on rank 0 (`None` on the other workers).
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let s = s.with_partitions(2)?;
    /// assert_eq!(s.range(0, 4).collect()?, Some(vec![0, 1, 2, 3])); // on rank 0
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// A task or communication failure.
    pub fn collect(&self) -> Result<Option<Vec<T>>> {
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        self.run_into(Edge::gather(), 1, move |_| CollectTask(g.clone()))?;
        let records: Vec<T> = got.taken().into_iter().map(|(_, x)| x).collect();
        Ok((self.session.rank() == 0).then_some(records))
    }

    /// Every record, in partition order, on every worker.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let letters = s.from_vec(vec!['a', 'b', 'c']);
    /// assert_eq!(letters.collect_all()?, vec!['a', 'b', 'c']); // on every rank
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`DataSet::collect`].
    pub fn collect_all(&self) -> Result<Vec<T>> {
        let workers = self.session.comm().size() as u32;
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        self.run_into(Edge::gather(), workers, move |_| CollectTask(g.clone()))?;
        let records: Vec<T> = got.taken().into_iter().map(|(_, x)| x).collect();
        Ok(records)
    }

    /// Each partition folded into one value: `fold(fold(zero(), r1), r2) ...` (partitions
    /// without records give nothing unless `emit_empty`).
    pub(crate) fn fold_partitions<A: Record>(
        &self,
        zero: impl Fn() -> A + Send + Sync + 'static,
        fold: impl Fn(A, T) -> A + Send + Sync + 'static,
        emit_empty: bool,
    ) -> DataSet<A> {
        let (zero, fold): (Arc<dyn Fn() -> A + Send + Sync>, Arc<dyn Fn(A, T) -> A + Send + Sync>) =
            (Arc::new(zero), Arc::new(fold));
        self.then("fold", Edge::direct, move |_| FoldTask {
            zero: zero.clone(),
            fold: fold.clone(),
            acc: None,
            emit_empty,
        })
    }

    /// The number of records, on every worker.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// assert_eq!(s.range(0, 10).filter(|x| x % 3 == 0).count()?, 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`DataSet::collect`].
    pub fn count(&self) -> Result<u64> {
        Ok(self.fold_partitions(|| 0u64, |n, _| n + 1, true).reduce(|a, b| a + b)?.unwrap_or(0))
    }

    /// All records combined with `f` (associative, commutative), on every worker; `None`
    /// for an empty data set.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// assert_eq!(s.range(1, 5).reduce(|a, b| a * b)?, Some(24));
    /// assert_eq!(s.range(0, 0).reduce(|a, b| a + b)?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`DataSet::collect`].
    pub fn reduce(&self, f: impl Fn(T, T) -> T + Send + Sync + 'static) -> Result<Option<T>> {
        let f = Arc::new(f);
        let g = f.clone();
        // Partial results per partition (an Option, so empty partitions add nothing).
        let partials = self.fold_partitions(
            || None::<T>,
            move |acc, x| {
                Some(match acc {
                    Some(a) => g(a, x),
                    None => x,
                })
            },
            true,
        );
        let workers = self.session.comm().size() as u32;
        let got = Arc::new(Mutex::new(Vec::new()));
        let c = got.clone();
        let combine = move |a: Option<T>, b: Option<T>| match (a, b) {
            (Some(a), Some(b)) => Some(f(a, b)),
            (a, b) => a.or(b),
        };
        partials.run_into(Edge::reduce(combine), workers, move |_| CollectTask(c.clone()))?;
        let mut got = got.taken();
        Ok(got.pop().flatten())
    }

    /// Calls `f(partition, record)` for every record, where the record is.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let total = std::sync::Arc::new(AtomicU64::new(0));
    /// let t = total.clone();
    /// s.range(1, 4).for_each(move |_partition, x| {
    ///     t.fetch_add(x, Ordering::Relaxed);
    ///     Ok(())
    /// })?;
    /// assert_eq!(total.load(Ordering::Relaxed), 6);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// The first error `f` returns, or as [`DataSet::collect`].
    pub fn for_each(&self, f: impl Fn(u32, T) -> Result<()> + Send + Sync + 'static) -> Result<()> {
        let each: Arc<dyn Fn(u32, T) -> Result<()> + Send + Sync> = Arc::new(f);
        let end: Arc<dyn Fn(u32) -> Result<()> + Send + Sync> = Arc::new(|_| Ok(()));
        self.run_into(Edge::direct(), self.parallelism(), move |_| SinkTask {
            each: each.clone(),
            end: end.clone(),
        })
    }

    /// Calls `f(partition, records)` once per partition, where it is.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let s = s.with_partitions(2)?;
    /// let sizes = Arc::new(Mutex::new(Vec::new()));
    /// let out = sizes.clone();
    /// s.range(0, 5).for_each_partition(move |i, part| {
    ///     out.lock().unwrap().push((i, part.len()));
    ///     Ok(())
    /// })?;
    /// sizes.lock().unwrap().sort();
    /// assert_eq!(*sizes.lock().unwrap(), vec![(0, 2), (1, 3)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`DataSet::for_each`].
    pub fn for_each_partition(
        &self,
        f: impl Fn(u32, Vec<T>) -> Result<()> + Send + Sync + 'static,
    ) -> Result<()> {
        let held: Arc<Mutex<Vec<T>>> = Arc::default();
        let h = held.clone();
        let each: Arc<dyn Fn(u32, T) -> Result<()> + Send + Sync> = Arc::new(move |_, x| {
            h.locked().push(x);
            Ok(())
        });
        let end: Arc<dyn Fn(u32) -> Result<()> + Send + Sync> =
            Arc::new(move |i| f(i, held.taken()));
        self.run_into(Edge::direct(), self.parallelism(), move |_| SinkTask {
            each: each.clone(),
            end: end.clone(),
        })
    }

    /// Repeats `step` on the data set up to `max` times, until `done(previous, next)` says
    /// so (checked after each step, collectively: every worker must agree), caching each
    /// result. Returns the last data set and the steps taken. [`DataSet::iterate_with`]
    /// also checkpoints, so that a restarted job resumes where it was.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// // Halve every number until all are below 10.
    /// let (last, steps) = s.from_vec(vec![100u64, 40]).iterate(
    ///     20,
    ///     |d| Ok(d.map(|x| x / 2)),
    ///     |_, next| Ok(next.reduce(u64::max)?.unwrap_or(0) < 10),
    /// )?;
    /// assert_eq!((last.collect()?, steps), (Some(vec![6, 2]), 4));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As any action; `step` or `done` failing.
    pub fn iterate(
        &self,
        max: u64,
        step: impl FnMut(&DataSet<T>) -> Result<DataSet<T>>,
        done: impl FnMut(&DataSet<T>, &DataSet<T>) -> Result<bool>,
    ) -> Result<(DataSet<T>, u64)> {
        self.iterate_with(&crate::IterateOptions { max, checkpoints: None }, step, done)
    }
}
