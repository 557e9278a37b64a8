//! Multidimensional scaling by DA-SMACOF (the thesis' chapters 3–4): points placed in
//! `dim` dimensions so that their distances match given dissimilarities `δ`, minimizing the
//! weighted stress `Σ w (d − δ)²`; reported normalized, `Σ w (d − δ)² / Σ w δ²`.
//!
//! The dissimilarity matrix is split by rows over the workers ([`Rows`]); every worker
//! holds all coordinates. Each iteration (the Guttman transform) computes its rows of
//! `B(Z) Z` and its part of the stress, and the new coordinates are gathered on every
//! worker (`allgatherv`; the stress with `allreduce`). Unweighted, the update is `B(Z) Z / n`;
//! weighted, it solves `V X = B(Z) Z` by conjugate gradients, each step's direction
//! gathered the same way. Deterministic annealing (on by default) first fits the
//! dissimilarities lowered by a shift that starts at half the largest and shrinks
//! geometrically (only the large distances count at first, which keeps the fit out of
//! local minima), then fits them as they are.
//!
//! ```
//! use heddle_apps::mds::{mds, Options, Rows};
//! // Four corners of a unit square: their distances, embedded again in 2-D.
//! let p = [(0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0)];
//! let full: Vec<f64> = p.iter()
//!     .flat_map(|a| p.iter().map(move |b| f64::hypot(a.0 - b.0, a.1 - b.1)))
//!     .collect();
//! let comms = heddle_comm::local_world(2, heddle_comm::CommConfig::default())?;
//! std::thread::scope(|s| {
//!     for c in &comms {
//!         let rows = Rows::share(&full, 4, c.rank(), c.size());
//!         s.spawn(move || {
//!             let fit = mds(c, &rows, None, None, &Options { dim: 2, ..Options::default() })
//!                 .unwrap();
//!             assert!(fit.stress < 1e-6, "stress {}", fit.stress);
//!         });
//!     }
//! });
//! # Ok::<(), heddle_comm::Error>(())
//! ```

mod matrix;
mod smacof;

use std::path::PathBuf;

use heddle_comm::{Communicator, Op};

pub use matrix::{read_coords, write_coords, Rows};
use smacof::{Columns, Smacof};

/// What can go wrong in an MDS run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bad input file or matrix: the message names the entry and what to do.
    #[error("{origin}: {message}")]
    Input {
        /// The file (or the array) it came from.
        origin: String,
        /// What is wrong with it.
        message: String,
    },
    /// Arguments that do not fit the matrix.
    #[error("{0}")]
    InvalidArgument(String),
    /// The output could not be written.
    #[error("cannot write {path}: {message}")]
    Output {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// A collective failed.
    #[error(transparent)]
    Comm(#[from] heddle_comm::Error),
}

/// Settings of [`mds`].
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Dimensions of the embedding.
    pub dim: usize,
    /// Deterministic annealing before the final fit.
    pub anneal: bool,
    /// Iterations of the final fit at most.
    pub max_iter: usize,
    /// The final fit stops when the normalized stress falls by less than this, relative.
    pub tol: f64,
    /// Seed of the random start (ignored with an initial configuration).
    pub seed: u64,
    /// Shift factor per annealing step (the next shift is this times the last).
    pub cooling: f64,
    /// Iterations per annealing step at most.
    pub anneal_iter: usize,
    /// Relative residual at which a conjugate-gradient solve (weighted) stops, and its
    /// iterations at most.
    pub cg_tol: f64,
    /// See `cg_tol`.
    pub cg_max: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            dim: 3,
            anneal: true,
            max_iter: 300,
            tol: 1e-6,
            seed: 1,
            cooling: 0.8,
            anneal_iter: 30,
            cg_tol: 1e-6,
            cg_max: 100,
        }
    }
}

/// The result of [`mds`].
#[derive(Debug, Clone, PartialEq)]
pub struct Embedding {
    /// `n × dim` coordinates, row-major, centred on the origin.
    pub coords: Vec<f64>,
    /// Normalized stress `Σ w (d − δ)² / Σ w δ²` of `coords`.
    pub stress: f64,
    /// Guttman transforms done in all (annealing included).
    pub iterations: usize,
    /// Annealing steps (shifts) done.
    pub temperatures: usize,
}

