//! The simulated robot's world: a seeded grid of walls and boxes, a laser that casts rays
//! in it, and a robot that drives a loop through it with noisy odometry.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::Pose;

/// Metres per cell of the world (and of every particle's map).
pub const RESOLUTION: f64 = 0.05;
/// The world's side in metres.
pub const SIDE: f64 = 12.0;

/// Walls and boxes on a square grid.
#[derive(Debug, Clone)]
pub struct World {
    cells: Vec<bool>,
    n: usize,
}

impl World {
    /// A 12 m × 12 m room with outer walls, two inner walls with doorways and a few boxes
    /// placed by `seed`; the band the robot drives (1.6–2.6 m from the walls) is kept clear.
    pub fn generate(seed: u64) -> World {
        let n = (SIDE / RESOLUTION) as usize;
        let mut w = World { cells: vec![false; n * n], n };
        let mut rng = StdRng::seed_from_u64(seed);
        w.fill(0.0, 0.0, SIDE, 0.2);
        w.fill(0.0, SIDE - 0.2, SIDE, SIDE);
        w.fill(0.0, 0.0, 0.2, SIDE);
        w.fill(SIDE - 0.2, 0.0, SIDE, SIDE);
        // Inner walls inside the loop, so the laser sees corners and edges everywhere.
        w.fill(4.0, 5.9, 8.0, 6.1);
        w.fill(5.9, 4.0, 6.1, 8.0);
        for _ in 0..10 {
            let (x, y) = loop {
                let x = rng.gen_range(0.4..SIDE - 1.0);
                let y = rng.gen_range(0.4..SIDE - 1.0);
                // Keep the driving band clear: boxes go near the walls or in the middle.
                let edge = x.min(y).min(SIDE - x).min(SIDE - y);
                if !(1.2..3.2).contains(&edge) {
                    break (x, y);
                }
            };
            let (bw, bh) = (rng.gen_range(0.2..0.6), rng.gen_range(0.2..0.6));
            w.fill(x, y, x + bw, y + bh);
        }
        w
    }

    fn fill(&mut self, x0: f64, y0: f64, x1: f64, y1: f64) {
        let c = |v: f64| ((v / RESOLUTION) as usize).min(self.n - 1);
        for j in c(y0)..=c(y1) {
            for i in c(x0)..=c(x1) {
                self.cells[j * self.n + i] = true;
            }
        }
    }

    /// Whether the point lies in a wall (outside the world counts as wall).
    pub fn occupied(&self, x: f64, y: f64) -> bool {
        if x < 0.0 || y < 0.0 {
            return true;
        }
        let (i, j) = ((x / RESOLUTION) as usize, (y / RESOLUTION) as usize);
        i >= self.n || j >= self.n || self.cells[j * self.n + i]
    }

    /// The distance along a ray to the first wall, at most `max_range`.
    pub fn cast(&self, x: f64, y: f64, angle: f64, max_range: f64) -> f64 {
        let (dx, dy) = (angle.cos(), angle.sin());
        let step = RESOLUTION / 4.0;
        let mut r = 0.0;
        while r < max_range {
            if self.occupied(x + r * dx, y + r * dy) {
                return r;
            }
            r += step;
        }
        max_range
    }

    /// Cells per side.
    pub fn cells_per_side(&self) -> usize {
        self.n
    }
}

/// One laser scan as it arrives: the odometry since the last scan, the ranges, and (for
/// scoring only, never seen by the filter) the true pose.
#[derive(Debug, Clone, PartialEq)]
pub struct Scan {
    /// The scan's number, from 0.
    pub index: usize,
    /// The odometer's reading: where the wheels say the robot is (it drifts). The filter
    /// uses the motion between two readings, so a lost scan loses no motion.
    pub odometry: Pose,
    /// Ranges in metres, beams evenly over 180° from −90° (right) to +90° (left).
    pub ranges: Vec<f32>,
    /// Where the robot really is.
    pub truth: Pose,
}

/// A robot driving a loop around the room, scanning after every step.
#[derive(Debug)]
pub struct Simulator {
    world: World,
    rng: StdRng,
    pose: Pose,
    odometer: Pose,
    beams: usize,
    /// The longest range the laser reports.
    pub max_range: f64,
    next: usize,
    waypoint: usize,
}

