//! `heddle bench isolation`: what running a task as an isolated process costs against a
//! thread — the start (a job of one record, whose task is forked, confined and closed)
//! and the cost per record (a job of many records through an identity task, less the
//! start) — in this process, one worker, median of `--repeat` runs taking turns.

use std::time::Instant;

use heddle_dataflow::Options;
use heddle_task::{
    Compute, Context, Edge, Isolation, Job, Plan, Produced, Resources, RoundRobin, Source,
    TaskGraph, WorkerSpec,
};

/// `heddle bench isolation` options.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchIsolationArgs {
    /// Records of the per-record runs.
    #[arg(long, default_value_t = 200_000)]
    records: u64,
    /// Runs of each kind, taking turns.
    #[arg(long, default_value_t = 7)]
    repeat: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

struct Count(u64, u64);
impl Source for Count {
    type Out = u64;
    fn next(&mut self, ctx: &mut Context<'_, u64>) -> heddle_task::Result<Produced> {
        while self.0 < self.1 && ctx.emitted() < 1024 {
            ctx.emit(self.0);
            self.0 += 1;
        }
        Ok(if self.0 == self.1 { Produced::Done } else { Produced::More })
    }
}

struct Echo;
impl Compute for Echo {
    type In = u64;
    type Out = u64;
    fn execute(&mut self, ctx: &mut Context<'_, u64>, x: u64) -> heddle_task::Result<()> {
        ctx.emit(x);
        Ok(())
    }
}

struct Sum(std::sync::Arc<std::sync::atomic::AtomicU64>);
impl Compute for Sum {
    type In = u64;
    type Out = ();
    fn execute(&mut self, _: &mut Context<'_, ()>, x: u64) -> heddle_task::Result<()> {
        self.0.fetch_add(x, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

/// Seconds of one job moving `n` records through an `isolation` echo task (checked),
/// and the echo process's start and confining seconds (0 for a thread).
fn job(
    comm: &heddle_comm::Communicator,
    n: u64,
    isolation: Isolation,
) -> Result<(f64, f64, f64), String> {
    let total = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let started = Instant::now();
    let mut g = TaskGraph::new();
    let src = g.source("count", 1, move |_| Count(0, n));
    let echo = g.isolated("echo", 1, |_| Echo);
    g.resources(&echo, Resources::new(1.0, 256 << 20).isolation(isolation));
    let t = total.clone();
    let sum = g.compute("sum", 1, move |_| Sum(t.clone()));
    g.connect(&src, &echo, Edge::direct());
    g.connect(&echo, &sum, Edge::direct());
    let workers = WorkerSpec::discover(comm).map_err(|e| e.to_string())?;
    let plan = Plan::new(&g, &workers, &RoundRobin).map_err(|e| e.to_string())?;
    let job = Job::new(comm, &g, &plan, Options::batch()).map_err(|e| e.to_string())?;
    let report = job.run().map_err(|e| e.to_string())?;
    let secs = started.elapsed().as_secs_f64();
    let usage = report.tasks.iter().find(|t| t.task == "echo[0]").and_then(|t| t.process.clone());
    let want = n * n.saturating_sub(1) / 2;
    let got = total.load(std::sync::atomic::Ordering::Relaxed);
    if got != want {
        return Err(format!("{isolation:?}: the echo's sum is {got}, not {want}"));
    }
    Ok((secs, usage.as_ref().map_or(0.0, |u| u.start_s), usage.map_or(0.0, |u| u.confine_s)))
}

/// Seconds to start this program afresh (`--version`) and see it exit.
fn fresh_process() -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let started = Instant::now();
    let out = std::process::Command::new(&exe)
        .arg("--version")
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    if !out.status.success() {
        return Err(format!("{} --version: {}", exe.display(), out.status));
    }
    Ok(started.elapsed().as_secs_f64())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub(crate) fn bench_isolation(args: &BenchIsolationArgs) -> Result<i32, String> {
    if args.repeat == 0 || args.records == 0 {
        return Err("--repeat and --records must be at least 1".into());
    }
    let comm = heddle_comm::solo(heddle_comm::CommConfig::default()).map_err(|e| e.to_string())?;
    let kinds = [Isolation::Thread, Isolation::Process];
    let mut start = [Vec::new(), Vec::new()];
    let mut many = [Vec::new(), Vec::new()];
    let (mut ready, mut confine) = (Vec::new(), Vec::new());
    for _ in 0..args.repeat {
        for (k, &iso) in kinds.iter().enumerate() {
            let (secs, ready_s, confine_s) = job(&comm, 1, iso)?;
            start[k].push(secs);
            if iso == Isolation::Process {
                ready.push(ready_s);
                confine.push(confine_s);
            }
            many[k].push(job(&comm, args.records, iso)?.0);
        }
    }
    let (ready, confine) = (median(ready), median(confine));
    let cold = median((0..args.repeat).map(|_| fresh_process()).collect::<Result<Vec<_>, _>>()?);
    let s: Vec<f64> = start.into_iter().map(median).collect();
    let m: Vec<f64> = many.into_iter().map(median).collect();
    let per_record_ns: Vec<f64> =
        (0..2).map(|k| (m[k] - s[k]).max(0.0) / args.records as f64 * 1e9).collect();
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "records": args.records,
                "repeat": args.repeat,
                "thread": {"start_ms": s[0] * 1e3, "per_record_ns": per_record_ns[0]},
                "process": {"start_ms": s[1] * 1e3, "per_record_ns": per_record_ns[1],
                            "ready_ms": ready * 1e3, "confine_ms": confine * 1e3},
                "fresh_process_ms": cold * 1e3,
            })
        );
        return Ok(0);
    }
    println!("| placement | start (job of 1 record), ms | per record, ns |");
    println!("|---|---:|---:|");
    for (k, name) in ["thread", "isolated process"].iter().enumerate() {
        println!("| {name} | {:.2} | {:.0} |", s[k] * 1e3, per_record_ns[k]);
    }
    println!(
        "process / thread: start {:.1}×, per record {:.1}× ({} records, median of {})",
        s[1] / s[0],
        per_record_ns[1] / per_record_ns[0].max(1e-9),
        args.records,
        args.repeat
    );
    println!(
        "a process is ready {:.2} ms after it is placed (median), {:.2} ms of it making its \
         groups and moving it in",
        ready * 1e3,
        confine * 1e3
    );
    println!(
        "a fresh process (this program run anew, to its exit): {:.2} ms, {:.1}× the fork",
        cold * 1e3,
        cold / ready
    );
    Ok(0)
}
