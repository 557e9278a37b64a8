//! K-means with the task API: a source task per worker hands its share of the points
//! (chained, in memory) to a K-means task that keeps them across iterations; every
//! iteration each K-means task assigns its points to the nearest center and the new
//! centers come from an allreduce of the partial sums on the K-means tasks' own
//! communicator (BSP inside dataflow); instance 0 sends the centers to a sink. Rank 0
//! checks the result against a plain single-threaded Lloyd's algorithm.
//!
//! ```text
//! heddle run -n 2 -- target/release/examples/kmeans_task --generate --seed 1 --output /tmp/km
//! heddle run -n 2 -- target/release/examples/kmeans_task --input points.npy --k 16
//! ```

#[path = "common/points.rs"]
mod points;

use std::cell::RefCell;
use std::io::Write;
use std::path::PathBuf;
use std::rc::Rc;

use clap::Parser;
use heddle::comm::dataflow::{Options, TaskId};
use heddle::task::{Compute, Context, Edge, Job, Plan, Produced, Result as TaskResult, RoundRobin, Source, TaskGraph, WorkerSpec};
use heddle::Op;

#[derive(Debug, Parser)]
struct Args {
    /// Points as CSV (`x,y` lines) or .npy (float64, shape (n, 2)).
    #[arg(long, conflicts_with = "generate")]
    input: Option<PathBuf>,
    /// Generate --points points in 16 Gaussian blobs instead.
    #[arg(long)]
    generate: bool,
    /// Seed of the generated points.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Points to generate.
    #[arg(long, default_value_t = points::POINTS)]
    points: u64,
    /// Centers (the first k points start as centers).
    #[arg(long, default_value_t = points::BLOBS)]
    k: usize,
    /// Iterations.
    #[arg(long, default_value_t = 10)]
    iterations: u64,
    /// Write the final centers as CSV (`centers.csv`) here.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Print the plan.
    #[arg(long)]
    plan: bool,
}

/// Points of one block: xs then ys (structure of arrays, for vectorized distances).
#[derive(Clone, Default, serde::Serialize, serde::Deserialize)]
struct Block {
    xs: Vec<f64>,
    ys: Vec<f64>,
}

const BLOCK_POINTS: usize = 65_536;

/// Hands over its share of the points in blocks, on the first iteration only.
struct Points {
    share: Vec<[f64; 2]>,
    at: usize,
}

impl Source for Points {
    type Out = Block;

    fn next(&mut self, ctx: &mut Context<'_, Block>) -> TaskResult<Produced> {
        if ctx.iteration().first().is_some_and(|&i| i > 0) {
            return Ok(Produced::Done);
        }
        let end = (self.at + BLOCK_POINTS).min(self.share.len());
        let chunk = &self.share[self.at..end];
        ctx.emit(Block { xs: chunk.iter().map(|p| p[0]).collect(), ys: chunk.iter().map(|p| p[1]).collect() });
        self.at = end;
        if self.at == self.share.len() {
            self.at = 0;
            return Ok(Produced::Done);
        }
        Ok(Produced::More)
    }
}

/// Keeps its points; each iteration, one Lloyd step with an allreduce of partial sums.
struct KMeans {
    blocks: Vec<Block>,
    centers: Vec<[f64; 2]>,
}

/// Sums and counts of the points nearest to each center.
fn assign(blocks: &[Block], centers: &[[f64; 2]], sums: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { assign_avx2(blocks, centers, sums) };
    }
    assign_portable(blocks, centers, sums);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn assign_avx2(blocks: &[Block], centers: &[[f64; 2]], sums: &mut [f64]) {
    assign_portable(blocks, centers, sums);
}

/// Points in chunks: for each center, the distances of a chunk of points (a loop the
/// compiler vectorizes), keeping the nearest center so far per point.
#[inline(always)]
fn assign_portable(blocks: &[Block], centers: &[[f64; 2]], sums: &mut [f64]) {
    const CHUNK: usize = 256;
    let mut best = [0.0f64; CHUNK];
    let mut which = [0.0f64; CHUNK];
    for b in blocks {
        for (xs, ys) in b.xs.chunks(CHUNK).zip(b.ys.chunks(CHUNK)) {
            let n = xs.len();
            let (best, which) = (&mut best[..n], &mut which[..n]);
            best.fill(f64::INFINITY);
            for (c, center) in centers.iter().enumerate() {
                let (x0, y0, label) = (center[0], center[1], c as f64);
                for i in 0..n {
                    let (dx, dy) = (xs[i] - x0, ys[i] - y0);
                    let d = dx * dx + dy * dy;
                    let closer = d < best[i];
                    best[i] = if closer { d } else { best[i] };
                    which[i] = if closer { label } else { which[i] };
                }
            }
            for i in 0..n {
                let c = which[i] as usize * 3;
                sums[c] += xs[i];
                sums[c + 1] += ys[i];
                sums[c + 2] += 1.0;
            }
        }
    }
}

/// New centers from summed coordinates and counts (an empty center stays put).
fn update(centers: &mut [[f64; 2]], sums: &[f64]) {
    for (c, s) in centers.iter_mut().zip(sums.chunks_exact(3)) {
        if s[2] > 0.0 {
            *c = [s[0] / s[2], s[1] / s[2]];
        }
    }
}

impl Compute for KMeans {
    type In = Block;
    type Out = Vec<[f64; 2]>;

    fn execute(&mut self, _: &mut Context<'_, Vec<[f64; 2]>>, block: Block) -> TaskResult<()> {
        self.blocks.push(block);
        Ok(())
    }

