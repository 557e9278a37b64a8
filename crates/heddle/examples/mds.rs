//! DA-SMACOF multidimensional scaling of a dissimilarity matrix (`heddle::apps::mds`):
//! the matrix's rows split over the workers, the coordinates gathered on each every
//! iteration. Prints one JSON line with the normalized stress (`Σ w (d − δ)² / Σ w δ²`)
//! and the job time (from the matrix in memory to the coordinates; reading and checking
//! the input, and writing the output, are not timed).
//!
//! ```text
//! heddle run -n 2 -- target/release/examples/mds --input D.npy --dim 3 --output X.npy
//! ```
//!
//! The input is a square, symmetric `.npy` matrix (float32 or float64) with a zero
//! diagonal; `--weights` another of the same shape; `--init` a `.npy` of `n × dim` starting
//! coordinates. An input that is none of these is an error naming the file and the entry.

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use heddle::apps::mds::{mds, read_coords, write_coords, Options, Rows};
use heddle::Op;

#[derive(Debug, Parser)]
struct Args {
    /// The dissimilarity matrix (`.npy`).
    #[arg(long)]
    input: PathBuf,
    /// Dimensions of the embedding.
    #[arg(long, default_value_t = 3)]
    dim: usize,
    /// Weights (`.npy`, the input's shape); all 1 if absent.
    #[arg(long)]
    weights: Option<PathBuf>,
    /// Starting coordinates (`.npy`, n × dim); a seeded random start if absent (annealed).
    #[arg(long)]
    init: Option<PathBuf>,
    /// Write the coordinates here (`.npy`, float64, n × dim).
    #[arg(long)]
    output: Option<PathBuf>,
    /// Skip the deterministic annealing.
    #[arg(long)]
    no_anneal: bool,
    /// Iterations of the final fit at most.
    #[arg(long, default_value_t = 300)]
    max_iter: usize,
    /// Relative fall of the stress below which the final fit stops.
    #[arg(long, default_value_t = 1e-6)]
    tol: f64,
    /// Seed of the random start.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let comm = heddle::init()?;
    let (rank, size) = (comm.rank(), comm.size());
    let delta = Rows::read(&args.input, "distances", rank, size)?;
    let weights = match &args.weights {
        Some(p) => Some(Rows::read(p, "weights", rank, size)?),
        None => None,
    };
    let init = match &args.init {
        Some(p) => Some(read_coords(p, delta.n, args.dim)?),
        None => None,
    };
    let opts = Options {
        dim: args.dim,
        anneal: !args.no_anneal,
        max_iter: args.max_iter,
        tol: args.tol,
        seed: args.seed,
        ..Options::default()
    };
    comm.barrier()?;
    let start = Instant::now();
    let fit = mds(&comm, &delta, weights.as_ref(), init.as_deref(), &opts)?;
    let mut job_s = [start.elapsed().as_secs_f64()];
    comm.allreduce(&mut job_s, Op::Max)?;
    // The check: finite coordinates whose stress is below that of every point at the
    // centre (which is 1: d = 0 everywhere), i.e. the fit found structure.
    let ok = fit.coords.iter().all(|x| x.is_finite()) && fit.stress < 1.0;
    if rank == 0 {
        if let Some(out) = &args.output {
            write_coords(out, &fit.coords, args.dim)?;
        }
        println!(
            "{{\"example\": \"mds\", \"ok\": {ok}, \"points\": {}, \"dim\": {}, \
             \"stress\": {:.6e}, \"iterations\": {}, \"temperatures\": {}, \"job_s\": {:.3}, \
             \"workers\": {size}}}",
            delta.n, args.dim, fit.stress, fit.iterations, fit.temperatures, job_s[0]
        );
    }
    if ok {
        Ok(())
    } else {
        Err(format!("the fit failed: stress {} (or coordinates not finite)", fit.stress).into())
    }
}
