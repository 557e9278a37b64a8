//! A particle's occupancy map (log-odds per cell) and the scan matcher that scores a pose
//! by how well a scan's endpoints fall on the map's walls, GMapping-style.

use super::world::{RESOLUTION, SIDE};
use super::Pose;

/// Log-odds added to a cell a beam ends in, and taken from the cells it crosses.
const HIT: i8 = 24;
const MISS: i8 = 4;
const LIMIT: i8 = 100;
/// How far from an endpoint a wall still counts (metres), and the spread of the match.
const REACH: f64 = 0.1;
const SIGMA: f64 = 0.05;

/// A map of the world as one particle believes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    n: usize,
    cells: Vec<i8>,
}

/// Cells along a side of every map.
const SIDE_CELLS: usize = (SIDE / RESOLUTION) as usize;

impl Default for Grid {
    fn default() -> Self {
        Grid { n: SIDE_CELLS, cells: vec![0; Grid::CELLS] }
    }
}

/// A scan's beams as the matcher uses them: angles and ranges, long ones left out.
#[derive(Debug, Clone, Default)]
pub struct Beams {
    /// (angle in the robot's frame, range) of the beams that hit something.
    pub hits: Vec<(f64, f64)>,
    /// The same for every beam, with the laser's longest range where nothing was hit.
    pub all: Vec<(f64, f64)>,
}

impl Grid {
    /// Cells in every map.
    pub const CELLS: usize = SIDE_CELLS * SIDE_CELLS;

    /// The cells, for sending a map to another worker.
    pub fn cells(&self) -> &[i8] {
        &self.cells
    }

    /// A map made of received cells.
    pub fn from_cells(cells: &[i8]) -> Grid {
        let n = (cells.len() as f64).sqrt() as usize;
        Grid { n, cells: cells.to_vec() }
    }

    fn index(&self, x: f64, y: f64) -> Option<usize> {
        if x < 0.0 || y < 0.0 {
            return None;
        }
        let (i, j) = ((x / RESOLUTION) as usize, (y / RESOLUTION) as usize);
        (i < self.n && j < self.n).then_some(j * self.n + i)
    }

    /// Whether the cell at the point is believed to be a wall.
    pub fn wall(&self, x: f64, y: f64) -> bool {
        self.index(x, y).is_some_and(|k| self.cells[k] > 0)
    }

    /// Adds a scan taken at `pose`: cells along each beam freer, the cell it ends in (if it
    /// hit something) more occupied.
    pub fn integrate(&mut self, pose: &Pose, beams: &Beams, max_range: f64) {
        for &(a, r) in &beams.all {
            let t = pose.theta + a;
            let (c, s) = (t.cos(), t.sin());
            let free = (r - RESOLUTION).max(0.0);
            let mut d = 0.0;
            while d < free {
                if let Some(k) = self.index(pose.x + d * c, pose.y + d * s) {
                    self.cells[k] = self.cells[k].saturating_sub(MISS).max(-LIMIT);
                }
                d += RESOLUTION;
            }
            if r < max_range {
                if let Some(k) = self.index(pose.x + r * c, pose.y + r * s) {
                    self.cells[k] = self.cells[k].saturating_add(HIT).min(LIMIT);
                }
            }
        }
    }

    /// How well the scan fits at `pose`: for each beam that hit something, the distance
    /// from its endpoint to the nearest wall cell within reach. Returns (score, log
    /// likelihood): the score sums `exp(−d²/2σ²)`, the likelihood `−d²/2σ²` (d at most the
    /// reach).
    pub fn fit(&self, pose: &Pose, beams: &Beams, stride: usize) -> (f64, f64) {
        let (mut score, mut lik) = (0.0, 0.0);
        let span = (REACH / RESOLUTION).ceil() as i64;
        for &(a, r) in beams.hits.iter().step_by(stride) {
            let t = pose.theta + a;
            let (ex, ey) = (pose.x + r * t.cos(), pose.y + r * t.sin());
            let (ci, cj) = ((ex / RESOLUTION).floor() as i64, (ey / RESOLUTION).floor() as i64);
            let mut best = REACH * REACH;
            for dj in -span..=span {
                for di in -span..=span {
                    let (i, j) = (ci + di, cj + dj);
                    if i < 0 || j < 0 || i as usize >= self.n || j as usize >= self.n {
                        continue;
                    }
                    if self.cells[j as usize * self.n + i as usize] > 0 {
                        let cx = (i as f64 + 0.5) * RESOLUTION - ex;
                        let cy = (j as f64 + 0.5) * RESOLUTION - ey;
                        best = best.min(cx * cx + cy * cy);
                    }
                }
            }
            let e = best / (2.0 * SIGMA * SIGMA);
            score += (-e).exp();
            lik -= e;
        }
        (score, lik)
    }

    /// Hill-climbs from `start` to the pose where the scan fits best (steps in x, y and
    /// θ, halved when no step helps); returns it with its log likelihood.
    pub fn match_scan(&self, start: &Pose, beams: &Beams, stride: usize) -> (Pose, f64) {
        let mut best = *start;
        let (mut score, mut lik) = self.fit(&best, beams, stride);
        let (mut lin, mut ang) = (0.05, 0.03);
        for _ in 0..5 {
            for _ in 0..20 {
                let moves = [
                    (lin, 0.0, 0.0),
                    (-lin, 0.0, 0.0),
                    (0.0, lin, 0.0),
                    (0.0, -lin, 0.0),
                    (0.0, 0.0, ang),
                    (0.0, 0.0, -ang),
                ];
                let mut improved = false;
                for (dx, dy, dt) in moves {
                    let p = Pose { x: best.x + dx, y: best.y + dy, theta: best.theta + dt };
                    let (s, l) = self.fit(&p, beams, stride);
                    if s > score {
                        (best, score, lik, improved) = (p, s, l, true);
                    }
                }
                if !improved {
                    break;
                }
            }
            lin /= 2.0;
            ang /= 2.0;
        }
        (best, lik)
    }
}
