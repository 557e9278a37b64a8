//! `DataSet<T>`: a lazy, partitioned, distributed collection. Transformations describe
//! new data sets; actions compile everything they depend on into one task graph (each
//! record-wise step a task chained to the one before, shuffles as dataflow operations)
//! and run it on every worker.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use heddle_task::{Compute, Edge, Record, Strategy, Vertex};

use crate::session::{Build, Session};
use crate::tasks::{Apply, ApplyTask, CollectTask, FoldTask, Identity, PartitionTask, SinkTask};
use crate::Locked;
use crate::{Error, Result};

type Make<T> = Arc<dyn Fn(&mut Build) -> Result<Vertex<(), T>> + Send + Sync>;

/// A lazy distributed collection of `T`, in [`Session::partitions`] partitions.
pub struct DataSet<T> {
    pub(crate) session: Session,
    id: usize,
    name: String,
    make: Make<T>,
    /// The partitions, for a data set made by [`DataSet::cache`].
    cached: Option<Cached<T>>,
}

/// Cached partitions, by index. Behind a lock only because records need not be `Sync`.
type Cached<T> = Arc<Mutex<Vec<Vec<T>>>>;

impl<T> Clone for DataSet<T> {
    fn clone(&self) -> Self {
        DataSet {
            session: self.session.clone(),
            id: self.id,
            name: self.name.clone(),
            make: self.make.clone(),
            cached: self.cached.clone(),
        }
    }
}

impl<T> std::fmt::Debug for DataSet<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DataSet({}#{})", self.name, self.id)
    }
}

impl<T: Record> DataSet<T> {
    /// A data set made by `make`, which adds its vertices to a graph being built.
    pub(crate) fn new(
        session: &Session,
        name: &str,
        make: impl Fn(&mut Build, &str) -> Result<Vertex<(), T>> + Send + Sync + 'static,
    ) -> DataSet<T> {
        let id = session.next_id();
        let vertex_name = format!("{name}#{id}");
        DataSet {
            session: session.clone(),
            id,
            name: name.to_string(),
            make: Arc::new(move |b| make(b, &vertex_name)),
            cached: None,
        }
    }

    /// This data set's vertex in `b`, added (with everything it depends on) if new.
    pub(crate) fn vertex(&self, b: &mut Build) -> Result<Vertex<(), T>> {
        if let Some(v) = b.cached::<T>(self.id) {
            return Ok(v);
        }
        let v = (self.make)(b)?;
        b.remember(self.id, v);
        Ok(v)
    }

    pub(crate) fn parallelism(&self) -> u32 {
        self.session.partitions()
    }

    /// A data set computed from this one's records by the task `task`, over `edge`.
    pub(crate) fn then<C, U>(
        &self,
        name: &str,
        edge: impl Fn() -> Edge<T, C::In> + Send + Sync + 'static,
        task: impl Fn(u32) -> C + Send + Sync + 'static,
    ) -> DataSet<U>
    where
        C: Compute<Out = U>,
        C::In: Send + 'static,
        U: Record,
    {
        self.then_with(name, edge, task, Strategy::default())
    }

    /// As [`DataSet::then`], the task running with `strategy`.
    pub(crate) fn then_with<C, U>(
        &self,
        name: &str,
        edge: impl Fn() -> Edge<T, C::In> + Send + Sync + 'static,
        task: impl Fn(u32) -> C + Send + Sync + 'static,
        strategy: Strategy,
    ) -> DataSet<U>
    where
        C: Compute<Out = U>,
        C::In: Send + 'static,
        U: Record,
    {
        let parent = self.clone();
        let task = Arc::new(task);
        DataSet::new(&self.session, name, move |b, vname| {
            let from = parent.vertex(b)?;
            let t = task.clone();
            let v = b.graph.compute(vname, parent.parallelism(), move |i| t(i));
            b.graph.connect(&from, &v, edge());
            b.graph.strategy(&v, strategy);
            Ok(v.output())
        })
    }

    fn apply<U: Record>(&self, name: &str, f: Apply<T, U>) -> DataSet<U> {
        self.then(name, Edge::direct, move |_| ApplyTask(f.clone()))
    }

    /// The session the data set belongs to.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Each record through `f`.
    pub fn map<U: Record>(&self, f: impl Fn(T) -> U + Send + Sync + 'static) -> DataSet<U> {
        self.apply("map", Arc::new(move |x, out: &mut dyn FnMut(U)| out(f(x))))
    }

    /// Each record to any number of records.
    pub fn flat_map<U: Record, I: IntoIterator<Item = U>>(
        &self,
        f: impl Fn(T) -> I + Send + Sync + 'static,
    ) -> DataSet<U> {
        self.apply(
            "flat_map",
            Arc::new(move |x, out: &mut dyn FnMut(U)| {
                for u in f(x) {
                    out(u);
                }
            }),
        )
    }

    /// The records for which `keep` holds.
    pub fn filter(&self, keep: impl Fn(&T) -> bool + Send + Sync + 'static) -> DataSet<T> {
        self.apply(
            "filter",
            Arc::new(move |x, out: &mut dyn FnMut(T)| {
                if keep(&x) {
                    out(x);
                }
            }),
        )
    }

