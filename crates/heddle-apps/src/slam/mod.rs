//! Rao-Blackwellized particle-filter SLAM (the thesis' chapters 5 and 9.8, GMapping-style):
//! a robot drives through a simulated room, streaming laser scans at a set rate; each
//! particle carries a pose and its own occupancy map, moves by the odometry, is refined
//! by matching the scan against its map, weighed by how well it matched, and adds the scan
//! to its map. The particles are split over the workers (BSP: one superstep per scan),
//! their weights and poses gathered with `allgatherv`, and resampling moves maps between
//! workers with `alltoallv`. The estimate is the heaviest particle's pose.
//!
//! Worker 0 runs the simulator: it releases scan `i` at `i / rate` seconds and broadcasts
//! it; the latency of a scan runs from its release to the estimate.
//!
//! ```
//! use heddle_apps::slam::{slam, Options};
//! let comms = heddle_comm::local_world(2, heddle_comm::CommConfig::default())?;
//! std::thread::scope(|s| {
//!     for c in &comms {
//!         s.spawn(move || {
//!             let opts = Options { particles: 8, beams: 90, scans: 30, rate_hz: 0.0, ..Options::default() };
//!             let run = slam(c, &opts).unwrap();
//!             if c.rank() == 0 {
//!                 assert_eq!(run.poses.len(), 30);
//!                 assert!(run.rmse_m < 0.3, "rmse {}", run.rmse_m);
//!             }
//!         });
//!     }
//! });
//! # Ok::<(), heddle_comm::Error>(())
//! ```

mod filter;
mod grid;
pub mod world;

use std::time::{Duration, Instant};

use heddle_comm::Communicator;

pub use grid::{Beams, Grid};
pub use world::{Scan, Simulator, World};

/// What can go wrong in a SLAM run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Settings that cannot work; the message names the setting and what to do.
    #[error("{0}")]
    InvalidArgument(String),
    /// A collective failed.
    #[error(transparent)]
    Comm(#[from] heddle_comm::Error),
}

/// The result type of this module.
pub type Result<T> = std::result::Result<T, Error>;

/// A pose in the plane: metres and radians (or, as odometry, a motion in the robot's frame).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pose {
    /// Metres east (or forward).
    pub x: f64,
    /// Metres north (or left).
    pub y: f64,
    /// Heading, radians counter-clockwise from east.
    pub theta: f64,
}

impl Pose {
    /// This pose moved by `d`, a motion in its own frame.
    pub fn compose(&self, d: &Pose) -> Pose {
        let (c, s) = (self.theta.cos(), self.theta.sin());
        Pose {
            x: self.x + c * d.x - s * d.y,
            y: self.y + s * d.x + c * d.y,
            theta: world::wrap(self.theta + d.theta),
        }
    }

    /// The motion, in this pose's frame, that leads to `to`.
    pub fn delta_to(&self, to: &Pose) -> Pose {
        let (c, s) = (self.theta.cos(), self.theta.sin());
        let (dx, dy) = (to.x - self.x, to.y - self.y);
        Pose { x: c * dx + s * dy, y: -s * dx + c * dy, theta: world::wrap(to.theta - self.theta) }
    }
}

/// Settings of [`slam`].
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Particles in all (split over the workers).
    pub particles: usize,
    /// Laser beams per scan, over 180°.
    pub beams: usize,
    /// Scans to process.
    pub scans: usize,
    /// Scans released per second; 0: each as soon as the last is done.
    pub rate_hz: f64,
    /// The laser's longest range, metres.
    pub max_range: f64,
    /// Seeds the world, the robot's noise and the filter.
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options { particles: 100, beams: 180, scans: 200, rate_hz: 10.0, max_range: 8.0, seed: 1 }
    }
}

/// What a run found (complete on worker 0; the others hold only their counts).
#[derive(Debug, Clone, Default)]
pub struct Run {
    /// The estimated pose after each scan.
    pub poses: Vec<Pose>,
    /// The true poses.
    pub truth: Vec<Pose>,
    /// Dead reckoning: the odometry alone, added up.
    pub odometry: Vec<Pose>,
    /// From each scan's release to its estimate.
    pub latencies: Vec<Duration>,
    /// Root mean square of the position error of `poses` (metres).
    pub rmse_m: f64,
    /// The same of dead reckoning.
    pub odometry_rmse_m: f64,
    /// Scans after which the particles were resampled.
    pub resamples: usize,
    /// The heaviest particle's map at the end.
    pub map: Option<Grid>,
}

