//! The SMACOF iteration over a worker's rows: the Guttman transform's right-hand side
//! `B(Z) Z` and the stress in one pass, the update (a scaling, or a conjugate-gradient
//! solve of `V X = B(Z) Z` when weighted), and the new coordinates gathered on every
//! worker.

use heddle_comm::{Communicator, Op};

use super::matrix::Rows;
use super::Error;

/// Coordinates as `dim` columns of `n` values (structure of arrays: the inner loops run
/// over one column at a time and vectorize).
#[derive(Debug, Clone)]
pub(super) struct Columns {
    pub(super) n: usize,
    pub(super) cols: Vec<Vec<f64>>,
}

impl Columns {
    pub(super) fn from_rows(coords: &[f64], dim: usize) -> Columns {
        let n = coords.len() / dim;
        let cols = (0..dim).map(|k| (0..n).map(|i| coords[i * dim + k]).collect()).collect();
        Columns { n, cols }
    }

    pub(super) fn to_rows(&self) -> Vec<f64> {
        (0..self.n).flat_map(|i| self.cols.iter().map(move |c| c[i])).collect()
    }

    /// Moves the centroid to the origin.
    pub(super) fn center(&mut self) {
        for c in &mut self.cols {
            let mean = c.iter().sum::<f64>() / c.len().max(1) as f64;
            c.iter_mut().for_each(|x| *x -= mean);
        }
    }
}

/// The pieces of one worker's work, and its scratch space.
pub(super) struct Smacof<'a> {
    pub(super) comm: &'a Communicator,
    pub(super) delta: &'a Rows,
    pub(super) weights: Option<&'a Rows>,
    /// Rows per worker (for the gathers).
    pub(super) counts: Vec<usize>,
    pub(super) cg_tol: f64,
    pub(super) cg_max: usize,
}

impl<'a> Smacof<'a> {
    pub(super) fn new(
        comm: &'a Communicator,
        delta: &'a Rows,
        weights: Option<&'a Rows>,
        cg: (f64, usize),
    ) -> Smacof<'a> {
        let (n, size) = (delta.n, comm.size());
        let counts = (0..size).map(|r| n * (r + 1) / size - n * r / size).collect();
        Smacof { comm, delta, weights, counts, cg_tol: cg.0, cg_max: cg.1 }
    }

    /// The own rows of `B(Z) Z` (row-major, `dim` values a row) for the dissimilarities
    /// lowered by `shift` (and clamped at zero: deterministic annealing), and the
    /// normalized stress of `z` against them (summed over every worker).
    pub(super) fn guttman(
        &mut self,
        z: &Columns,
        shift: f64,
        out: &mut [f64],
    ) -> Result<f64, Error> {
        let dim = z.cols.len();
        let (mut num, mut den) = (0.0, 0.0);
        let cols: Vec<&[f64]> = z.cols.iter().map(Vec::as_slice).collect();
        for li in 0..self.delta.len() {
            let i = self.delta.first + li;
            let zi: Vec<f64> = cols.iter().map(|c| c[i]).collect();
            let row = &mut out[li * dim..(li + 1) * dim];
            let delta = self.delta.row(li);
            let (n, d) = match self.weights.map(|w| w.row(li)) {
                Some(w) => row_sums(&cols, &zi, delta, shift, |j| w[j], row),
                None => row_sums(&cols, &zi, delta, shift, |_| 1.0, row),
            };
            (num, den) = (num + n, den + d);
        }
        let mut sums = [num, den];
        self.comm.allreduce(&mut sums, Op::Sum)?;
        Ok(if sums[1] > 0.0 { sums[0] / sums[1] } else { 0.0 })
    }

    /// The Guttman transform's new coordinates from the own rows of `B(Z) Z`: `B Z / n`
    /// unweighted, else `V⁺ B Z` by conjugate gradients started from `z`.
    pub(super) fn update(&mut self, z: &Columns, bz: &[f64]) -> Result<Columns, Error> {
        let dim = z.cols.len();
        let mine = match self.weights {
            None => bz.iter().map(|v| v / z.n as f64).collect(),
            Some(w) => self.solve(w, z, bz)?,
        };
        let mut x = self.gather(&mine, dim)?;
        x.center();
        Ok(x)
    }

    /// Every worker's rows (row-major) as full columns.
    fn gather(&self, mine: &[f64], dim: usize) -> Result<Columns, Error> {
        let counts: Vec<usize> = self.counts.iter().map(|c| c * dim).collect();
        let mut all = vec![0.0; self.delta.n * dim];
        self.comm.allgatherv(mine, &mut all, &counts)?;
        Ok(Columns::from_rows(&all, dim))
    }

    /// The own rows of `V x` for full `x`: `sum_j w_ij (x_i - x_j)`.
    fn laplacian(&self, w: &Rows, x: &Columns, out: &mut [f64]) {
        let dim = x.cols.len();
        for li in 0..w.len() {
            let (i, row) = (w.first + li, w.row(li));
            for (k, col) in x.cols.iter().enumerate() {
                let xi = col[i];
                out[li * dim + k] = row
                    .iter()
                    .zip(col)
                    .enumerate()
                    .map(|(j, (&wij, &xj))| if j == i { 0.0 } else { wij * (xi - xj) })
                    .sum();
            }
        }
    }

    /// Solves `V x = b` (own rows of `b`) by conjugate gradients from `z`; returns the
    /// own rows of `x`.
    fn solve(&self, w: &Rows, z: &Columns, b: &[f64]) -> Result<Vec<f64>, Error> {
        let dim = z.cols.len();
        let own = |c: &Columns| -> Vec<f64> {
            (0..w.len()).flat_map(|li| c.cols.iter().map(move |col| col[w.first + li])).collect()
        };
        let dot = |a: &[f64], b: &[f64]| -> Result<f64, Error> {
            let mut s = [a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>()];
            self.comm.allreduce(&mut s, Op::Sum)?;
            Ok(s[0])
        };
        let mut x = own(z);
        let mut q = vec![0.0; x.len()];
        self.laplacian(w, z, &mut q);
        let mut r: Vec<f64> = b.iter().zip(&q).map(|(b, q)| b - q).collect();
        let mut p = r.clone();
        let (mut rs, bb) = (dot(&r, &r)?, dot(b, b)?);
        for _ in 0..self.cg_max {
            if rs.sqrt() <= self.cg_tol * bb.sqrt().max(f64::MIN_POSITIVE) {
                break;
            }
            let full = self.gather(&p, dim)?;
            self.laplacian(w, &full, &mut q);
            let pq = dot(&p, &q)?;
            if pq <= 0.0 {
                break;
            }
            let alpha = rs / pq;
            x.iter_mut().zip(&p).for_each(|(x, p)| *x += alpha * p);
            r.iter_mut().zip(&q).for_each(|(r, q)| *r -= alpha * q);
            let next = dot(&r, &r)?;
            p.iter_mut().zip(&r).for_each(|(p, r)| *p = r + next / rs * *p);
            rs = next;
        }
        Ok(x)
    }
}

