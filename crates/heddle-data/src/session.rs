//! The session: the communicator, the workers and the defaults every data set shares.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use heddle_comm::Communicator;
use heddle_dataflow::Options;
use heddle_task::{
    AbortHandle, Checkpointing, Job, Plan, Report, RoundRobin, TaskGraph, Vertex, WorkerSpec,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::Result;

pub(crate) struct Inner {
    pub(crate) comm: Communicator,
    pub(crate) workers: Vec<WorkerSpec>,
    pub(crate) parallelism: u32,
    pub(crate) opts: Options,
    /// The options of streams (a smaller receive budget than batch stages).
    pub(crate) stream_opts: Options,
    /// Executor threads per worker (`None`: heddle-task's default).
    pub(crate) threads: Option<usize>,
    pub(crate) next_id: AtomicUsize,
    /// Malformed rows skipped on this worker (when asked to skip them).
    pub(crate) skipped: Arc<AtomicU64>,
    /// Aborts the job an action of this session is running on this worker.
    pub(crate) abort: AbortHandle,
    /// Where and how often streams checkpoint (`None`: they do not).
    pub(crate) checkpoints: Option<Checkpointing>,
    /// Checkpointed streams run so far (the n-th from the second on checkpoints in a
    /// subdirectory `stream-<n>` of its own).
    pub(crate) checkpointed_runs: AtomicUsize,
}

/// Entry point of the data API on every worker: every worker runs the same program, and
/// actions (collect, count, writes ...) are collective.
///
/// ```
/// let comm = heddle_comm::solo(heddle_comm::CommConfig::default()).unwrap();
/// let s = heddle_data::Session::new(comm).unwrap();
/// let squares = s.range(0, 10).map(|x| x * x).filter(|x| x % 2 == 0);
/// assert_eq!(squares.collect().unwrap(), Some(vec![0, 4, 16, 36, 64]));
/// ```
#[derive(Clone)]
pub struct Session(pub(crate) Arc<Inner>);

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("rank", &self.0.comm.rank())
            .field("parallelism", &self.0.parallelism)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A session over `comm` (collective), with one partition per worker and batch
    /// dataflow options.
    ///
    /// ```
    /// let comm = heddle_comm::solo(heddle_comm::CommConfig::default())?; // a world of one
    /// let s = heddle_data::Session::new(comm)?;
    /// assert_eq!((s.rank(), s.partitions()), (0, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// A failed exchange of the workers' descriptions.
    pub fn new(comm: Communicator) -> Result<Session> {
        let workers = WorkerSpec::discover(&comm)?;
        let parallelism = comm.size() as u32;
        Ok(Session(Arc::new(Inner {
            comm,
            workers,
            parallelism,
            opts: Options::batch(),
            stream_opts: Options::streaming(),
            threads: None,
            next_id: AtomicUsize::new(0),
            skipped: Arc::default(),
            abort: AbortHandle::default(),
            checkpoints: crate::stream_checkpoints::from_env()?,
            checkpointed_runs: AtomicUsize::new(0),
        })))
    }

    /// Uses `partitions` partitions per data set (default: one per worker).
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let s = s.with_partitions(4)?;
    /// let sizes = s.range(0, 8).map_partitions(|part| vec![part.len()]);
    /// assert_eq!(sizes.collect()?, Some(vec![2, 2, 2, 2]));
    /// assert!(s.with_partitions(2).is_err()); // data sets exist
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] for zero.
    pub fn with_partitions(self, partitions: u32) -> Result<Session> {
        if partitions == 0 {
            return Err(crate::Error::InvalidArgument(
                "a session needs at least one partition".into(),
            ));
        }
        let inner = Arc::try_unwrap(self.0).map_err(|_| {
            crate::Error::InvalidArgument("set partitions before making data sets".into())
        })?;
        Ok(Session(Arc::new(Inner { parallelism: partitions, ..inner })))
    }

    /// Uses `opts` for the operations between stages (buffers, spill budget and
    /// directories), of data sets and of streams alike; [`Session::with_spill`] changes
    /// only where and beyond what sorted runs spill.
    ///
    /// ```
    /// let mut opts = heddle_dataflow::Options::batch();
    /// opts.spill.budget_bytes = 1 << 20; // sort runs go to disk beyond 1 MiB
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let s = s.with_options(opts)?;
    /// let sorted = s.range(0, 1000).map(|x| (999 - x, x)).sort_by_key()?;
    /// assert_eq!(sorted.collect()?.unwrap()[0], (0, 999));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] once data sets exist.
    pub fn with_options(self, opts: Options) -> Result<Session> {
        let inner = Arc::try_unwrap(self.0).map_err(|_| {
            crate::Error::InvalidArgument("set options before making data sets".into())
        })?;
        let stream_opts = Options { mode: heddle_dataflow::Mode::Streaming, ..opts.clone() };
        Ok(Session(Arc::new(Inner { opts, stream_opts, ..inner })))
    }

    /// Keeps up to `budget_bytes` of records in memory per target of an operation that
    /// holds them (keyed gather, sort, join) and spills sorted runs to `dirs` beyond it;
    /// the other options keep their defaults.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let s = s.with_spill(1 << 20, vec![std::env::temp_dir()])?;
    /// let sorted = s.range(0, 1000).map(|x| (999 - x, x)).sort_by_key()?;
    /// assert_eq!(sorted.collect()?.unwrap()[999], (999, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] once data sets exist.
    pub fn with_spill(self, budget_bytes: usize, dirs: Vec<std::path::PathBuf>) -> Result<Session> {
        let inner = Arc::try_unwrap(self.0).map_err(|_| {
            crate::Error::InvalidArgument("set the spill budget before making data sets".into())
        })?;
        let opts = inner.opts.clone().spill(budget_bytes, dirs.clone());
        let stream_opts = inner.stream_opts.clone().spill(budget_bytes, dirs);
        Ok(Session(Arc::new(Inner { opts, stream_opts, ..inner })))
    }

    /// Runs each worker's tasks on `threads` executor threads (see
    /// [`heddle_task::Job::threads`]; default 1, or `HEDDLE_TASK_THREADS`).
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let s = s.with_partitions(4)?.with_threads(2)?;
    /// assert_eq!(s.range(0, 100).count()?, 100);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] for zero, or once data sets exist.
    pub fn with_threads(self, threads: usize) -> Result<Session> {
        if threads == 0 {
            return Err(crate::Error::InvalidArgument(
                "a session needs at least one executor thread".into(),
            ));
        }
        let inner = Arc::try_unwrap(self.0).map_err(|_| {
            crate::Error::InvalidArgument("set threads before making data sets".into())
        })?;
        Ok(Session(Arc::new(Inner { threads: Some(threads), ..inner })))
    }

    /// The handle that aborts, on this worker, whatever job an action or stream run of this
    /// session is running ([`heddle_task::Error::Aborted`]; for Ctrl-C). A request stays
    /// until [`AbortHandle::reset`], failing later actions too.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let abort = s.abort_handle(); // for a Ctrl-C handler, say
    /// abort.abort("interrupted");
    /// assert!(s.range(0, 10).count().is_err());
    /// abort.reset();
    /// assert_eq!(s.range(0, 10).count()?, 10);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn abort_handle(&self) -> AbortHandle {
        self.0.abort.clone()
    }

    /// The communicator, for collectives between data-set actions.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let n = s.range(0, 10).count()?;
    /// assert_eq!(s.comm().size(), 1); // workers
    /// assert_eq!(n, 10);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn comm(&self) -> &Communicator {
        &self.0.comm
    }

    /// This worker's rank.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let all = s.range(0, 3).collect()?;
    /// assert_eq!(all.is_some(), s.rank() == 0); // collect returns on rank 0
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rank(&self) -> usize {
        self.0.comm.rank()
    }

    /// Partitions of every data set.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// assert_eq!(s.partitions(), s.comm().size() as u32); // one per worker by default
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn partitions(&self) -> u32 {
        self.0.parallelism
    }

    /// Rank 0's `value` on every worker (a broadcast side input for closures).
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let config = vec![3u64, 5];
    /// let shared: Vec<u64> = s.broadcast((s.rank() == 0).then_some(&config))?;
    /// let scaled = s.range(1, 3).map(move |x| x * shared[0]);
    /// assert_eq!(scaled.collect()?, Some(vec![3, 6]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// A failed broadcast, or `None` on rank 0.
    pub fn broadcast<T: Serialize + DeserializeOwned>(&self, value: Option<&T>) -> Result<T> {
        Ok(self.0.comm.broadcast_object(value, 0)?)
    }

    /// Malformed rows skipped so far on all workers (collective), for inputs read with
    /// skipping on.
    ///
    /// ```
    /// use heddle_data::OnMalformed;
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-skipped-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("in.jsonl"), "1\nnot json\n3\n")?;
    /// let n = s.read_json_lines::<u32>(&dir, OnMalformed::Skip)?.count()?;
    /// assert_eq!((n, s.skipped_rows()?), (2, 1));
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// A failed allreduce.
    pub fn skipped_rows(&self) -> Result<u64> {
        let mut n = [self.0.skipped.load(Ordering::Relaxed)];
        self.0.comm.allreduce(&mut n, heddle_comm::Op::Sum)?;
        Ok(n[0])
    }

    pub(crate) fn next_id(&self) -> usize {
        self.0.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Plans and runs a built graph (collective).
    pub(crate) fn run(&self, build: Build) -> Result<Report> {
        let plan = Plan::new(&build.graph, &self.0.workers, &RoundRobin)?;
        Ok(self.job(&build, &plan, self.0.opts.clone())?.run()?)
    }

    /// A job of a built graph with the session's threads (collective).
    pub(crate) fn job<'s>(&'s self, build: &Build, plan: &Plan, opts: Options) -> Result<Job<'s>> {
        let job =
            Job::new(&self.0.comm, &build.graph, plan, opts)?.abort_with(self.0.abort.clone());
        Ok(match self.0.threads {
            Some(n) => job.threads(n),
            None => job,
        })
    }

    /// The plan of a built graph, as text.
    pub(crate) fn explain(&self, build: &Build) -> Result<String> {
        Ok(Plan::new(&build.graph, &self.0.workers, &RoundRobin)?.to_string())
    }
}

/// A task graph being built from data sets, each added once however often it is used.
#[derive(Default)]
pub(crate) struct Build {
    pub(crate) graph: TaskGraph,
    built: HashMap<usize, Box<dyn Any>>,
}

impl Build {
    pub(crate) fn cached<T: Send + 'static>(&self, id: usize) -> Option<Vertex<(), T>> {
        self.built.get(&id).and_then(|b| b.downcast_ref::<Vertex<(), T>>()).copied()
    }

    pub(crate) fn remember<T: Send + 'static>(&mut self, id: usize, v: Vertex<(), T>) {
        self.built.insert(id, Box::new(v));
    }
}
