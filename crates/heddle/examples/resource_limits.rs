//! One isolated task with a resource contract: it runs as a child process of its worker,
//! confined by control groups (memory limit, CPU quota), and either allocates and touches
//! `--allocate` bytes or spins for `--spin-s` seconds. Rank 0 prints what the task's
//! process used, measured from outside it: `"peak_bytes"` (the group's peak) and
//! `"cpu_cores"` (its CPU seconds over its wall seconds), and with `--write` the rate its
//! writes past the page cache got (`"write_bytes_per_s"`). A task that goes over its
//! memory contract is killed and the job fails, naming the task, its contract and its
//! peak (exit status 1). A job refused before it starts (a contract that fits no worker,
//! or no room beside other jobs with `HEDDLE_ADMISSION=refuse`) exits with status 2.
//!
//! ```text
//! heddle run -n 1 -- target/release/examples/resource_limits --task-memory 256MiB --allocate 100MiB
//! heddle run -n 1 -- target/release/examples/resource_limits --task-memory 64MiB --allocate 200MiB
//! heddle run -n 1 -- target/release/examples/resource_limits --task-memory 64MiB --cpus 0.5 --spin-s 5
//! heddle run -n 1 -- target/release/examples/resource_limits --task-memory 64MiB --plan
//! heddle run -n 1 -- target/release/examples/resource_limits --io-bytes-per-s 8MiB --write 24MiB
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
    /// The task's I/O contract: bytes per second it may read and write on each block
    /// device (with a unit or not).
    #[arg(long, value_parser = |s: &str| parse_bytes(s))]
    io_bytes_per_s: Option<u64>,
    /// Bytes the task writes to a file past the page cache (O_DIRECT), after spinning.
    #[arg(long, value_parser = |s: &str| parse_bytes(s), default_value = "0")]
    write: u64,
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

/// Allocates and touches `allocate` bytes, spins `spin`, then writes `write` bytes — in
/// its own process; emits the bytes it touched and the nanoseconds its writing took.
struct Hog {
    allocate: u64,
    spin: Duration,
    write: u64,
}
impl Compute for Hog {
    type In = u64;
    type Out = (u64, u64);
    fn execute(&mut self, ctx: &mut Context<'_, (u64, u64)>, _: u64) -> TaskResult<()> {
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
        let wrote = write_direct(self.write).map_err(|e| heddle::task::Error::Task {
            task: ctx.info().to_string(),
            message: format!("cannot write to the temporary directory: {e}"),
        })?;
        ctx.emit((touched ^ (x & 1), wrote.as_nanos() as u64));
        Ok(())
    }
}

/// Writes `bytes` (in 1 MiB blocks) to a private file in the temporary directory past the
/// page cache (O_DIRECT, so a block device's throttle applies), removes it, and returns
/// how long the writing took.
fn write_direct(bytes: u64) -> std::io::Result<Duration> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    const BLOCK: usize = 1 << 20;
    if bytes == 0 {
        return Ok(Duration::ZERO);
    }
    let path =
        std::env::temp_dir().join(format!("heddle-resource-limits-{}.bin", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_DIRECT)
        .open(&path)?;
    // O_DIRECT wants a block-aligned buffer.
    let layout = std::alloc::Layout::from_size_align(BLOCK, 4096).expect("a valid layout");
    // SAFETY: the layout's size is not zero; the memory is freed below.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    // SAFETY: `ptr` holds BLOCK initialised (zeroed) bytes until it is freed.
    let block = unsafe { std::slice::from_raw_parts(ptr, BLOCK) };
    let started = Instant::now();
    let written = (0..bytes.div_ceil(BLOCK as u64)).try_for_each(|_| file.write_all(block));
    let took = started.elapsed();
    // SAFETY: allocated above with this layout, not used after.
    unsafe { std::alloc::dealloc(ptr, layout) };
    drop(file);
    let _ = std::fs::remove_file(&path);
    written.map(|()| took)
}

/// Keeps the nanoseconds the hog's writing took (on the worker, as a thread).
struct Keep(std::sync::Arc<std::sync::atomic::AtomicU64>);
impl Compute for Keep {
    type In = (u64, u64);
    type Out = ();
    fn execute(&mut self, _: &mut Context<'_, ()>, r: (u64, u64)) -> TaskResult<()> {
        self.0.store(r.1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        // Refused before anything started (the plan, or admission beside other jobs): 2.
        let refused =
            matches!(e.downcast_ref::<heddle::task::Error>(), Some(heddle::task::Error::Plan(_)));
        std::process::exit(if refused { 2 } else { 1 });
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
    let (allocate, write) = (args.allocate, args.write);
    let hog = g.isolated("hog", 1, move |_| Hog { allocate, spin, write });
    if args.task_memory.is_some() || args.cpus.is_some() || args.io_bytes_per_s.is_some() {
        let (cpus, memory) = (args.cpus.unwrap_or(1.0), args.task_memory.unwrap_or(0));
        let contract = Resources::new(cpus, memory)
            .io_bytes_per_s(args.io_bytes_per_s.unwrap_or(0))
            .isolation(Isolation::Process);
        g.resources(&hog, contract);
    }
    let write_ns = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let w = write_ns.clone();
    let keep = g.compute("keep", 1, move |_| Keep(w.clone()));
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
    let write_s = write_ns.load(std::sync::atomic::Ordering::Relaxed) as f64 * 1e-9;
    let written = args.write.div_ceil(1 << 20) << 20;
    let line = serde_json::json!({
        "example": "resource_limits",
        "ok": true,
        "task_memory": contract.memory,
        "allocate": args.allocate,
        "cpus": contract.cpus,
        "io_bytes_per_s": contract.io_bytes_per_s,
        "peak_bytes": usage.peak_bytes,
        "cpu_s": usage.cpu_s,
        "wall_s": usage.wall_s,
        "cpu_cores": usage.cpu_cores(),
        "written": written,
        "write_bytes_per_s": if write_s > 0.0 { written as f64 / write_s } else { 0.0 },
        "enforcement": usage.enforcement,
    });
    println!("{line}");
    Ok(())
}
