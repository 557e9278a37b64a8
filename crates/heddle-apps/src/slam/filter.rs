//! The particle filter spread over the workers: each holds a share of the particles (pose,
//! weight, map); per scan each moves, matches and weighs its own, the weights and poses
//! are gathered everywhere (`allgatherv`), and when the weights grow uneven every worker
//! draws the same resampling and the maps that change workers cross in one `alltoallv`.

use heddle_comm::{Blocks, Communicator};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::grid::{Beams, Grid};
use super::world::{gaussian, Simulator};
use super::{Options, Pose, Result};

/// One particle: where the robot may be, how likely that is, and the map it implies.
#[derive(Debug, Clone)]
struct Particle {
    pose: Pose,
    log_w: f64,
    grid: Grid,
}

/// This worker's particles and what it knows of everyone's.
#[derive(Debug)]
pub(crate) struct Filter<'c> {
    comm: &'c Communicator,
    blocks: Blocks,
    mine: Vec<Particle>,
    rng: StdRng,
    /// Drawn alike on every worker (resampling).
    shared_rng: StdRng,
    opts: Options,
}

/// The filter's answer to one scan.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Estimate {
    pub(crate) pose: Pose,
    pub(crate) resampled: bool,
}

impl<'c> Filter<'c> {
    pub(crate) fn new(comm: &'c Communicator, opts: &Options, start: Pose) -> Filter<'c> {
        let blocks = Blocks::even(opts.particles, comm.size());
        let count = blocks.counts()[comm.rank()];
        let mine = (0..count).map(|_| Particle { pose: start, log_w: 0.0, grid: Grid::default() });
        Filter {
            comm,
            mine: mine.collect(),
            blocks,
            rng: StdRng::seed_from_u64(opts.seed ^ ((comm.rank() as u64 + 1) * 0x9e37_79b9)),
            shared_rng: StdRng::seed_from_u64(opts.seed ^ 0x00c0_ffee),
            opts: opts.clone(),
        }
    }

    /// Moves every particle by the odometry (with noise), matches the scan to its map,
    /// weighs it by the match, adds the scan to its map; then estimates and resamples.
    /// `motion`: the odometer's motion since the last scan used (`None` for the first).
    pub(crate) fn step(&mut self, motion: Option<&Pose>, ranges: &[f32]) -> Result<Estimate> {
        let max_range = self.opts.max_range;
        let mut beams = Beams::default();
        for (i, &r) in ranges.iter().enumerate() {
            let a = Simulator::beam_angle(i, ranges.len());
            let r = f64::from(r);
            beams.all.push((a, r));
            if r < max_range {
                beams.hits.push((a, r));
            }
        }
        let stride = (beams.hits.len() / 90).max(1);
        for p in &mut self.mine {
            if let Some(odometry) = motion {
                let n = |rng: &mut StdRng, sd: f64| gaussian(rng) * sd;
                let moved = Pose {
                    x: odometry.x + n(&mut self.rng, 0.02 + 0.1 * odometry.x.abs()),
                    y: odometry.y + n(&mut self.rng, 0.02 + 0.05 * odometry.x.abs()),
                    theta: odometry.theta
                        + n(&mut self.rng, 0.01 + 0.2 * odometry.theta.abs())
                        + n(&mut self.rng, 0.01),
                };
                let guess = p.pose.compose(&moved);
                let (pose, lik) = p.grid.match_scan(&guess, &beams, stride);
                p.pose = pose;
                // Tempered, so that one scan does not decide everything (GMapping's gain).
                p.log_w += lik / (beams.hits.len().div_ceil(stride).max(1) as f64 / 30.0);
            }
            p.grid.integrate(&p.pose, &beams, max_range);
        }
        // Everyone's weights and poses, in particle order.
        let send: Vec<f64> =
            self.mine.iter().flat_map(|p| [p.log_w, p.pose.x, p.pose.y, p.pose.theta]).collect();
        let counts: Vec<usize> = self.blocks.counts().iter().map(|c| c * 4).collect();
        let mut all = vec![0.0; self.opts.particles * 4];
        self.comm.allgatherv(&send, &mut all, &counts)?;
        let top = all.chunks_exact(4).map(|c| c[0]).fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = all.chunks_exact(4).map(|c| (c[0] - top).exp()).collect();
        let sum: f64 = w.iter().sum();
        let w: Vec<f64> = w.iter().map(|x| x / sum).collect();
        let best = (0..w.len()).max_by(|&a, &b| w[a].total_cmp(&w[b])).unwrap_or(0);
        let b = &all[best * 4..best * 4 + 4];
        let pose = Pose { x: b[1], y: b[2], theta: b[3] };
        let neff = 1.0 / w.iter().map(|x| x * x).sum::<f64>();
        let resampled = neff < self.opts.particles as f64 / 2.0;
        if resampled {
            self.resample(&w, &all)?;
        }
        Ok(Estimate { pose, resampled })
    }

    /// Systematic resampling, drawn alike everywhere; maps of parents on other workers
    /// arrive through one `alltoallv` (each parent's map once per worker needing it).
    fn resample(&mut self, w: &[f64], all: &[f64]) -> Result<()> {
        let n = w.len();
        let u0: f64 = self.shared_rng.gen::<f64>() / n as f64;
        let mut parents = Vec::with_capacity(n);
        let (mut acc, mut i) = (w[0], 0);
        for j in 0..n {
            let u = u0 + j as f64 / n as f64;
            while u > acc && i + 1 < n {
                i += 1;
                acc += w[i];
            }
            parents.push(i);
        }
        let (me, size) = (self.comm.rank(), self.comm.size());
        let displs = self.blocks.displs().to_vec();
        let owner = |p: usize| displs.iter().rposition(|&d| d <= p).unwrap_or(0);
        let range = |r: usize| displs[r]..displs[r] + self.blocks.counts()[r];
        // needed[r][s]: the parents (sorted, once each) that worker r needs from worker s.
        let needed = |r: usize, s: usize| {
            let mut v: Vec<usize> =
                parents[range(r)].iter().copied().filter(|&p| owner(p) == s).collect();
            v.dedup();
            v
        };
        let cells = Grid::CELLS;
        let mut send = Vec::new();
        let mut send_counts = vec![0; size];
        for (r, count) in send_counts.iter_mut().enumerate() {
            if r == me {
                continue;
            }
            for p in needed(r, me) {
                send.extend_from_slice(self.mine[p - displs[me]].grid.cells());
                *count += cells;
            }
        }
        let from: Vec<Vec<usize>> =
            (0..size).map(|s| if s == me { vec![] } else { needed(me, s) }).collect();
        let recv_counts: Vec<usize> = from.iter().map(|v| v.len() * cells).collect();
        let mut recv = vec![0i8; recv_counts.iter().sum()];
        self.comm.alltoallv(&send, &send_counts, &mut recv, &recv_counts)?;
        let mut at = 0;
        let mut received = std::collections::HashMap::new();
        for v in &from {
            for &p in v {
                received.insert(p, Grid::from_cells(&recv[at..at + cells]));
                at += cells;
            }
        }
        let next: Vec<Particle> = parents[range(me)]
            .iter()
            .map(|&p| {
                let c = &all[p * 4..p * 4 + 4];
                let grid = if owner(p) == me {
                    self.mine[p - displs[me]].grid.clone()
                } else {
                    received[&p].clone()
                };
                Particle { pose: Pose { x: c[1], y: c[2], theta: c[3] }, log_w: 0.0, grid }
            })
            .collect();
        self.mine = next;
        Ok(())
    }

    /// The heaviest particle's map, on worker 0 (`None` elsewhere).
    pub(crate) fn best_map(&self, comm: &Communicator) -> Result<Option<Grid>> {
        let (me, first) = (comm.rank(), self.blocks.displs()[comm.rank()]);
        let local = self
            .mine
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.log_w.total_cmp(&b.1.log_w))
            .map_or([f64::NEG_INFINITY, 0.0], |(i, p)| [p.log_w, (first + i) as f64]);
        let mut all = vec![0.0; 2 * comm.size()];
        comm.allgather(&local, &mut all)?;
        let best =
            all.chunks_exact(2).max_by(|a, b| a[0].total_cmp(&b[0])).map_or(0, |c| c[1] as usize);
        let owner = self.blocks.displs().iter().rposition(|&d| d <= best).unwrap_or(0);
        let mut cells = if owner == me {
            self.mine[best - first].grid.cells().to_vec()
        } else {
            vec![0i8; Grid::CELLS]
        };
        comm.broadcast(&mut cells, owner)?;
        Ok((me == 0).then(|| Grid::from_cells(&cells)))
    }
}
