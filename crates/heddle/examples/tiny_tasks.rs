//! Trivial-task overhead: N independent tasks, each squaring its own integer; the sum of
//! the squares must equal the closed form `(N-1) N (2N-1) / 6`. What is measured is the
//! cost of a task, not of its work. Two kinds of Heddle task (`--via`):
//!
//! - `graph` (the task API): a source vertex of N instances, placed round robin on the
//!   workers; instance i emits i² once and is done; a reduce edge sums the squares into
//!   one task (on worker 0). Each instance is a full task of the executor — planned,
//!   built, prepared, run, closed — the unit Spark, Dask and Ray schedule.
//! - `ports` (CCR): each worker queues its share of N closures (i ≡ rank mod workers) on a
//!   `Dispatcher` of `--threads` threads; each closure posts i² to a port, where a
//!   multiple-item receive sums them; an allreduce adds the workers' sums.
//!
//! The clock starts after every worker has joined (start-up excluded, as for the peers)
//! and covers building, planning and running the tasks. Rank 0 prints one JSON line.
//!
//! ```text
//! heddle run -n 2 -- target/release/examples/tiny_tasks --tasks 10000 --via graph
//! heddle run -n 2 -- target/release/examples/tiny_tasks --tasks 10000 --via ports
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use heddle::dataflow::Options;
use heddle::task::ports::{Dispatcher, Port};
use heddle::task::{
    Compute, Context, Edge, Job, Plan, Produced, Result as TaskResult, RoundRobin, Source,
    TaskGraph, WorkerSpec,
};
use heddle::{Communicator, Op};

type BoxError = Box<dyn std::error::Error>;

/// The most tasks whose sum of squares fits in 64 bits (with room to spare).
const MAX_TASKS: u32 = 3_000_000;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Via {
    /// A source vertex of N instances and a reduce edge (the task API).
    Graph,
    /// N closures on CCR dispatchers, a multiple-item receive and an allreduce.
    Ports,
}

#[derive(Debug, Parser)]
struct Args {
    /// Tasks in all.
    #[arg(long, default_value_t = 10_000)]
    tasks: u32,
    /// What a task is.
    #[arg(long, value_enum, default_value_t = Via::Graph)]
    via: Via,
    /// Dispatcher threads per worker (`--via ports`).
    #[arg(long, default_value_t = 1)]
    threads: usize,
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), BoxError> {
    if !(1..=MAX_TASKS).contains(&args.tasks) {
        return Err(format!(
            "--tasks {} is not within 1..={MAX_TASKS} (the sum of the squares must fit in 64 bits)",
            args.tasks
        )
        .into());
    }
    let comm = heddle::init()?;
    comm.barrier()?;
    let start = Instant::now();
    let total = match args.via {
        Via::Graph => by_graph(&comm, args.tasks)?,
        Via::Ports => by_ports(&comm, u64::from(args.tasks), args.threads)?,
    };
    let mut job_s = [start.elapsed().as_secs_f64()];
    comm.allreduce(&mut job_s, Op::Max)?;
    if comm.rank() == 0 {
        let n = u128::from(args.tasks);
        let want = ((n - 1) * n * (2 * n - 1) / 6) as u64;
        let ok = total == want;
        let via = match args.via {
            Via::Graph => "graph",
            Via::Ports => "ports",
        };
        println!(
            "{{\"example\": \"tiny_tasks\", \"via\": \"{via}\", \"ok\": {ok}, \"tasks\": {}, \
             \"job_s\": {:.4}, \"verify_s\": 0.0, \"detail\": \"sum {total}, want {want}\", \
             \"workers\": {}}}",
            args.tasks,
            job_s[0],
            comm.size()
        );
        if !ok {
            return Err(format!("the sum of the squares is {total}, want {want}").into());
        }
    }
    Ok(())
}

/// One task of the graph: emits its index squared, once.
struct Square {
    i: u64,
}

impl Source for Square {
    type Out = u64;

    fn next(&mut self, ctx: &mut Context<'_, u64>) -> TaskResult<Produced> {
        ctx.emit(self.i * self.i);
        Ok(Produced::Done)
    }
}

/// Receives the reduced sum (one value) and keeps it for the program.
struct Total {
    sum: Arc<AtomicU64>,
}

impl Compute for Total {
    type In = u64;
    type Out = ();

    fn execute(&mut self, _: &mut Context<'_, ()>, sum: u64) -> TaskResult<()> {
        self.sum.store(sum, Ordering::Relaxed);
        Ok(())
    }
}

/// The sum, by a graph of `n` source tasks reduced into one; rank 0's answer is the sum
/// (the other ranks return 0).
fn by_graph(comm: &Communicator, n: u32) -> Result<u64, BoxError> {
    let sum = Arc::new(AtomicU64::new(0));
    let mut graph = TaskGraph::new();
    let squares = graph.source("square", n, |i| Square { i: u64::from(i) });
    let s = sum.clone();
    let total = graph.compute("total", 1, move |_| Total { sum: s.clone() });
    graph.connect(&squares, &total, Edge::reduce(|a: u64, b| a + b));
    let plan = Plan::new(&graph, &WorkerSpec::discover(comm)?, &RoundRobin)?;
    Job::new(comm, &graph, &plan, Options::batch())?.run()?;
    Ok(sum.load(Ordering::Relaxed))
}

/// The sum, by `n` closures spread over the workers' dispatchers; every rank returns it.
fn by_ports(comm: &Communicator, n: u64, threads: usize) -> Result<u64, BoxError> {
    let (rank, workers) = (comm.rank() as u64, comm.size() as u64);
    let mine: Vec<u64> = (rank..n).step_by(workers as usize).collect();
    let mut local = 0u64;
    if !mine.is_empty() {
        let dispatcher = Dispatcher::new(threads)?;
        let queue = dispatcher.queue();
        let (squares, done) = (Port::<u64>::new(), Port::<u64>::new());
        let finished = done.clone();
        // One-shot: fires once, with every square of this worker.
        queue.multiple_receive(false, mine.len(), &squares, move |all: Vec<u64>| {
            finished.post(all.iter().sum())
        });
        for i in mine {
            let out = squares.clone();
            queue.spawn(move || out.post(i * i));
        }
        local = done
            .take_timeout(Duration::from_secs(300))
            .ok_or("the tasks did not finish within 300 s")?;
    }
    let mut sum = [local];
    comm.allreduce(&mut sum, Op::Sum)?;
    Ok(sum[0])
}
