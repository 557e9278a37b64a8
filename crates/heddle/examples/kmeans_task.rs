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
use std::sync::{Arc, Mutex};

use clap::Parser;
use heddle::dataflow::{Options, TaskId};
use heddle::task::{
    Compute, Context, Edge, Job, Plan, Produced, Result as TaskResult, RoundRobin, Source,
    TaskGraph, WorkerSpec,
};
use heddle::Op;

#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    data: points::PointsInput,
    /// Print the plan.
    #[arg(long)]
    plan: bool,
}

/// Points of one block.
type Block = Vec<[f64; 2]>;

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
        ctx.emit(chunk.to_vec());
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

impl Compute for KMeans {
    type In = Block;
    type Out = Vec<[f64; 2]>;

    fn execute(&mut self, _: &mut Context<'_, Vec<[f64; 2]>>, block: Block) -> TaskResult<()> {
        self.blocks.push(block);
        Ok(())
    }

    fn end_of_input(&mut self, ctx: &mut Context<'_, Vec<[f64; 2]>>) -> TaskResult<()> {
        let mut sums = vec![0.0; self.centers.len() * 3];
        for block in &self.blocks {
            points::assign(block, &self.centers, &mut sums);
        }
        ctx.comm()?.allreduce(&mut sums, Op::Sum)?;
        points::update(&mut self.centers, &sums);
        if ctx.index() == 0 {
            ctx.emit(self.centers.clone());
        }
        Ok(())
    }
}

/// Keeps the latest centers.
struct Centers(Arc<Mutex<Vec<[f64; 2]>>>);

impl Compute for Centers {
    type In = (TaskId, Vec<[f64; 2]>);
    type Out = ();

    fn execute(
        &mut self,
        _: &mut Context<'_, ()>,
        (_, centers): (TaskId, Vec<[f64; 2]>),
    ) -> TaskResult<()> {
        *self.0.lock().expect("the centers' lock") = centers;
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
    let d = &args.data;
    // Every worker loads (or generates) just its share, before the job starts.
    let (share, first, total): (Vec<[f64; 2]>, Vec<[f64; 2]>, u64) = match &d.input {
        Some(path) => {
            let all = points::read(path)?;
            let n = all.len() as u64;
            let share = all[(n * rank / p) as usize..(n * (rank + 1) / p) as usize].to_vec();
            (share, all.iter().take(d.k).copied().collect(), n)
        }
        None => {
            let n = d.points;
            let share =
                (n * rank / p..n * (rank + 1) / p).map(|i| points::point(d.seed, i)).collect();
            (share, (0..(d.k as u64).min(n)).map(|i| points::point(d.seed, i)).collect(), n)
        }
    };
    d.check(total)?;
    let result = Arc::new(Mutex::new(Vec::new()));
    let mut graph = TaskGraph::new();
    let share = RefCell::new(Some(share));
    let source = graph.source("points", p as u32, move |_| Points {
        share: share.borrow_mut().take().unwrap_or_default(),
        at: 0,
    });
    let init = first.clone();
    let kmeans = graph
        .compute("kmeans", p as u32, move |_| KMeans { blocks: Vec::new(), centers: init.clone() });
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
    job.iterate(&[d.iterations])?;
    let report = job.close()?;
    let mut job_s = [report.job_s];
    comm.allreduce(&mut job_s, Op::Max)?;

    if rank == 0 {
        let centers = result.lock().expect("the centers' lock").clone();
        let want = points::lloyd(&d.all()?, &first, d.iterations);
        let err = centers
            .iter()
            .zip(&want)
            .map(|(a, b)| (a[0] - b[0]).abs().max((a[1] - b[1]).abs()))
            .fold(0.0, f64::max);
        let ok = centers.len() == want.len() && err < 1e-6;
        d.write(&centers)?;
        println!(
            "{{\"example\": \"kmeans_task\", \"ok\": {ok}, \"points\": {total}, \"k\": {}, \
             \"iterations\": {}, \"max_center_error\": {err:.3e}, \"job_s\": {:.3}, \
             \"workers\": {p}}}",
            d.k, d.iterations, job_s[0]
        );
        if !ok {
            return Err("the centers differ from a single-threaded Lloyd's algorithm".into());
        }
    }
    Ok(())
}