/// Points handled together: the loops over a block's lanes become vector code.
const LANES: usize = 8;

/// Row `i` of `B(Z) Z` (into `out`, `dim` values) and the row's stress terms
/// `(Σ w (d − δ̂)², Σ w δ̂²)`, `zi` being point `i`'s coordinates, `cols` every point's by
/// dimension, `delta` the row's dissimilarities lowered by `shift` (clamped at zero) and
/// `w` its weights. `B`'s entry for `j` is `w δ̂ / d` (0 where `d` is 0: the point itself
/// or one at the same place).
fn row_sums(
    cols: &[&[f64]],
    zi: &[f64],
    delta: &[f64],
    shift: f64,
    w: impl Fn(usize) -> f64,
    out: &mut [f64],
) -> (f64, f64) {
    let n = delta.len();
    let (mut num, mut den) = ([0.0; LANES], [0.0; LANES]);
    let mut acc = vec![[0.0; LANES]; zi.len()];
    let whole = n - n % LANES;
    for j0 in (0..whole).step_by(LANES) {
        let mut d2 = [0.0; LANES];
        for (col, &x) in cols.iter().zip(zi) {
            let col = &col[j0..j0 + LANES];
            for l in 0..LANES {
                let t = x - col[l];
                d2[l] += t * t;
            }
        }
        let mut c = [0.0; LANES];
        for l in 0..LANES {
            let (wj, dist) = (w(j0 + l), d2[l].sqrt());
            let dh = (delta[j0 + l] - shift).max(0.0);
            num[l] += wj * (dist - dh) * (dist - dh);
            den[l] += wj * dh * dh;
            c[l] = if dist > 0.0 { wj * dh / dist } else { 0.0 };
        }
        for ((col, &x), a) in cols.iter().zip(zi).zip(acc.iter_mut()) {
            let col = &col[j0..j0 + LANES];
            for l in 0..LANES {
                a[l] += c[l] * (x - col[l]);
            }
        }
    }
    let (mut num, mut den) = (num.iter().sum::<f64>(), den.iter().sum::<f64>());
    for (o, a) in out.iter_mut().zip(&acc) {
        *o = a.iter().sum();
    }
    for j in whole..n {
        let d2: f64 = cols.iter().zip(zi).map(|(col, &x)| (x - col[j]) * (x - col[j])).sum();
        let (wj, dist, dh) = (w(j), d2.sqrt(), (delta[j] - shift).max(0.0));
        num += wj * (dist - dh) * (dist - dh);
        den += wj * dh * dh;
        let c = if dist > 0.0 { wj * dh / dist } else { 0.0 };
        for ((col, &x), o) in cols.iter().zip(zi).zip(out.iter_mut()) {
            *o += c * (x - col[j]);
        }
    }
    (num, den)
}
