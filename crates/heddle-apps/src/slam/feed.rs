//! The scans as a network delivers them to the filter: in order, or — to test that the
//! filter copes — with some lost and some overtaken by the next one.

use std::collections::VecDeque;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::world::{Scan, Simulator};

/// Scans of a [`Simulator`] as delivered: each lost with probability `lose`, or held back
/// behind the next with probability `reorder` (so it arrives after a newer one).
#[derive(Debug)]
pub struct Feed {
    sim: Simulator,
    rng: StdRng,
    lose: f64,
    reorder: f64,
    held: Option<Scan>,
    out: VecDeque<Scan>,
    left: usize,
}

impl Feed {
    /// The first `scans` scans of `sim`, delivered with those odds (seeded by `seed`).
    pub fn new(sim: Simulator, scans: usize, lose: f64, reorder: f64, seed: u64) -> Feed {
        let rng = StdRng::seed_from_u64(seed ^ 0x00fe_edfe);
        Feed { sim, rng, lose, reorder, held: None, out: VecDeque::new(), left: scans }
    }

    /// The next scan to arrive; `None` once all have (or were lost).
    pub fn next_scan(&mut self) -> Option<Scan> {
        while self.out.is_empty() && self.left > 0 {
            let s = self.sim.next_scan();
            self.left -= 1;
            if self.rng.gen::<f64>() < self.lose {
                continue;
            }
            if self.held.is_none() && self.rng.gen::<f64>() < self.reorder {
                self.held = Some(s);
                continue;
            }
            self.out.push_back(s);
            self.out.extend(self.held.take());
        }
        self.out.pop_front().or_else(|| self.held.take())
    }
}
