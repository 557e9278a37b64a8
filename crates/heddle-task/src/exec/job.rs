//! A job: the task instances of a plan that run on this worker, and the loop that runs
//! them — activating each when its input, timer or outputs allow, moving records through
//! the edges, and waiting (spin, yield, then sleep) when nothing moves.

use std::any::Any;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use heddle_comm::{AbortCause, Communicator};
use heddle_dataflow::{EdgeSpec, Mode, Options, TaskId};

use super::edge_ids::job_block;
pub(crate) use super::edge_ids::BLOCK_IDS;
use super::edge_run::EdgeRun;
pub use super::handles::{AbortHandle, StopHandle};
use super::pool;
use super::task_run::{TaskRun, TaskStats};
use crate::checkpoint::{self, CheckpointStats, Checkpointing, Checkpoints};
use crate::{Error, Plan, Result, TaskGraph, TaskInfo};

/// How long the job sleeps when nothing moved and nothing else tells it how long to wait.
const IDLE_SLEEP: Duration = Duration::from_micros(100);

/// What a job did on this worker.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// Passes run (1 without iterations).
    pub passes: u64,
    /// Seconds from the first pass to the end of the last.
    pub job_s: f64,
    /// Counters of the task instances on this worker.
    pub tasks: Vec<TaskStats>,
    /// The checkpoints completed (on rank 0; empty elsewhere and without checkpoints).
    pub checkpoints: Vec<CheckpointStats>,
}

/// The task instances of a plan on this worker, and their edges.
pub struct Job<'c> {
    pub(super) comm: &'c Communicator,
    pub(super) plan: Plan,
    pub(super) tasks: Vec<Box<dyn TaskRun>>,
    pub(super) edges: Vec<Box<dyn EdgeRun>>,
    pub(super) opts: Options,
    pub(super) stop: StopHandle,
    pub(super) abort: AbortHandle,
    pub(super) prepared: bool,
    pub(super) passes: u64,
    pub(super) elapsed: Duration,
    /// First edge id of the job's block.
    pub(super) edge_block: u32,
    /// Task ids of `tasks`.
    pub(super) task_ids: Vec<TaskId>,
    /// Executor threads per worker (1: the calling thread runs everything).
    pub(super) threads: usize,
    /// Where and how often it checkpoints, if it does, and the graph's description.
    pub(super) checkpointing: Option<Checkpointing>,
    pub(super) graph: String,
    /// Edges whose operations keep state of their own (checkpoints cannot cover them).
    pub(super) stateful_edges: Vec<String>,
    pub(super) checkpoints: Option<Checkpoints>,
    /// This worker's hold on its host while the job runs (admission beside other jobs).
    pub(super) _admitted: Option<crate::ledger::Held>,
}

/// The environment variable that sets the default number of executor threads per worker.
pub const THREADS_ENV: &str = "HEDDLE_TASK_THREADS";

/// Executor threads from [`THREADS_ENV`] (1 when unset).
fn default_threads() -> Result<usize> {
    match std::env::var(THREADS_ENV) {
        Err(_) => Ok(1),
        Ok(v) => heddle_comm::settings::whole(&heddle_comm::settings::TASK_THREADS, &v)
            .map(|n| n as usize)
            .map_err(Error::Comm),
    }
}

impl std::fmt::Debug for Job<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("plan", &self.plan)
            .field("mode", &self.opts.mode)
            .field("threads", &self.threads)
            .field("passes", &self.passes)
            .finish_non_exhaustive()
    }
}

