//! `DataSet<T>`: a lazy, partitioned, distributed collection. Transformations describe
//! new data sets; actions compile everything they depend on into one task graph (each
//! record-wise step a task chained to the one before, shuffles as dataflow operations)
//! and run it on every worker.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use heddle_task::{Compute, Context, Edge, Record, Strategy, Vertex};

use crate::session::{Build, Session};
use crate::tasks::{CollectTask, Identity, PartitionTask};
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
    pub(crate) cached: Option<Cached<T>>,
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
        C::In: Record,
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
        C::In: Record,
        U: Record,
    {
        let parent = self.clone();
        let task = Arc::new(task);
        DataSet::new(&self.session, name, move |b, vname| {
            let from = parent.vertex(b)?;
            let t = task.clone();
            // A thread unless its own contract asks for a process (`resources`).
            let v = b.graph.isolable(vname, parent.parallelism(), move |i| t(i));
            b.graph.connect(&from, &v, edge());
            b.graph.strategy(&v, strategy);
            Ok(v.output())
        })
    }

    /// The same records, with the stage that makes them declaring what each of its
    /// partitions asks for: cores and memory (checked against what the workers offer when
    /// the job is planned: a stage that fits nowhere fails the job naming it),
    /// `net_bytes_per_s` (its records held to that rate on the edges after it) and where
    /// it runs ([`heddle_task::Isolation`]): a record-wise stage (`map`, `filter`,
    /// `flat_map`, `map_partitions`, a keyed reduction's last step …) with a memory or I/O
    /// contract runs each partition as a child process of its worker, confined by control
    /// groups to the contract (over its memory, it is killed and the job fails naming the
    /// stage, the contract and its peak); `Isolation::Thread` keeps it a thread, unenforced.
    /// The contract belongs to the stage, so every data set made from it shares it.
    ///
    /// ```
    /// use heddle_task::{Isolation, Resources};
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let me = std::process::id();
    /// // Each partition of the map in a process of its own, held to 64 MiB.
    /// let pids = s.range(0, 4).map(|_| std::process::id()).resources(Resources::new(0.5, 64 << 20));
    /// assert!(pids.collect()?.unwrap().iter().all(|&p| p != me));
    /// let threads = s.range(0, 4).map(|_| std::process::id());
    /// let threads = threads.resources(Resources::new(0.5, 64 << 20).isolation(Isolation::Thread));
    /// assert!(threads.collect()?.unwrap().iter().all(|&p| p == me));
    /// // A petabyte fits no worker: the job is refused before it starts.
    /// let greedy = s.range(0, 4).map(|x| x + 1).resources(Resources::new(1.0, 1 << 50));
    /// let refused = greedy.collect().unwrap_err().to_string();
    /// assert!(refused.contains("does not fit") && refused.contains("map"), "{refused}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resources(&self, resources: heddle_task::Resources) -> DataSet<T> {
        let parent = self.clone();
        DataSet {
            session: self.session.clone(),
            id: self.session.next_id(),
            name: self.name.clone(),
            make: Arc::new(move |b| {
                let v = parent.vertex(b)?;
                b.graph.resources(&v, resources.clone());
                Ok(v)
            }),
            cached: None,
        }
    }

    fn apply<U: Record>(&self, name: &str, f: Apply<T, U>) -> DataSet<U> {
        self.then(name, Edge::direct, move |_| ApplyTask(f.clone()))
    }

    /// The session the data set belongs to.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let numbers = s.range(0, 3);
    /// assert_eq!(numbers.session().partitions(), s.partitions());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Each record through `f`.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let doubled = s.range(1, 4).map(|x| x * 2);
    /// assert_eq!(doubled.collect()?, Some(vec![2, 4, 6]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn map<U: Record>(&self, f: impl Fn(T) -> U + Send + Sync + 'static) -> DataSet<U> {
        self.apply("map", Arc::new(move |x, out: &mut dyn FnMut(U)| out(f(x))))
    }

    /// Each record to any number of records.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let lines = s.from_vec(vec!["a b".to_string(), "c".to_string()]);
    /// let words = lines.flat_map(|l| l.split(' ').map(String::from).collect::<Vec<_>>());
    /// assert_eq!(words.collect()?, Some(vec!["a".to_string(), "b".to_string(), "c".to_string()]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let odd = s.range(0, 6).filter(|x| x % 2 == 1);
    /// assert_eq!(odd.collect()?, Some(vec![1, 3, 5]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let words = s.from_vec(vec!["fig".to_string(), "apple".to_string()]);
    /// let by_length = words.key_by(|w| w.len());
    /// let want = vec![(3, "fig".to_string()), (5, "apple".to_string())];
    /// assert_eq!(by_length.collect()?, Some(want));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn key_by<K: Record>(
        &self,
        f: impl Fn(&T) -> K + Send + Sync + 'static,
    ) -> DataSet<(K, T)> {
        self.apply("key_by", Arc::new(move |x, out: &mut dyn FnMut((K, T))| out((f(&x), x))))
    }

    /// Each whole partition through `f` (which sees all its records at once). A cached data
    /// set hands each partition over whole (a copy), without passing records one by one.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let s = s.with_partitions(2)?; // 0 1 2 | 3 4 5
    /// let sums = s.range(0, 6).map_partitions(|part| vec![part.iter().sum::<u64>()]);
    /// assert_eq!(sums.collect()?, Some(vec![3, 12]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let both = s.range(0, 2).union(&s.range(5, 7));
    /// let mut all = both.collect()?.unwrap();
    /// all.sort();
    /// assert_eq!(all, vec![0, 1, 5, 6]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let s = s.with_partitions(3)?;
    /// let skewed = s.range(0, 9).filter(|x| *x < 3); // all in partition 0
    /// let sizes = skewed.repartition().map_partitions(|part| vec![part.len()]);
    /// assert_eq!(sizes.collect()?, Some(vec![1, 1, 1]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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

    /// Prints (returns) the task graph and plan an action on this data set would run.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let plan = s.range(0, 4).map(|x| x + 1).explain()?;
    /// assert!(plan.contains("map") && plan.contains("chained in memory"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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

/// A function from one record to any number of records.
type Apply<T, U> = Arc<dyn Fn(T, &mut dyn FnMut(U)) + Send + Sync>;

/// Applies a record-wise function (map, flat_map, filter, key_by).
struct ApplyTask<T, U>(Apply<T, U>);

impl<T: Send + 'static, U: Send + 'static> Compute for ApplyTask<T, U> {
    type In = T;
    type Out = U;

    fn execute(&mut self, ctx: &mut Context<'_, U>, x: T) -> heddle_task::Result<()> {
        (self.0)(x, &mut |u| ctx.emit(u));
        Ok(())
    }
}