    /// `(f(record), record)` for each record.
    pub fn key_by<K: Record>(
        &self,
        f: impl Fn(&T) -> K + Send + Sync + 'static,
    ) -> DataSet<(K, T)> {
        self.apply("key_by", Arc::new(move |x, out: &mut dyn FnMut((K, T))| out((f(&x), x))))
    }

    /// Each whole partition through `f` (which sees all its records at once). A cached data
    /// set hands each partition over whole (a copy), without passing records one by one.
    pub fn map_partitions<U: Record>(
        &self,
        f: impl Fn(Vec<T>) -> Vec<U> + Send + Sync + 'static,
    ) -> DataSet<U> {
        if let Some(parts) = self.cached.clone() {
            // A cached partition goes to `f` whole, without passing record by record.
            return crate::sources::from_partitions(
                &self.session,
                "map_partitions(cached)",
                move |i, _| {
                    let part = parts.locked()[i as usize].clone();
                    f(part)
                },
            );
        }
        let f: Arc<dyn Fn(Vec<T>) -> Vec<U> + Send + Sync> = Arc::new(f);
        self.then("map_partitions", Edge::direct, move |_| PartitionTask {
            f: f.clone(),
            held: Vec::new(),
        })
    }

    /// The records of both data sets.
    pub fn union(&self, other: &DataSet<T>) -> DataSet<T> {
        let (a, b2) = (self.clone(), other.clone());
        DataSet::new(&self.session, "union", move |b, vname| {
            let (x, y) = (a.vertex(b)?, b2.vertex(b)?);
            let v = b.graph.compute(vname, a.parallelism(), |_| Identity(PhantomData));
            b.graph.connect(&x, &v, Edge::direct());
            b.graph.connect(&y, &v, Edge::direct());
            Ok(v.output())
        })
    }

    /// The same records, dealt round-robin over the partitions (evens out skew).
    pub fn repartition(&self) -> DataSet<T> {
        self.then(
            "repartition",
            || {
                let next = Arc::new(AtomicUsize::new(0));
                Edge::partition(move |_: &T| next.fetch_add(1, Ordering::Relaxed))
            },
            |_| Identity(PhantomData),
        )
    }

    /// Computes the data set now and keeps every partition in memory, so later actions
    /// start from there (the records must fit in memory).
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

    /// Prints (returns) the task graph and plan an action on this data set would run.
    ///
    /// # Errors
    /// A graph that cannot be planned.
    pub fn explain(&self) -> Result<String> {
        let mut b = Build::default();
        let v = self.vertex(&mut b)?;
        let sink =
            b.graph.compute("explain", self.parallelism(), |_| CollectTask::<T>(Arc::default()));
        b.graph.connect(&v, &sink, Edge::direct());
        self.session.explain(&b)
    }

    /// Runs the pipeline into a sink of `parallelism` instances behind `edge`.
    pub(crate) fn run_into<U: Record, C: Compute<In = U, Out = ()>>(
        &self,
        edge: Edge<T, U>,
        parallelism: u32,
        task: impl Fn(u32) -> C + Send + Sync + 'static,
    ) -> Result<()> {
        let mut b = Build::default();
        let v = self.vertex(&mut b)?;
        let sink = b.graph.compute("action", parallelism, task);
        b.graph.connect(&v, &sink, edge);
        self.session.run(b)?;
        Ok(())
    }

    /// Every record, in partition order, on rank 0 (`None` on the other workers).
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
    /// # Errors
    /// As [`DataSet::collect`].
    pub fn count(&self) -> Result<u64> {
        Ok(self.fold_partitions(|| 0u64, |n, _| n + 1, true).reduce(|a, b| a + b)?.unwrap_or(0))
    }

    /// All records combined with `f` (associative, commutative), on every worker; `None`
    /// for an empty data set.
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
    /// result. Returns the last data set and the steps taken.
    ///
    /// # Errors
    /// As any action; `step` or `done` failing.
    pub fn iterate(
        &self,
        max: u64,
        mut step: impl FnMut(&DataSet<T>) -> Result<DataSet<T>>,
        mut done: impl FnMut(&DataSet<T>, &DataSet<T>) -> Result<bool>,
    ) -> Result<(DataSet<T>, u64)> {
        let mut current = self.clone();
        for i in 0..max {
            let next = step(&current)?.cache()?;
            let mut stop = [u8::from(done(&current, &next)?)];
            self.session.comm().allreduce(&mut stop, heddle_comm::Op::Min)?;
            current = next;
            if stop[0] == 1 {
                return Ok((current, i + 1));
            }
        }
        Ok((current, max))
    }
}

/// Checks the partition count of two data sets that must line up.
pub(crate) fn same_session<A, B>(a: &DataSet<A>, b: &DataSet<B>) -> Result<()> {
    if !Arc::ptr_eq(&a.session.0, &b.session.0) {
        return Err(Error::InvalidArgument(
            "the two data sets belong to different sessions".into(),
        ));
    }
    Ok(())
}