/// The loop's corners, in metres, driven counter-clockwise.
const WAYPOINTS: [(f64, f64); 4] = [(2.2, 2.2), (9.8, 2.2), (9.8, 9.8), (2.2, 9.8)];

/// Where the robot starts (its first waypoint, facing along x), in every world.
pub const START: Pose = Pose { x: WAYPOINTS[0].0, y: WAYPOINTS[0].1, theta: 0.0 };
/// Metres driven and radians turned at most per scan (at 10 Hz: 1 m/s, 1.5 rad/s).
const STEP: f64 = 0.1;
const TURN: f64 = 0.15;

impl Simulator {
    /// A robot at the loop's first corner facing along it, with a laser of `beams` beams.
    pub fn new(seed: u64, beams: usize) -> Simulator {
        Simulator {
            world: World::generate(seed),
            rng: StdRng::seed_from_u64(seed ^ 0x5eed),
            pose: START,
            odometer: START,
            beams,
            max_range: 8.0,
            next: 0,
            waypoint: 1,
        }
    }

    /// The world it drives in.
    pub fn world(&self) -> &World {
        &self.world
    }

    /// The angle of beam `i` of `beams` in the robot's frame.
    pub fn beam_angle(i: usize, beams: usize) -> f64 {
        -std::f64::consts::FRAC_PI_2 + std::f64::consts::PI * i as f64 / (beams - 1).max(1) as f64
    }

    /// Drives one step (none before the first scan) and scans.
    pub fn next_scan(&mut self) -> Scan {
        if self.next > 0 {
            let (tx, ty) = WAYPOINTS[self.waypoint];
            let (dx, dy) = (tx - self.pose.x, ty - self.pose.y);
            if dx.hypot(dy) < 0.3 {
                self.waypoint = (self.waypoint + 1) % WAYPOINTS.len();
            }
            let heading = dy.atan2(dx);
            let turn = wrap(heading - self.pose.theta).clamp(-TURN, TURN);
            let forward = if turn.abs() < TURN { STEP } else { STEP * 0.3 };
            let before = self.pose;
            self.pose.theta = wrap(self.pose.theta + turn);
            self.pose.x += forward * self.pose.theta.cos();
            self.pose.y += forward * self.pose.theta.sin();
            let truth = before.delta_to(&self.pose);
            // Wheel odometry: errors proportional to the motion, and a steady bias in turning.
            let noise = |rng: &mut StdRng, sd: f64| gaussian(rng) * sd;
            let measured = Pose {
                x: truth.x * (1.0 + noise(&mut self.rng, 0.08)),
                y: truth.y + noise(&mut self.rng, 0.01),
                theta: truth.theta * (1.0 + noise(&mut self.rng, 0.1)) + 0.012,
            };
            self.odometer = self.odometer.compose(&measured);
        }
        let p = self.pose;
        let ranges = (0..self.beams)
            .map(|i| {
                let a = p.theta + Self::beam_angle(i, self.beams);
                let r = self.world.cast(p.x, p.y, a, self.max_range);
                let noisy = if r < self.max_range { r + gaussian(&mut self.rng) * 0.01 } else { r };
                noisy.clamp(0.0, self.max_range) as f32
            })
            .collect();
        self.next += 1;
        Scan { index: self.next - 1, odometry: self.odometer, ranges, truth: p }
    }
}

/// An angle wrapped to (−π, π].
pub fn wrap(a: f64) -> f64 {
    let t = std::f64::consts::TAU;
    let mut a = a % t;
    if a > std::f64::consts::PI {
        a -= t;
    } else if a <= -std::f64::consts::PI {
        a += t;
    }
    a
}

/// A standard normal draw (Box–Muller).
pub fn gaussian(rng: &mut StdRng) -> f64 {
    let u: f64 = rng.gen_range(f64::EPSILON..1.0);
    let v: f64 = rng.gen();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_run_starts_at_start() {
        for seed in [0, 7, 99] {
            let first = Simulator::new(seed, 2).next_scan();
            assert_eq!((first.truth, first.odometry), (START, START), "seed {seed}");
        }
    }
}