impl<'c> Job<'c> {
    /// Instantiates this worker's tasks of `plan` (collective: every worker of `comm`
    /// must call it, with the same graph and plan). `opts` sets the mode (batch: tasks
    /// end when their input ends; streaming: long-running) and the edges' buffers.
    ///
    /// # Errors
    /// [`Error::Graph`] for a plan that does not match the graph or a collective vertex
    /// with two instances on one worker; communication errors.
    pub fn new(
        comm: &'c Communicator,
        graph: &TaskGraph,
        plan: &Plan,
        opts: Options,
    ) -> Result<Job<'c>> {
        if plan.vertices.len() != graph.vertices.len() || plan.edges.len() != graph.edges.len() {
            return Err(Error::Graph("the plan was made for another graph".into()));
        }
        let me = plan.world.iter().position(|w| w.rank == comm.rank()).ok_or_else(|| {
            Error::Graph(format!("the plan has no worker of rank {}", comm.rank()))
        })?;
        // Admitted beside the other jobs on these hosts (or refused) before anything starts.
        let admitted = crate::admission::admit(comm, graph, plan, me)?;
        // Vertex communicators: a collective call on every worker, in vertex order.
        let mut vertex_comms: HashMap<usize, Communicator> = HashMap::new();
        for (v, def) in graph.vertices.iter().enumerate().filter(|(_, d)| d.collective) {
            let mine: Vec<usize> =
                (0..def.parallelism as usize).filter(|&i| plan.workers[v][i] == me).collect();
            let busiest = (0..plan.world.len())
                .map(|w| plan.workers[v].iter().filter(|&&x| x == w).count())
                .max()
                .unwrap_or(0);
            if busiest > 1 {
                return Err(Error::Graph(format!(
                    "collective vertex '{}' has {busiest} instances on one worker; a vertex \
                     communicator needs at most one per worker",
                    def.name
                )));
            }
            let color = mine.first().map(|_| v as u32);
            if let Some(sub) = comm.split(color, mine.first().map_or(0, |&i| i as i64))? {
                vertex_comms.insert(v, sub);
            }
        }
        let edge_block = job_block(comm)?;
        // Inboxes of the local compute instances.
        let local = |v: usize| -> Vec<(u32, TaskId)> {
            (0..graph.vertices[v].parallelism)
                .filter(|&i| plan.workers[v][i as usize] == me)
                .map(|i| (i, plan.first_task[v] + i))
                .collect()
        };
        // Each task's inbox and its shared handle, both typed by its input record type.
        type Inboxes = HashMap<TaskId, (Box<dyn Any>, Box<dyn Any>)>;
        let mut inboxes: Inboxes = HashMap::new();
        for v in 0..graph.vertices.len() {
            for (_, t) in local(v) {
                if let Some(pair) = graph.vertices[v].factory.inbox() {
                    inboxes.insert(t, pair);
                }
            }
        }
        // Edges, handing out the outputs of the local upstream instances.
        let mut outs: HashMap<TaskId, Vec<Box<dyn Any>>> = HashMap::new();
        let mut edges = Vec::new();
        for (e, def) in graph.edges.iter().enumerate() {
            let sources: Vec<TaskId> = local(def.from).into_iter().map(|(_, t)| t).collect();
            let targets: Vec<(TaskId, &dyn Any)> =
                local(def.to).into_iter().map(|(_, t)| (t, inboxes[&t].1.as_ref())).collect();
            let (run, outputs) =
                def.factory.instantiate(&sources, targets, plan.edges[e].chained)?;
            edges.push(run);
            for (s, output) in outputs {
                outs.entry(s).or_default().push(output);
            }
        }
        let rates =
            graph.vertices.iter().enumerate().flat_map(|(v, d)| {
                local(v).into_iter().map(|(_, t)| (t, d.resources.net_bytes_per_s))
            });
        let buckets = super::throttle::buckets(rates.collect::<Vec<_>>());
        edges.iter_mut().for_each(|e| e.throttle(&buckets));
        // Each local instance's counters, shared by the instance and its edges.
        let mut counters = HashMap::new();
        if heddle_comm::metrics::enabled() {
            heddle_comm::metrics::set_graph(super::observe::graph(graph));
            for (v, def) in graph.vertices.iter().enumerate() {
                for (i, t) in local(v) {
                    counters.insert(t, heddle_comm::metrics::task(&def.name, i, comm.rank()));
                }
            }
            for edge in &mut edges {
                edge.observe(&counters);
            }
        }
        // The local task instances.
        let mut tasks = Vec::new();
        let mut task_ids = Vec::new();
        for (v, def) in graph.vertices.iter().enumerate() {
            let inputs = graph.edges.iter().filter(|e| e.to == v).count();
            for (i, t) in local(v) {
                let info = TaskInfo {
                    name: def.name.clone(),
                    index: i,
                    parallelism: def.parallelism,
                    task: t,
                    worker: comm.rank(),
                    resources: def.resources.clone(),
                };
                let inbox = inboxes.remove(&t).map(|(typed, _)| typed);
                let outputs = outs.remove(&t).unwrap_or_default();
                let observed =
                    counters.get(&t).map(|c| super::observe::Observed::new(graph, v, c.clone()));
                let mut run = def.factory.build(
                    info,
                    inbox,
                    inputs,
                    outputs,
                    def.strategy,
                    vertex_comms.remove(&v),
                )?;
                if let Some(observed) = observed {
                    run.observe(observed);
                }
                tasks.push(run);
                task_ids.push(t);
            }
        }
        Ok(Job {
            comm,
            plan: plan.clone(),
            tasks,
            edges,
            opts,
            stop: StopHandle::default(),
            abort: AbortHandle::default(),
            prepared: false,
            passes: 0,
            elapsed: Duration::ZERO,
            edge_block,
            task_ids,
            threads: default_threads()?,
            checkpointing: None,
            graph: checkpoint::describe(graph, plan),
            stateful_edges: checkpoint::stateful_edges(graph),
            checkpoints: None,
            _admitted: admitted,
        })
    }

    /// Takes checkpoints as `config` says, and resumes from the newest complete one in
    /// its directory (a streaming job run once, [`Job::run`]): see [`crate::checkpoint`].
    pub fn checkpoint(mut self, config: Checkpointing) -> Self {
        self.checkpointing = Some(config);
        self
    }

    /// Runs this worker's task instances on `n` executor threads (at least 1): chains of
    /// chained instances are spread over them, one chain per thread, and the calling thread
    /// drives the edges. With 1 (the default, or [`THREADS_ENV`]) the calling thread runs
    /// everything.
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = n.max(1);
        self
    }

    /// A handle that ends a streaming job from another thread (or a task).
    pub fn stop_handle(&self) -> StopHandle {
        self.stop.clone()
    }

    /// Ends the job when `handle` is stopped (instead of its own handle).
    pub fn stop_with(mut self, handle: StopHandle) -> Self {
        self.stop = handle;
        self
    }

    /// Ends the job with [`Error::Aborted`] when `handle` is aborted.
    pub fn abort_with(mut self, handle: AbortHandle) -> Self {
        self.abort = handle;
        self
    }

    /// Runs the graph once: prepare, one pass, close.
    ///
    /// # Errors
    /// The first task error ([`Error::Task`]), or a communication error.
    pub fn run(mut self) -> Result<Report> {
        self.pass(&[])?;
        if self.checkpoints.is_some() {
            let finished = self.finish_checkpoints();
            if let Err(e) = &finished {
                self.abort_job(e);
            }
            finished?;
        }
        self.close()
    }

    /// Runs nested loops of passes over the graph: `counts = [outer, inner, ...]`; tasks
    /// keep their state across passes and see the counters in
    /// [`crate::Context::iteration`]. May be called again to continue.
    ///
    /// # Errors
    /// As [`Job::run`].
    pub fn iterate(&mut self, counts: &[u64]) -> Result<()> {
        if self.checkpointing.is_some() {
            return Err(Error::Graph(
                "a job with streaming checkpoints runs once (Job::run); iterations checkpoint \
                 with Job::iterate_checkpointed"
                    .into(),
            ));
        }
        if counts.contains(&0) {
            return Ok(());
        }
        let mut at = vec![0u64; counts.len()];
        loop {
            self.pass(&at)?;
            // Advance the innermost counter, carrying outward.
            let mut level = counts.len();
            loop {
                if level == 0 {
                    return Ok(());
                }
                level -= 1;
                at[level] += 1;
                if at[level] < counts[level] {
                    break;
                }
                at[level] = 0;
            }
        }
    }

    /// Runs one pass: every source produces until done (or stopped), every task runs
    /// until its inputs end, every edge delivers everything.
    ///
    /// # Errors
    /// As [`Job::run`].
    pub fn pass(&mut self, iteration: &[u64]) -> Result<()> {
        if !self.prepared {
            if let Some(config) = self.checkpointing.clone() {
                // Every worker gets the same answer or error here: nothing to abort.
                let (store, restored) = self.agree_checkpoints(&config)?;
                let started = self.start_checkpoints(&config, store, restored.as_ref());
                if let Err(e) = &started {
                    self.abort_job(e);
                }
                started?;
            }
            for t in &mut self.tasks {
                t.prepare(iteration)?;
            }
            self.prepared = true;
        }
        let started = Instant::now();
        let per_pass = (self.edges.len() as u32).max(1);
        let cycle = (BLOCK_IDS - 1) / per_pass;
        let base = self.edge_block + (self.passes as u32 % cycle) * per_pass;
        let placement = self.plan.placement();
        let mode_opts = Options { mode: self.opts.mode, ..self.opts.clone() };
        for (k, edge) in self.edges.iter_mut().enumerate() {
            let pe = &self.plan.edges[k];
            let spec = EdgeSpec::new(
                base + k as u32,
                self.plan.tasks(pe.from),
                self.plan.tasks(pe.to),
                placement.clone(),
            );
            edge.open(self.comm, spec, mode_opts.clone())?;
        }
        for t in &mut self.tasks {
            t.begin_pass(started);
        }
        let groups = if self.threads > 1 {
            pool::groups(&self.task_ids, &self.plan, self.threads)
        } else {
            Vec::new()
        };
        let result = if groups.len() > 1 {
            let ck = &mut self.checkpoints;
            pool::drive(
                &mut self.tasks,
                &groups,
                &mut self.edges,
                &self.stop,
                &self.abort,
                &self.comm.abort_handle(),
                iteration,
                &mut || ck.as_mut().map_or(Ok(false), Checkpoints::poll),
            )
        } else {
            self.drive(iteration)
        };
        if let Err(e) = &result {
            self.abort_job(e);
        }
        for t in &mut self.tasks {
            t.end_pass();
        }
        for edge in &mut self.edges {
            edge.close_pass();
        }
        self.passes += 1;
        self.elapsed += started.elapsed();
        result
    }

    /// A failure on this worker aborts the whole job (a no-op in a world of one), so no
    /// other worker finishes without this one's records.
    pub(super) fn abort_job(&self, e: &Error) {
        let rank = self.comm.world_rank(self.comm.rank());
        let cause = match e {
            // Already the job's abort; a lost peer is the launcher's to report.
            Error::Comm(heddle_comm::Error::Aborted(_) | heddle_comm::Error::PeerLost { .. }) => {
                return
            }
            Error::Comm(other) => AbortCause::new(rank, other.kind(), other.to_string()),
            Error::Task { task, message } => {
                AbortCause::new(rank, "TaskFailed", message.clone()).in_task(task.clone())
            }
            Error::Raised { task, kind, source } => {
                AbortCause::new(rank, *kind, source.to_string()).in_task(task.clone())
            }
            // Ctrl-C on this worker ([`AbortHandle`]): local, the launcher stops the job.
            Error::Aborted(_) => return,
            Error::Checkpoint { .. } => AbortCause::new(rank, "Checkpoint", e.to_string()),
            other @ (Error::Graph(_) | Error::Plan(_) | Error::Dataflow(_)) => {
                AbortCause::new(rank, "TaskError", other.to_string())
            }
        };
        self.comm.abort(cause);
    }

    fn drive(&mut self, iteration: &[u64]) -> Result<()> {
        let job_abort = self.comm.abort_handle();
        super::handles::wake_on_request(&self.stop, &self.abort, self.comm);
        let mut quiet_since = None;
        loop {
            self.abort.check()?;
            job_abort.check()?;
            let now = Instant::now();
            let mut moved = false;
            if self.stop.requested() {
                for t in &mut self.tasks {
                    t.stop();
                }
            }
            for t in &mut self.tasks {
                moved |= t.step(now, iteration)?.moved;
                // Between the steps: checkpoint messages wait one step, not a whole pass.
                moved |= self.checkpoints.as_mut().map_or(Ok(false), Checkpoints::poll)?;
            }
            for e in &mut self.edges {
                moved |= e.pump()?;
            }
            if self.tasks.iter().all(|t| t.pass_done()) && self.edges.iter().all(|e| e.is_done()) {
                return Ok(());
            }
            if moved {
                quiet_since = None;
                continue;
            }
            let wake = self.tasks.iter().filter_map(|t| t.next_wake()).min();
            match self.edges.iter_mut().find(|e| !e.is_done()) {
                // Waits a little (spin, yield, sleep), or fails after the timeout.
                Some(edge) if wake.is_none_or(|w| w > now + Duration::from_micros(200)) => {
                    edge.wait()?;
                    let quiet = now - *quiet_since.get_or_insert(now);
                    let (due, cps) = (wake.map(|w| w - now), self.checkpoints.is_some());
                    super::pool::sleep_idle(self.comm, quiet, due, cps, &self.stop, &self.abort);
                }
                _ => match wake {
                    Some(w) if w > now => {
                        std::thread::sleep((w - now).min(Duration::from_millis(5)))
                    }
                    // Sources waiting for input from outside (a socket, a growing file).
                    _ => std::thread::sleep(IDLE_SLEEP),
                },
            }
        }
    }

    /// Closes every task (once) and reports.
    ///
    /// # Errors
    /// A task's `close` failing.
    pub fn close(mut self) -> Result<Report> {
        let iteration = [];
        for t in &mut self.tasks {
            t.close(&iteration)?;
        }
        let report = Report {
            passes: self.passes,
            job_s: self.elapsed.as_secs_f64(),
            tasks: self.tasks.iter().map(|t| t.stats()).collect(),
            checkpoints: self.checkpoints.as_ref().map(Checkpoints::stats).unwrap_or_default(),
        };
        crate::expected::warn_over(&self.plan.contracts, &report);
        Ok(report)
    }

    /// The plan the job runs.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Whether the job runs in batch or streaming mode.
    pub fn mode(&self) -> Mode {
        self.opts.mode
    }
}
