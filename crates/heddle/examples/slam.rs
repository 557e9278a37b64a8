//! Particle-filter SLAM of a simulated robot (`heddle::apps::slam`): worker 0 streams laser
//! scans at `--rate` per second, the particles are split over the workers, and each scan's
//! estimate is the heaviest particle's pose. Prints one JSON line: the position error
//! against the simulator's truth (`rmse_m`, and `odometry_rmse_m` of dead reckoning), the
//! latency from a scan's release to its estimate (`latency_p50_ms`, `latency_p99_ms`), the
//! scans used, resamplings, scans lost (`missing`) and dropped for arriving late
//! (`out_of_order`; `--lose P` and `--reorder P` make the simulated network do both) and
//! the job time.
//!
//! ```text
//! heddle run -n 2 -- target/release/examples/slam --beams 180 --particles 100 --scans 300 --rate 10
//! ```
//!
//! The check: the filter's error is below dead reckoning's and under `--max-rmse` metres;
//! the example exits 1 when it is not. `--map-pgm FILE` writes the heaviest particle's map
//! (a PGM image: white free, black walls, grey unknown), `--trajectory FILE` the paths
//! (CSV), which `benches/apps/slam_plot.py` draws.

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use heddle::apps::slam::{slam, Options};

#[derive(Debug, Parser)]
struct Args {
    /// Laser beams per scan (over 180°).
    #[arg(long, default_value_t = 180)]
    beams: usize,
    /// Particles in all.
    #[arg(long, default_value_t = 100)]
    particles: usize,
    /// Scans to process.
    #[arg(long, default_value_t = 300)]
    scans: usize,
    /// Scans per second (0: each as soon as the last is done).
    #[arg(long, default_value_t = 10.0)]
    rate: f64,
    /// Seeds the world, the noise and the filter.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The chance that a scan is lost on its way.
    #[arg(long, default_value_t = 0.0)]
    lose: f64,
    /// The chance that a scan arrives after the next one (then it is dropped).
    #[arg(long, default_value_t = 0.0)]
    reorder: f64,
    /// The largest position error (RMSE, metres) the check accepts.
    #[arg(long, default_value_t = 0.25)]
    max_rmse: f64,
    /// Write the map here (PGM).
    #[arg(long)]
    map_pgm: Option<PathBuf>,
    /// Write the paths here (CSV: scan, estimate, truth and dead reckoning, x and y).
    #[arg(long)]
    trajectory: Option<PathBuf>,
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let comm = heddle::init()?;
    let opts = Options {
        particles: args.particles,
        beams: args.beams,
        scans: args.scans,
        rate_hz: args.rate,
        seed: args.seed,
        lose: args.lose,
        reorder: args.reorder,
        ..Options::default()
    };
    comm.barrier()?;
    let start = Instant::now();
    let run = slam(&comm, &opts)?;
    let job_s = start.elapsed().as_secs_f64();
    if comm.rank() != 0 {
        return Ok(());
    }
    let mut ms: Vec<f64> = run.latencies.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    let q = |f: f64| ms[((ms.len() - 1) as f64 * f).round() as usize];
    let ok = run.rmse_m < run.odometry_rmse_m && run.rmse_m <= args.max_rmse;
    if let (Some(path), Some(map)) = (&args.map_pgm, &run.map) {
        let n = (map.cells().len() as f64).sqrt() as usize;
        let mut pgm = format!("P5\n{n} {n}\n255\n").into_bytes();
        // Rows from the top (north) down.
        for j in (0..n).rev() {
            pgm.extend(map.cells()[j * n..(j + 1) * n].iter().map(|&c| match c {
                c if c > 0 => 0u8,
                c if c < 0 => 255,
                _ => 160,
            }));
        }
        std::fs::write(path, pgm).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if let Some(path) = &args.trajectory {
        let mut csv = String::from("scan,x,y,true_x,true_y,odometry_x,odometry_y\n");
        for (i, ((e, t), o)) in run.poses.iter().zip(&run.truth).zip(&run.odometry).enumerate() {
            csv +=
                &format!("{i},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4}\n", e.x, e.y, t.x, t.y, o.x, o.y);
        }
        std::fs::write(path, csv).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    println!(
        "{{\"example\": \"slam\", \"ok\": {ok}, \"rmse_m\": {:.4}, \"odometry_rmse_m\": {:.4}, \
         \"latency_p50_ms\": {:.2}, \"latency_p99_ms\": {:.2}, \"scans\": {}, \
         \"particles\": {}, \"beams\": {}, \"rate_hz\": {}, \"resamples\": {}, \
         \"missing\": {}, \"out_of_order\": {}, \"job_s\": {job_s:.3}, \"workers\": {}}}",
        run.rmse_m,
        run.odometry_rmse_m,
        q(0.5),
        q(0.99),
        run.poses.len(),
        args.particles,
        args.beams,
        args.rate,
        run.resamples,
        run.missing,
        run.out_of_order,
        comm.size()
    );
    if ok {
        Ok(())
    } else {
        Err(format!(
            "the estimate is off: RMSE {:.3} m (dead reckoning {:.3} m, limit {} m)",
            run.rmse_m, run.odometry_rmse_m, args.max_rmse
        )
        .into())
    }
}
