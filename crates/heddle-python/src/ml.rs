//! Native kernels for the machine-learning loops people write over `heddle.data`
//! (`heddle.ml` wraps them): Lloyd's step of K-means — each point to its nearest center,
//! and per center the sum of its points and their count — in one pass over the points,
//! where numpy materializes an n × k distance matrix and reads it twice.

use pyo3::prelude::*;

use crate::buffer::{Buffer, Dtype};
use crate::errors::argument;

/// Points handled together: their best distances and centers stay in registers while
/// every center is tried, and the compiler turns the loop over them into vector code.
const LANES: usize = 8;

/// Adds to `out` (`k` rows of `d + 1`: the sum of the points nearest to the center, then
/// their count) the points of `points` (`n` rows of `d`), nearest by squared Euclidean
/// distance to `centers` (`k` rows of `d`); ties go to the first center, as numpy's
/// `argmin` has them.
pub(crate) fn nearest_sums(points: &[f64], centers: &[f64], d: usize, out: &mut [f64]) {
    match d {
        1 => nearest_sums_of::<1>(points, centers, out),
        2 => nearest_sums_of::<2>(points, centers, out),
        3 => nearest_sums_of::<3>(points, centers, out),
        4 => nearest_sums_of::<4>(points, centers, out),
        _ => nearest_sums_any(points, centers, d, out),
    }
}

/// [`nearest_sums`] for `D` dimensions known when compiled: the loops over dimensions
/// unroll and the one over a block's points becomes vector code.
fn nearest_sums_of<const D: usize>(points: &[f64], centers: &[f64], out: &mut [f64]) {
    // |p - c|² = |p|² + |c|² - 2 p·c, and |p|² is the same for every center.
    let norms: Vec<f64> = centers.chunks_exact(D).map(|c| c.iter().map(|x| x * x).sum()).collect();
    let twice: Vec<[f64; D]> =
        centers.chunks_exact(D).map(|c| std::array::from_fn(|t| 2.0 * c[t])).collect();
    let mut rows = points.chunks_exact(D * LANES);
    for block in rows.by_ref() {
        // The block by dimension: lane i of coordinate t.
        let coords: [[f64; LANES]; D] =
            std::array::from_fn(|t| std::array::from_fn(|i| block[i * D + t]));
        let mut best = [f64::INFINITY; LANES];
        let mut at = [0u32; LANES];
        for (j, (c, n)) in twice.iter().zip(&norms).enumerate() {
            let mut dist = [*n; LANES];
            for t in 0..D {
                for i in 0..LANES {
                    dist[i] -= coords[t][i] * c[t];
                }
            }
            for i in 0..LANES {
                let closer = dist[i] < best[i];
                best[i] = if closer { dist[i] } else { best[i] };
                at[i] = if closer { j as u32 } else { at[i] };
            }
        }
        for i in 0..LANES {
            let j = at[i] as usize;
            add(&mut out[j * (D + 1)..(j + 1) * (D + 1)], &block[i * D..(i + 1) * D]);
        }
    }
    nearest_sums_any(rows.remainder(), centers, D, out);
}

/// [`nearest_sums`] point by point, for any number of dimensions.
fn nearest_sums_any(points: &[f64], centers: &[f64], d: usize, out: &mut [f64]) {
    let norms: Vec<f64> = centers.chunks_exact(d).map(|c| c.iter().map(|x| x * x).sum()).collect();
    for p in points.chunks_exact(d) {
        let mut best = (f64::INFINITY, 0);
        for (j, c) in centers.chunks_exact(d).enumerate() {
            let dot: f64 = p.iter().zip(c).map(|(a, b)| a * 2.0 * b).sum();
            if norms[j] - dot < best.0 {
                best = (norms[j] - dot, j);
            }
        }
        add(&mut out[best.1 * (d + 1)..(best.1 + 1) * (d + 1)], p);
    }
}

fn add(row: &mut [f64], p: &[f64]) {
    let d = p.len();
    row[..d].iter_mut().zip(p).for_each(|(s, x)| *s += x);
    row[d] += 1.0;
}

/// ``nearest_sums(points, centers, dims, out)``: adds to ``out`` (``k × (dims + 1)``
/// float64, C order) per center the sum of the ``points`` (``n × dims``) nearest to it and
/// their count; ``centers`` is ``k × dims``. The GIL is released meanwhile.
#[pyfunction]
fn nearest_sums_into(
    py: Python<'_>,
    points: &Bound<'_, PyAny>,
    centers: &Bound<'_, PyAny>,
    dims: usize,
    out: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let (p, c, o) = (
        Buffer::get(points, false, "points")?,
        Buffer::get(centers, false, "centers")?,
        Buffer::get(out, true, "out")?,
    );
    for (b, what) in [(&p, "points"), (&c, "centers"), (&o, "out")] {
        if b.dtype != Dtype::F64 {
            return Err(argument(format!("{what} must hold float64 values, not {}", b.describe())));
        }
    }
    let k = c.elements() / dims.max(1);
    if dims == 0 || k == 0 || c.elements() != k * dims || p.elements() % dims != 0 {
        return Err(argument(format!(
            "points ({} values) and centers ({} values) must be rows of {dims} values, with \
             at least one center",
            p.elements(),
            c.elements()
        )));
    }
    if o.elements() != k * (dims + 1) {
        return Err(argument(format!(
            "out must hold {k} rows of {} values (sums and a count), not {} values",
            dims + 1,
            o.elements()
        )));
    }
    let (pr, cr, or) = (p.region(), c.region(), o.region());
    if ![pr, cr, or].iter().all(|r| r.aligned_for(8)) {
        return Err(argument("points, centers and out must be aligned to 8 bytes (numpy's are)"));
    }
    if or.overlaps(pr) || or.overlaps(cr) {
        return Err(argument("out must not share memory with points or centers"));
    }
    py.detach(|| {
        // SAFETY: the three buffers stay exported (`out` writable, apart from the others)
        // until they drop after this call, and are aligned for f64 (checked above).
        let (points, centers, out) =
            unsafe { (pr.typed::<f64>(), cr.typed::<f64>(), or.typed_mut::<f64>()) };
        nearest_sums(points, centers, dims, out);
    });
    Ok(())
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(nearest_sums_into, m)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a plain argmin over every center, for every remainder of the 8-point blocks.
    #[test]
    fn sums_match_a_plain_argmin() {
        let centers = [0.0, 0.0, 10.0, 0.0, 0.0, 10.0, 5.0, 5.0];
        for n in 0..20 {
            let points: Vec<f64> = (0..2 * n).map(|i| ((i * 37 % 23) as f64) * 0.7 - 3.0).collect();
            let mut got = vec![0.0; 4 * 3];
            nearest_sums(&points, &centers, 2, &mut got);
            let mut want = vec![0.0; 4 * 3];
            for p in points.chunks_exact(2) {
                let dist = |j: usize| {
                    (p[0] - centers[2 * j]).powi(2) + (p[1] - centers[2 * j + 1]).powi(2)
                };
                let j = (0..4).fold(0, |b, j| if dist(j) < dist(b) { j } else { b });
                want[3 * j] += p[0];
                want[3 * j + 1] += p[1];
                want[3 * j + 2] += 1.0;
            }
            assert_eq!(got, want, "n = {n}");
        }
    }
}
