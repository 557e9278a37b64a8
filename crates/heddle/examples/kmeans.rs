//! K-means with the data API: the points are cached in memory, partitioned over the
//! workers; each iteration maps every partition to its partial sums (nearest center per
//! point) and reduces them on every worker, which updates the centers. Rank 0 checks the
//! result against a plain single-threaded Lloyd's algorithm.
//!
//! ```text
//! heddle run -n 2 -- target/release/examples/kmeans --generate --seed 1
//! heddle run -n 4 -- target/release/examples/kmeans --input points.npy --k 16 --output /tmp/km
//! heddle run -n 2 --restarts 3 -- target/release/examples/kmeans --generate \
//!     --checkpoint-dir /tmp/km-ckpt --checkpoint-every 5
//! ```
//!
//! With `--checkpoint-dir`, the centers are checkpointed every `--checkpoint-every`
//! iterations, and a restarted job resumes after the newest checkpoint; the JSON line says
//! from which iteration (`"resumed_from_iteration"`, 0 for a fresh start).

#[path = "common/points.rs"]
mod points;

use std::time::Instant;

use clap::Parser;
use heddle::data::Session;
use heddle::Op;

#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    data: points::PointsInput,
    /// Checkpoint the centers in this directory (of rank 0's) and resume from it.
    #[arg(long)]
    checkpoint_dir: Option<std::path::PathBuf>,
    /// Iterations between checkpoints.
    #[arg(long, default_value_t = 1)]
    checkpoint_every: u64,
    /// For the recovery tests: in the job's first attempt, the last rank kills itself
    /// (SIGKILL) once this many iterations are done.
    #[arg(long)]
    kill_at_iteration: Option<u64>,
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let session = Session::new(heddle::init()?)?;
    let d = &args.data;
    let all: Option<Vec<[f64; 2]>> = match &d.input {
        Some(path) => Some(points::read(path)?),
        None => None,
    };
    let (n, seed) = (all.as_ref().map_or(d.points, |a| a.len() as u64), d.seed);
    d.check(n)?;
    let first: Vec<[f64; 2]> = match &all {
        Some(a) => a[..d.k].to_vec(),
        None => (0..d.k as u64).map(|i| points::point(seed, i)).collect(),
    };
    // The points, cached where their partition is (generated there, or read from the file).
    let source = match all.clone() {
        Some(a) => session.from_vec(a),
        None => session.generate(n, move |i| points::point(seed, i)),
    };
    let pts = source.cache()?;
    session.comm().barrier()?;
    let start = Instant::now();
    let job = format!("kmeans k={} points={n} seed={seed} input={:?}", d.k, d.input);
    let checkpoints = match &args.checkpoint_dir {
        Some(dir) => Some(session.loop_checkpoints(dir, args.checkpoint_every, job)?),
        None => None,
    };
    let resumed = match &checkpoints {
        Some(c) => c.resume()?,
        None => None,
    };
    let (start_at, mut centers) = resumed.unwrap_or((0, first.clone()));
    let last_rank = session.comm().size() - 1;
    for i in start_at..d.iterations {
        let c = centers.clone();
        let sums = pts
            .map_partitions(move |part| {
                let mut sums = vec![0.0; c.len() * 3];
                points::assign(&part, &c, &mut sums);
                vec![sums]
            })
            .reduce(|a, b| a.iter().zip(&b).map(|(x, y)| x + y).collect())?
            .ok_or("no points")?;
        points::update(&mut centers, &sums);
        if let Some(c) = &checkpoints {
            c.completed(i + 1, &centers)?;
        }
        let killed = args.kill_at_iteration == Some(i + 1) && session.comm().attempt() == 0;
        if killed && session.rank() == last_rank {
            // SAFETY: kill(2) on this very process.
            unsafe { libc_kill(std::process::id() as i32, 9) };
        }
    }
    let mut job_s = [start.elapsed().as_secs_f64()];
    session.comm().allreduce(&mut job_s, Op::Max)?;
    if session.rank() == 0 {
        let want = points::lloyd(&d.all()?, &first, d.iterations);
        let err = centers
            .iter()
            .zip(&want)
            .map(|(a, b)| (a[0] - b[0]).abs().max((a[1] - b[1]).abs()))
            .fold(0.0, f64::max);
        let ok = err < 1e-6;
        d.write(&centers)?;
        println!(
            "{{\"example\": \"kmeans\", \"api\": \"data\", \"ok\": {ok}, \"points\": {n}, \
             \"k\": {}, \"iterations\": {}, \"max_center_error\": {err:.3e}, \"job_s\": {:.3}, \
             \"workers\": {}, \"resumed_from_iteration\": {start_at}}}",
            d.k,
            d.iterations,
            job_s[0],
            session.comm().size()
        );
        if !ok {
            return Err("the centers differ from a single-threaded Lloyd's algorithm".into());
        }
    }
    Ok(())
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}
