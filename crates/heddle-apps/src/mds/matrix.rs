//! Dissimilarity matrices for MDS: a worker's block of rows, read from `.npy` files and
//! checked (square, symmetric, zero diagonal, finite, non-negative), and coordinates
//! written back as `.npy`.

use std::path::{Path, PathBuf};

use npyz::WriterBuilder;

use super::Error;

/// Relative difference allowed between `m[i][j]` and `m[j][i]` (a float32 file written
/// from float64 data rounds them alike; anything larger is not symmetric).
const SYMMETRY_TOLERANCE: f64 = 1e-6;

/// One worker's rows of a symmetric `n × n` matrix: rows `first .. first + len`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rows {
    /// The matrix's order.
    pub n: usize,
    /// The first row held here.
    pub first: usize,
    /// The rows held, `n` values each, row after row.
    pub values: Vec<f64>,
}

impl Rows {
    /// Worker `rank`'s share (of `size`) of the full row-major `n × n` matrix `full`:
    /// rows `n * rank / size .. n * (rank + 1) / size`.
    ///
    /// # Panics
    /// If `full` does not hold `n * n` values or `rank >= size`.
    pub fn share(full: &[f64], n: usize, rank: usize, size: usize) -> Rows {
        assert!(full.len() == n * n && rank < size, "an n × n matrix and a rank of the size");
        let (first, end) = (n * rank / size, n * (rank + 1) / size);
        Rows { n, first, values: full[first * n..end * n].to_vec() }
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        self.values.len() / self.n.max(1)
    }

    /// Whether no row is held here.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Row `first + i`.
    pub(super) fn row(&self, i: usize) -> &[f64] {
        &self.values[i * self.n..(i + 1) * self.n]
    }

    /// Worker `rank`'s share of the matrix in the `.npy` file at `path`, checked whole
    /// (every worker reaches the same verdict): `what` names the matrix in errors.
    ///
    /// # Errors
    /// [`Error::Input`] naming the file and, for a bad entry, its row and column.
    pub fn read(path: &Path, what: &str, rank: usize, size: usize) -> Result<Rows, Error> {
        let (n, full) = read_square(path)?;
        Rows::checked(&full, n, what, &path.display().to_string(), rank, size)
    }

    /// Worker `rank`'s share of the row-major `n × n` matrix `full`, checked whole as
    /// [`Rows::read`] checks a file; `source` names the matrix's origin in errors.
    ///
    /// # Errors
    /// [`Error::Input`] naming `source` and the bad entry; [`Error::InvalidArgument`] if
    /// `full` does not hold `n * n` values.
    pub fn checked(
        full: &[f64],
        n: usize,
        what: &str,
        source: &str,
        rank: usize,
        size: usize,
    ) -> Result<Rows, Error> {
        if full.len() != n * n || rank >= size {
            return Err(Error::InvalidArgument(format!(
                "{what}: {} values are not a {n} × {n} matrix",
                full.len()
            )));
        }
        check(full, n, what).map_err(|message| Error::Input { origin: source.into(), message })?;
        Ok(Rows::share(full, n, rank, size))
    }
}

fn bad(path: &Path, message: String) -> Error {
    Error::Input { origin: path.display().to_string(), message }
}

/// The bytes of the file at `path`.
fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| bad(path, format!("cannot read it: {e}")))
}

/// The `.npy` array in `bytes`, read from `path`.
fn parse<'a>(path: &Path, bytes: &'a [u8]) -> Result<npyz::NpyFile<&'a [u8]>, Error> {
    npyz::NpyFile::new(bytes).map_err(|e| bad(path, format!("not a .npy file: {e}")))
}

