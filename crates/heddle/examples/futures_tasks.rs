//! Trivial-task overhead with `heddle::futures`: N calls of a squaring function submitted
//! one by one from rank 0 (`Executor::submit`), their results waited for and summed — what
//! Ray's `f.remote` and Dask's `client.submit` do, and the Rust twin of
//! `examples/python/futures_tasks.py`. Rank 0 is the driver; the other ranks run the
//! tasks. Rank 0 checks the sum against the closed form, prints one JSON line, and exits
//! non-zero when it is wrong.
//!
//! ```text
//! heddle run -n 3 -- target/release/examples/futures_tasks --tasks 10000          # 2 workers
//! heddle run -n 3 -- target/release/examples/futures_tasks --tasks 100000 --map 1000
//! ```
//!
//! The clock starts once every worker has joined and the executor is up.

use std::time::Instant;

use clap::Parser;
use heddle::futures::{self, Error, Registry};

#[derive(Parser)]
#[command(about = "Trivial-task overhead of heddle::futures")]
struct Args {
    /// Tasks in all.
    #[arg(long, default_value_t = 10_000)]
    tasks: u64,
    /// Submit with `Executor::map` and this chunk size instead of one by one.
    #[arg(long, default_value_t = 0)]
    map: usize,
}

fn main() {
    let args = Args::parse();
    let world = match heddle::init() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let mut registry = Registry::new();
    let square = registry.register("square", |i: u64| i * i);
    let n = args.tasks;
    let run = futures::run(&world, 0, &registry, |ex| -> Result<(u64, f64), Error> {
        let start = Instant::now();
        let total = if args.map > 0 {
            ex.map(square, 0..n, args.map)?.into_iter().sum()
        } else {
            let fs = (0..n).map(|i| ex.submit(square, i)).collect::<Result<Vec<_>, _>>()?;
            fs.into_iter().map(|f| f.wait()).sum::<Result<u64, _>>()?
        };
        Ok((total, start.elapsed().as_secs_f64()))
    });
    let (total, job_s) = match run {
        Ok(Some(r)) => r,
        Ok(None) => return, // a worker
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let want = n.saturating_sub(1) * n * (2 * n).saturating_sub(1) / 6;
    let ok = total == want;
    println!(
        "{{\"example\": \"futures_tasks\", \"api\": \"rust\", \"ok\": {ok}, \"tasks\": {n}, \
         \"job_s\": {job_s:.4}, \"us_per_task\": {:.2}, \"workers\": {}}}",
        job_s / n.max(1) as f64 * 1e6,
        world.size() - 1
    );
    if !ok {
        eprintln!("error: the sum of the squares is {total}, want {want}");
        std::process::exit(1);
    }
}