/// Embeds the points whose dissimilarities this worker holds rows of (`delta`; `weights`
/// alike, or all 1), from `init` (`n × dim`, row-major) or a seeded random start.
/// Collective: every worker of `comm` calls it with its own rows.
///
/// # Errors
/// [`Error::InvalidArgument`] for a `dim` of 0 or an `init` of the wrong size, or weights
/// of another shape; [`Error::Comm`] if a collective fails.
pub fn mds(
    comm: &Communicator,
    delta: &Rows,
    weights: Option<&Rows>,
    init: Option<&[f64]>,
    opts: &Options,
) -> Result<Embedding, Error> {
    let (n, dim) = (delta.n, opts.dim);
    if dim == 0 {
        return Err(Error::InvalidArgument("dim must be at least 1".into()));
    }
    if let Some(w) =
        weights.filter(|w| w.n != n || w.first != delta.first || w.len() != delta.len())
    {
        return Err(Error::InvalidArgument(format!(
            "weights hold rows {}..{} of {} points, dissimilarities rows {}..{} of {n}",
            w.first,
            w.first + w.len(),
            w.n,
            delta.first,
            delta.first + delta.len()
        )));
    }
    let start = match init {
        Some(x) if x.len() != n * dim => {
            return Err(Error::InvalidArgument(format!(
                "init holds {} values; {n} points in {dim} dimensions take {}",
                x.len(),
                n * dim
            )))
        }
        Some(x) => x.to_vec(),
        None => random_start(n, dim, opts.seed),
    };
    let mut z = Columns::from_rows(&start, dim);
    z.center();
    let mut run = Smacof::new(comm, delta, weights, (opts.cg_tol, opts.cg_max));
    let (mut iterations, mut temperatures) = (0, 0);
    if opts.anneal && init.is_none() {
        let mut top = [delta.values.iter().copied().fold(0.0, f64::max)];
        comm.allreduce(&mut top, Op::Max)?;
        let mut shift = top[0] / 2.0;
        while shift > top[0] * 0.01 {
            let (fit, done, _) = fit(&mut run, z, shift, opts.anneal_iter, 1e-4)?;
            (z, iterations, temperatures) = (fit, iterations + done, temperatures + 1);
            shift *= opts.cooling.clamp(0.0, 0.99);
        }
    }
    let (z, done, stress) = fit(&mut run, z, 0.0, opts.max_iter, opts.tol)?;
    let stress = match stress {
        Some(s) => s,
        None => run.guttman(&z, 0.0, &mut vec![0.0; delta.len() * dim])?,
    };
    Ok(Embedding { coords: z.to_rows(), stress, iterations: iterations + done, temperatures })
}

/// Guttman transforms from `z` for dissimilarities lowered by `shift`, until the stress
/// falls by less than `tol` (relative) or after `max_iter`; returns the coordinates and
/// the transforms done, and the stress of the coordinates returned when it stopped on
/// `tol` (`None` after `max_iter`: the last transform's result was not measured).
fn fit(
    run: &mut Smacof<'_>,
    mut z: Columns,
    shift: f64,
    max_iter: usize,
    tol: f64,
) -> Result<(Columns, usize, Option<f64>), Error> {
    let mut bz = vec![0.0; run.delta.len() * z.cols.len()];
    let mut last = f64::INFINITY;
    for i in 0..max_iter {
        let stress = run.guttman(&z, shift, &mut bz)?;
        if last - stress <= tol * last.min(1.0).max(stress) {
            return Ok((z, i, Some(stress)));
        }
        last = stress;
        z = run.update(&z, &bz)?;
    }
    Ok((z, max_iter, None))
}

/// `n × dim` coordinates uniform in the unit cube, the same on every worker.
fn random_start(n: usize, dim: usize, seed: u64) -> Vec<f64> {
    let mut x = seed ^ 0x9E37_79B9_7F4A_7C15;
    (0..n * dim)
        .map(|_| {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        })
        .collect()
}
