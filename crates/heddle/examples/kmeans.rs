//! K-means with the data API: the points are cached in memory, partitioned over the
//! workers; each iteration maps every partition to its partial sums (nearest center per
//! point) and reduces them on every worker, which updates the centers. Rank 0 checks the
//! result against a plain single-threaded Lloyd's algorithm.
//!
//! ```text
//! heddle run -n 2 -- target/release/examples/kmeans --generate --seed 1
//! heddle run -n 4 -- target/release/examples/kmeans --input points.npy --k 16 --output /tmp/km
//! ```

#[path = "common/points.rs"]
mod points;

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use heddle::data::Session;
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
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let session = Session::new(heddle::init()?)?;
    let all: Option<Vec<[f64; 2]>> = match (&args.input, args.generate) {
        (Some(path), _) => Some(points::read(path)?),
        (None, true) => None,
        (None, false) => return Err("give --input FILE or --generate".into()),
    };
    let (n, seed) = (all.as_ref().map_or(args.points, |a| a.len() as u64), args.seed);
    if args.k == 0 || n < args.k as u64 {
        return Err(format!("--k {} needs at least that many points (there are {n})", args.k).into());
    }
    let first: Vec<[f64; 2]> = match &all {
        Some(a) => a[..args.k].to_vec(),
        None => (0..args.k as u64).map(|i| points::point(seed, i)).collect(),
    };
    // The points, cached where their partition is (generated there, or read from the file).
    let source = match all.clone() {
        Some(a) => session.from_vec(a),
        None => session.generate(n, move |i| points::point(seed, i)),
    };
    let pts = source.cache()?;
    session.comm().barrier()?;
    let start = Instant::now();
    let mut centers = first.clone();
    for _ in 0..args.iterations {
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
    }
    let mut job_s = [start.elapsed().as_secs_f64()];
    session.comm().allreduce(&mut job_s, Op::Max)?;
    if session.rank() == 0 {
        let all = all.unwrap_or_else(|| (0..n).map(|i| points::point(seed, i)).collect());
        let want = points::lloyd(&all, &first, args.iterations);
        let err = centers.iter().zip(&want).map(|(a, b)| (a[0] - b[0]).abs().max((a[1] - b[1]).abs())).fold(0.0, f64::max);
        let ok = err < 1e-6;
        if let Some(dir) = &args.output {
            std::fs::create_dir_all(dir)?;
            let mut f = std::fs::File::create(dir.join("centers.csv"))?;
            writeln!(f, "x,y")?;
            for c in &centers {
                writeln!(f, "{},{}", c[0], c[1])?;
            }
        }
        println!(
            "{{\"example\": \"kmeans\", \"api\": \"data\", \"ok\": {ok}, \"points\": {n}, \"k\": {}, \"iterations\": {}, \"max_center_error\": {err:.3e}, \"job_s\": {:.3}, \"workers\": {}}}",
            args.k,
            args.iterations,
            job_s[0],
            session.comm().size()
        );
        if !ok {
            return Err("the centers differ from a single-threaded Lloyd's algorithm".into());
        }
    }
    Ok(())
}