/// `n × dim` float64 coordinates (C order) from the `.npy` file at `path`: a start for
/// [`super::mds`].
///
/// # Errors
/// [`Error::Input`] naming the file if it is not such an array.
pub fn read_coords(path: &Path, n: usize, dim: usize) -> Result<Vec<f64>, Error> {
    let bytes = read(path)?;
    let npy = parse(path, &bytes)?;
    if npy.shape() != [n as u64, dim as u64] || npy.order() != npyz::Order::C {
        let shape = npy.shape().to_vec();
        return Err(bad(path, format!("holds shape {shape:?}; give {n} × {dim} coordinates")));
    }
    if npy.dtype().descr() != "'<f8'" {
        return Err(bad(path, format!("holds {} values; give float64", npy.dtype().descr())));
    }
    npy.into_vec::<f64>().map_err(|e| bad(path, format!("cannot read its data: {e}")))
}

/// The values of a square float32 or float64 C-order `.npy` matrix, as float64.
fn read_square(path: &Path) -> Result<(usize, Vec<f64>), Error> {
    let bytes = read(path)?;
    let npy = parse(path, &bytes)?;
    let shape = npy.shape().to_vec();
    let [rows, cols] = shape[..] else {
        return Err(bad(path, format!("holds an array of shape {shape:?}; give a square matrix")));
    };
    if rows != cols {
        return Err(bad(path, format!("is {rows} × {cols}; a dissimilarity matrix is square")));
    }
    if npy.order() != npyz::Order::C {
        return Err(bad(
            path,
            "is in Fortran order; save it in C order (np.save of a \
                              C-contiguous array)"
                .into(),
        ));
    }
    let dtype = npy.dtype().descr();
    let read = |e: std::io::Error| bad(path, format!("cannot read its data: {e}"));
    let values = match dtype.as_str() {
        "'<f8'" => npy.into_vec::<f64>().map_err(read)?,
        "'<f4'" => npy.into_vec::<f32>().map_err(read)?.into_iter().map(f64::from).collect(),
        other => {
            return Err(bad(path, format!("holds {other} values; give float32 or float64")));
        }
    };
    Ok((rows as usize, values))
}

/// Checks a dissimilarity (or weight) matrix: finite, non-negative, zero on the diagonal
/// (weights may have anything there), in one pass in row order; then symmetric, tile by
/// tile (a row of one tile against a column of its mirror stays in the cache).
fn check(m: &[f64], n: usize, what: &str) -> Result<(), String> {
    let weights = what == "weights";
    for (at, &v) in m.iter().enumerate() {
        let (i, j) = (at / n, at % n);
        if !v.is_finite() || v < 0.0 {
            return Err(format!("{what}[{i}, {j}] = {v}: entries must be finite and non-negative"));
        }
        if i == j && v != 0.0 && !weights {
            return Err(format!("{what}[{i}, {j}] = {v}: the diagonal must be zero"));
        }
    }
    const TILE: usize = 64;
    for bi in (0..n).step_by(TILE) {
        for bj in (bi..n).step_by(TILE) {
            for i in bi..(bi + TILE).min(n) {
                for j in bj.max(i + 1)..(bj + TILE).min(n) {
                    let (v, t) = (m[i * n + j], m[j * n + i]);
                    if (v - t).abs() > SYMMETRY_TOLERANCE * v.abs().max(t.abs()) {
                        return Err(format!(
                            "{what}[{i}, {j}] = {v} but {what}[{j}, {i}] = {t}: the matrix \
                             must be symmetric"
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Writes `coords` (`n × dim`, row-major) to `path` as a float64 `.npy`: to a temporary
/// file beside it, renamed over `path` once complete.
///
/// # Errors
/// [`Error::Output`] naming the file.
pub fn write_coords(path: &Path, coords: &[f64], dim: usize) -> Result<(), Error> {
    let fail =
        |e: std::io::Error| Error::Output { path: path.to_path_buf(), message: e.to_string() };
    let name = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    let pending: PathBuf = path.with_file_name(format!(".{name}.pending-{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let file = std::io::BufWriter::new(std::fs::File::create(&pending)?);
        let shape = [(coords.len() / dim.max(1)) as u64, dim as u64];
        let mut w =
            npyz::WriteOptions::new().default_dtype().shape(&shape).writer(file).begin_nd()?;
        w.extend(coords.iter().copied())?;
        w.finish()?;
        std::fs::rename(&pending, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&pending);
        fail(e)
    })
}