    fn end_of_input(&mut self, ctx: &mut Context<'_, Vec<[f64; 2]>>) -> TaskResult<()> {
        let mut sums = vec![0.0; self.centers.len() * 3];
        assign(&self.blocks, &self.centers, &mut sums);
        ctx.comm()?.allreduce(&mut sums, Op::Sum)?;
        update(&mut self.centers, &sums);
        if ctx.index() == 0 {
            ctx.emit(self.centers.clone());
        }
        Ok(())
    }
}

/// Keeps the latest centers.
struct Centers(Rc<RefCell<Vec<[f64; 2]>>>);

impl Compute for Centers {
    type In = (TaskId, Vec<[f64; 2]>);
    type Out = ();

    fn execute(&mut self, _: &mut Context<'_, ()>, (_, centers): (TaskId, Vec<[f64; 2]>)) -> TaskResult<()> {
        *self.0.borrow_mut() = centers;
        Ok(())
    }
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let comm = heddle::init()?;
    let (rank, p) = (comm.rank() as u64, comm.size() as u64);
    // Every worker loads (or generates) just its share, before the job starts.
    let (share, first, total): (Vec<[f64; 2]>, Vec<[f64; 2]>, u64) = match (&args.input, args.generate) {
        (Some(path), _) => {
            let all = points::read(path)?;
            let n = all.len() as u64;
            let share = all[(n * rank / p) as usize..(n * (rank + 1) / p) as usize].to_vec();
            (share, all.iter().take(args.k).copied().collect(), n)
        }
        (None, true) => {
            let n = args.points;
            let share = (n * rank / p..n * (rank + 1) / p).map(|i| points::point(args.seed, i)).collect();
            (share, (0..(args.k as u64).min(n)).map(|i| points::point(args.seed, i)).collect(), n)
        }
        (None, false) => return Err("give --input FILE or --generate".into()),
    };
    if args.k == 0 || (first.len() as u64) < args.k as u64 {
        return Err(format!("--k {} needs at least that many points (there are {total})", args.k).into());
    }
    let result = Rc::new(RefCell::new(Vec::new()));
    let mut graph = TaskGraph::new();
    let share = RefCell::new(Some(share));
    let source = graph.source("points", p as u32, move |_| Points { share: share.borrow_mut().take().unwrap_or_default(), at: 0 });
    let init = first.clone();
    let kmeans = graph.compute("kmeans", p as u32, move |_| KMeans { blocks: Vec::new(), centers: init.clone() });
    let r = result.clone();
    let sink = graph.compute("centers", 1, move |_| Centers(r.clone()));
    graph.connect(&source, &kmeans, Edge::direct());
    graph.connect(&kmeans, &sink, Edge::gather());
    graph.collective(&kmeans);
    let plan = Plan::new(&graph, &WorkerSpec::discover(&comm)?, &RoundRobin)?;
    if args.plan && rank == 0 {
        print!("{plan}");
    }
    let mut job = Job::new(&comm, &graph, &plan, Options::batch())?;
    comm.barrier()?;
    job.iterate(&[args.iterations])?;
    let report = job.close()?;
    let mut job_s = [report.job_s];
    comm.allreduce(&mut job_s, Op::Max)?;

    if rank == 0 {
        let centers = result.borrow().clone();
        let want = reference(&args, &first)?;
        let err = centers.iter().zip(&want).map(|(a, b)| (a[0] - b[0]).abs().max((a[1] - b[1]).abs())).fold(0.0, f64::max);
        let ok = centers.len() == want.len() && err < 1e-6;
        if let Some(dir) = &args.output {
            std::fs::create_dir_all(dir)?;
            let mut f = std::fs::File::create(dir.join("centers.csv"))?;
            writeln!(f, "x,y")?;
            for c in &centers {
                writeln!(f, "{},{}", c[0], c[1])?;
            }
        }
        println!(
            "{{\"example\": \"kmeans_task\", \"ok\": {ok}, \"points\": {total}, \"k\": {}, \"iterations\": {}, \"max_center_error\": {err:.3e}, \"job_s\": {:.3}, \"workers\": {p}}}",
            args.k, args.iterations, job_s[0]
        );
        if !ok {
            return Err("the centers differ from a single-threaded Lloyd's algorithm".into());
        }
    }
    Ok(())
}

/// Plain Lloyd's algorithm over all points, one point at a time.
fn reference(args: &Args, first: &[[f64; 2]]) -> Result<Vec<[f64; 2]>, String> {
    let all: Vec<[f64; 2]> = match &args.input {
        Some(path) => points::read(path)?,
        None => (0..args.points).map(|i| points::point(args.seed, i)).collect(),
    };
    let mut centers = first.to_vec();
    for _ in 0..args.iterations {
        let mut sums = vec![[0.0f64; 3]; centers.len()];
        for p in &all {
            let mut best = (f64::INFINITY, 0);
            for (c, center) in centers.iter().enumerate() {
                let d = (p[0] - center[0]).powi(2) + (p[1] - center[1]).powi(2);
                if d < best.0 {
                    best = (d, c);
                }
            }
            let s = &mut sums[best.1];
            s[0] += p[0];
            s[1] += p[1];
            s[2] += 1.0;
        }
        for (c, s) in centers.iter_mut().zip(&sums) {
            if s[2] > 0.0 {
                *c = [s[0] / s[2], s[1] / s[2]];
            }
        }
    }
    Ok(centers)
}