/// Runs the filter over `opts.scans` scans of the simulated robot; every worker of `comm`
/// calls it.
///
/// # Errors
/// [`Error::InvalidArgument`] for no particles, fewer particles than workers, fewer than
/// 2 beams, no scans or a negative rate; [`Error::Comm`] when a collective fails.
pub fn slam(comm: &Communicator, opts: &Options) -> Result<Run> {
    check(comm, opts)?;
    let mut sim = (comm.rank() == 0).then(|| Simulator::new(opts.seed, opts.beams));
    if let Some(s) = sim.as_mut() {
        s.max_range = opts.max_range;
    }
    let start_pose = Simulator::new(opts.seed, 2).next_scan().truth;
    let mut filter = filter::Filter::new(comm, opts, start_pose);
    let mut run = Run::default();
    let mut reckoned = start_pose;
    let mut msg = vec![0f64; 3 + opts.beams];
    let t0 = Instant::now();
    for i in 0..opts.scans {
        let release = if opts.rate_hz > 0.0 {
            t0 + Duration::from_secs_f64(i as f64 / opts.rate_hz)
        } else {
            Instant::now()
        };
        let mut truth = None;
        if let Some(s) = sim.as_mut() {
            if let Some(wait) = release.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let scan = s.next_scan();
            msg[..3].copy_from_slice(&[scan.odometry.x, scan.odometry.y, scan.odometry.theta]);
            for (m, r) in msg[3..].iter_mut().zip(&scan.ranges) {
                *m = f64::from(*r);
            }
            truth = Some(scan.truth);
        }
        comm.broadcast(&mut msg, 0)?;
        let odometry = Pose { x: msg[0], y: msg[1], theta: msg[2] };
        let ranges: Vec<f32> = msg[3..].iter().map(|&r| r as f32).collect();
        let est = filter.step(&odometry, &ranges)?;
        run.resamples += usize::from(est.resampled);
        if let Some(truth) = truth {
            let released = release.max(t0);
            run.latencies.push(released.elapsed());
            if i > 0 {
                reckoned = reckoned.compose(&odometry);
            }
            run.poses.push(est.pose);
            run.truth.push(truth);
            run.odometry.push(reckoned);
        }
    }
    if comm.rank() == 0 {
        run.rmse_m = rmse(&run.poses, &run.truth);
        run.odometry_rmse_m = rmse(&run.odometry, &run.truth);
    }
    run.map = filter.best_map(comm)?;
    Ok(run)
}

fn check(comm: &Communicator, o: &Options) -> Result<()> {
    let bad = |m: String| Err(Error::InvalidArgument(m));
    if o.particles == 0 || o.particles < comm.size() {
        return bad(format!(
            "particles = {}: give at least one per worker ({} workers)",
            o.particles,
            comm.size()
        ));
    }
    if o.beams < 2 {
        return bad(format!("beams = {}: a scan needs at least 2 beams", o.beams));
    }
    if o.scans == 0 {
        return bad("scans = 0: give at least one scan".into());
    }
    if !(o.rate_hz >= 0.0 && o.rate_hz.is_finite()) {
        return bad(format!("rate = {}: give scans per second (0: as fast as it goes)", o.rate_hz));
    }
    if !(o.max_range > 0.0 && o.max_range.is_finite()) {
        return bad(format!("max_range = {}: give the laser's range in metres", o.max_range));
    }
    Ok(())
}

/// Root mean square of the position errors.
pub fn rmse(est: &[Pose], truth: &[Pose]) -> f64 {
    let n = est.len().max(1) as f64;
    let sq: f64 =
        est.iter().zip(truth).map(|(a, b)| (a.x - b.x).powi(2) + (a.y - b.y).powi(2)).sum();
    (sq / n).sqrt()
}
