//! One isolated task with a resource contract: it runs as a child process of its worker,
//! confined by control groups (memory limit, CPU quota), and either allocates and touches
//! `--allocate` bytes or spins for `--spin-s` seconds. Rank 0 prints what the task's
//! process used, measured from outside it: `"peak_bytes"` (the group's peak) and
//! `"cpu_cores"` (its CPU seconds over its wall seconds). A task that goes over its
//! memory contract is killed and the job fails, naming the task, its contract and its
//! peak (exit status 1).
//!
//! ```text
//! heddle run -n 1 -- target/release/examples/resource_limits --task-memory 256MiB --allocate 100MiB
//! heddle run -n 1 -- target/release/examples/resource_limits --task-memory 64MiB --allocate 200MiB
//! heddle run -n 1 -- target/release/examples/resource_limits --task-memory 64MiB --cpus 0.5 --spin-s 5
//! heddle run -n 1 -- target/release/examples/resource_limits --task-memory 64MiB --plan
//! heddle run -n 1 --config job.toml -- target/release/examples/resource_limits --allocate 1GiB
//! ```
//!
//! (the last with the contract of `job.toml`'s `[resources]`, e.g. `memory = "64MiB"`)

use std::time::{Duration, Instant};

use clap::Parser;
use heddle::dataflow::Options;
use heddle::task::{
    parse_bytes, parse_cpus, Compute, Context, Edge, Isolation, Job, Plan, Produced, Resources,
    Result as TaskResult, RoundRobin, Source, TaskGraph, WorkerSpec,
};

type BoxError = Box<dyn std::error::Error>;

#[derive(Debug, Parser)]
struct Args {
    /// The task's memory contract (bytes, or with a unit: 200MiB, 1GiB). Without it (and
    /// without --cpus) the task has the job's default contract: a config file's
    /// [resources] (`heddle run --config`).
    #[arg(long, value_parser = |s: &str| parse_bytes(s))]
    task_memory: Option<u64>,
    /// Bytes the task allocates and touches (with a unit or not).
    #[arg(long, value_parser = |s: &str| parse_bytes(s), default_value = "0")]
    allocate: u64,
    /// The task's CPU contract in cores (0.5, 500m; default 1 with --task-memory).
    #[arg(long, value_parser = |s: &str| parse_cpus(s))]
    cpus: Option<f64>,
    /// Seconds the task spins on the CPU (after allocating).
    #[arg(long, default_value_t = 0.0)]
    spin_s: f64,
    /// Print the plan (placement, isolation and its costs) first.
    #[arg(long)]
    plan: bool,
}

/// Sends the work order once.
struct Order(bool);
impl Source for Order {
    type Out = u64;
    fn next(&mut self, ctx: &mut Context<'_, u64>) -> TaskResult<Produced> {
        if std::mem::replace(&mut self.0, true) {
            return Ok(Produced::Done);
        }
        ctx.emit(0);
        Ok(Produced::Done)
    }
}

/// Allocates and touches `allocate` bytes, then spins `spin` — in its own process.
struct Hog {
    allocate: u64,
    spin: Duration,
}
impl Compute for Hog {
    type In = u64;
    type Out = u64;
    fn execute(&mut self, ctx: &mut Context<'_, u64>, _: u64) -> TaskResult<()> {
        let mut blocks: Vec<Vec<u8>> = Vec::new();
        let mut left = self.allocate;
        while left > 0 {
            let n = left.min(8 << 20) as usize;
            let mut b = vec![0u8; n];
            for i in (0..n).step_by(4096) {
                b[i] = 1; // touch every page: resident, not only reserved
            }
            blocks.push(b);
            left -= n as u64;
        }
        let started = Instant::now();
        let mut x = 0u64;
        while started.elapsed() < self.spin {
            for i in 0..10_000u64 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
            }
        }
        let touched: u64 = blocks.iter().map(|b| b.len() as u64).sum();
        ctx.emit(touched ^ (x & 1));
        Ok(())
    }
}

/// Keeps what arrives (on the worker, as a thread).
struct Keep;
impl Compute for Keep {
    type In = u64;
    type Out = ();
    fn execute(&mut self, _: &mut Context<'_, ()>, _: u64) -> TaskResult<()> {
        Ok(())
    }
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), BoxError> {
    if !(args.spin_s.is_finite() && args.spin_s >= 0.0) {
        return Err(format!("--spin-s {}: give seconds, 0 or more", args.spin_s).into());
    }
    let comm = heddle::init()?;
    let mut g = TaskGraph::new();
    let order = g.source("order", 1, |_| Order(false));
    let spin = Duration::from_secs_f64(args.spin_s);
    let allocate = args.allocate;
    let hog = g.isolated("hog", 1, move |_| Hog { allocate, spin });
    if args.task_memory.is_some() || args.cpus.is_some() {
        let (cpus, memory) = (args.cpus.unwrap_or(1.0), args.task_memory.unwrap_or(0));
        g.resources(&hog, Resources::new(cpus, memory).isolation(Isolation::Process));
    }
    let keep = g.compute("keep", 1, |_| Keep);
    g.connect(&order, &hog, Edge::direct());
    g.connect(&hog, &keep, Edge::direct());
    let plan = Plan::new(&g, &WorkerSpec::discover(&comm)?, &RoundRobin)?;
    if args.plan && comm.rank() == 0 {
        print!("{plan}");
    }
    let report = Job::new(&comm, &g, &plan, Options::batch())?.run()?;
    let contract = &plan
        .isolated
        .first()
        .ok_or(
            "the hog task runs as a thread: give --task-memory or --cpus, or a memory in the \
         config file's [resources]",
        )?
        .1;
    let Some(usage) = report.tasks.iter().find_map(|t| t.process.clone()) else {
        if comm.rank() == 0 {
            return Err("the hog task did not run as a process on rank 0".into());
        }
        return Ok(());
    };
    println!(
        "{{\"example\": \"resource_limits\", \"ok\": true, \"task_memory\": {}, \"allocate\": {}, \
         \"cpus\": {}, \"peak_bytes\": {}, \"cpu_s\": {:.3}, \"wall_s\": {:.3}, \"cpu_cores\": {:.3}, \
         \"enforcement\": {}}}",
        contract.memory,
        args.allocate,
        contract.cpus,
        usage.peak_bytes,
        usage.cpu_s,
        usage.wall_s,
        usage.cpu_cores(),
        serde_json::to_string(&usage.enforcement)?,
    );
    Ok(())
}
