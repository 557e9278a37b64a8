//! Rao-Blackwellized particle-filter SLAM (the thesis' chapters 5 and 9.8, GMapping-style):
//! a robot drives through a simulated room, streaming laser scans at a set rate; each
//! particle carries a pose and its own occupancy map, moves by the odometry, is refined
//! by matching the scan against its map, weighed by how well it matched, and adds the scan
//! to its map. The particles are split over the workers (BSP: one superstep per scan),
//! their weights and poses gathered with `allgatherv`, and resampling moves maps between
//! workers with `alltoallv`. The estimate is the heaviest particle's pose.
//!
//! Worker 0 runs the simulator: it releases the `k`-th scan to arrive at `k / rate` seconds
//! and broadcasts it; the latency of a scan runs from its release to the estimate. Scans
//! carry the odometer's reading, so the motion between two scans survives lost ones in
//! between (counted as `missing`); a scan older than one already used is dropped
//! (counted as `out_of_order`). [`Options::lose`] and [`Options::reorder`] make the
//! simulated network do both.
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

mod feed;
mod filter;
mod grid;
pub mod world;

use std::time::{Duration, Instant};

use heddle_comm::Communicator;

pub use feed::Feed;
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
    /// The chance that a scan is lost on its way (0 to 1).
    pub lose: f64,
    /// The chance that a scan arrives after the next one (0 to 1).
    pub reorder: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            particles: 100,
            beams: 180,
            scans: 200,
            rate_hz: 10.0,
            max_range: 8.0,
            seed: 1,
            lose: 0.0,
            reorder: 0.0,
        }
    }
}

/// What a run found (complete on worker 0; the others hold only their counts).
#[derive(Debug, Clone, Default)]
pub struct Run {
    /// The scans used, by number, in order.
    pub scans: Vec<usize>,
    /// The estimated pose after each scan used.
    pub poses: Vec<Pose>,
    /// The true poses.
    pub truth: Vec<Pose>,
    /// Dead reckoning: the odometer's readings.
    pub odometry: Vec<Pose>,
    /// Scans that never arrived (numbers passed over and not seen later; a loss after
    /// the last scan used is not known).
    pub missing: usize,
    /// Scans that arrived after a newer one and were dropped.
    pub out_of_order: usize,
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
    let mut feed = (comm.rank() == 0).then(|| {
        let mut sim = Simulator::new(opts.seed, opts.beams);
        sim.max_range = opts.max_range;
        Feed::new(sim, opts.scans, opts.lose, opts.reorder, opts.seed)
    });
    let mut filter = filter::Filter::new(comm, opts, world::START);
    let mut run = Run::default();
    // [more scans follow (1) or not (0), odometer x, y, θ, ranges…]
    let mut msg = vec![0f64; 4 + opts.beams];
    let mut last: Option<(usize, Pose)> = None;
    let t0 = Instant::now();
    for k in 0.. {
        let release = if opts.rate_hz > 0.0 {
            t0 + Duration::from_secs_f64(k as f64 / opts.rate_hz)
        } else {
            Instant::now()
        };
        let mut scan = None;
        if let Some(f) = feed.as_mut() {
            if let Some(wait) = release.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            scan = f.next_scan();
            msg[0] = 0.0;
            if let Some(s) = &scan {
                if last.is_some_and(|(i, _)| s.index <= i) {
                    // Counted missing when its number was passed; it came, only late.
                    run.out_of_order += 1;
                    run.missing = run.missing.saturating_sub(1);
                    continue;
                }
                run.missing += s.index - last.map_or(0, |(i, _)| i + 1);
                msg[0] = 1.0;
                msg[1..4].copy_from_slice(&[s.odometry.x, s.odometry.y, s.odometry.theta]);
                for (m, r) in msg[4..].iter_mut().zip(&s.ranges) {
                    *m = f64::from(*r);
                }
            }
        }
        comm.broadcast(&mut msg, 0)?;
        if msg[0] == 0.0 {
            break;
        }
        let reading = Pose { x: msg[1], y: msg[2], theta: msg[3] };
        let motion = last.map(|(_, before)| before.delta_to(&reading));
        let ranges: Vec<f32> = msg[4..].iter().map(|&r| r as f32).collect();
        let est = filter.step(motion.as_ref(), &ranges)?;
        run.resamples += usize::from(est.resampled);
        last = Some((scan.as_ref().map_or(0, |s| s.index), reading));
        if let Some(s) = scan {
            run.latencies.push(release.max(t0).elapsed());
            run.scans.push(s.index);
            run.poses.push(est.pose);
            run.truth.push(s.truth);
            run.odometry.push(s.odometry);
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
    for (name, p) in [("lose", o.lose), ("reorder", o.reorder)] {
        if !(0.0..1.0).contains(&p) {
            return bad(format!("{name} = {p}: give a chance from 0 up to (not including) 1"));
        }
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
