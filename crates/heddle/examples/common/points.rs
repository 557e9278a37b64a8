//! The K-means dataset: seeded points in Gaussian blobs (point i can be generated alone,
//! so each worker makes just its share), and readers of points from CSV (`x,y` lines) or
//! `.npy` (float64, shape (n, 2), C order).

#![allow(dead_code)] // each example uses part of it

use std::path::{Path, PathBuf};

/// Points in the standard dataset.
pub(crate) const POINTS: u64 = 1_000_000;
/// Blobs (and centers) in the standard dataset.
pub(crate) const BLOBS: usize = 16;

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn unit(z: u64) -> f64 {
    ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

/// The center of blob `b`: spread over a 100 x 100 square.
fn blob_center(seed: u64, b: usize) -> [f64; 2] {
    let h = mix(seed ^ 0xb10b ^ (b as u64) << 32);
    [unit(h) * 100.0, unit(mix(h)) * 100.0]
}

/// Point `i`: a blob picked at random, plus Gaussian noise (Box-Muller, sigma 2).
pub(crate) fn point(seed: u64, i: u64) -> [f64; 2] {
    let h = mix(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ i);
    let c = blob_center(seed, (h % BLOBS as u64) as usize);
    let (u1, u2) = (unit(mix(h ^ 1)), unit(mix(h ^ 2)));
    let r = (-2.0 * u1.ln()).sqrt() * 2.0;
    let t = std::f64::consts::TAU * u2;
    [c[0] + r * t.cos(), c[1] + r * t.sin()]
}

/// Reads every point of a CSV or `.npy` file.
pub(crate) fn read(path: &Path) -> Result<Vec<[f64; 2]>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.starts_with(b"\x93NUMPY") {
        return read_npy(&bytes).map_err(|e| format!("{}: {e}", path.display()));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("{} is neither .npy nor text CSV", path.display()))?;
    let mut points = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || (n == 0 && line.chars().next().is_some_and(char::is_alphabetic)) {
            continue; // blank lines and a header
        }
        let mut it = line.split(',').map(|f| f.trim().parse::<f64>());
        match (it.next(), it.next(), it.next()) {
            (Some(Ok(x)), Some(Ok(y)), None) => points.push([x, y]),
            _ => {
                return Err(format!(
                    "{} line {}: expected two numbers `x,y`, got {line:?}",
                    path.display(),
                    n + 1
                ))
            }
        }
    }
    Ok(points)
}

fn read_npy(bytes: &[u8]) -> Result<Vec<[f64; 2]>, String> {
    let (header_len, start) = match bytes.get(6) {
        Some(1) => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        Some(2 | 3) => {
            (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12)
        }
        _ => return Err("unsupported .npy version".into()),
    };
    let header =
        std::str::from_utf8(bytes.get(start..start + header_len).ok_or("truncated .npy header")?)
            .map_err(|_| "bad .npy header")?;
    let compact: String = header.chars().filter(|c| !c.is_whitespace()).collect();
    if !compact.contains("'descr':'<f8'") || !compact.contains("'fortran_order':False") {
        return Err(format!("expected little-endian float64 in C order, header says {header:?}"));
    }
    let shape = compact
        .split("'shape':(")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .ok_or("no shape in .npy header")?;
    let dims: Vec<usize> = shape
        .split(',')
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().map_err(|_| "bad shape"))
        .collect::<Result<_, _>>()?;
    if dims.len() != 2 || dims[1] != 2 {
        return Err(format!("expected shape (n, 2), got ({shape})"));
    }
    let data = &bytes[start + header_len..];
    if data.len() < dims[0] * 16 {
        return Err("truncated .npy data".into());
    }
    Ok(data[..dims[0] * 16]
        .chunks_exact(16)
        .map(|c| {
            [
                f64::from_le_bytes(c[..8].try_into().expect("8 bytes")),
                f64::from_le_bytes(c[8..].try_into().expect("8 bytes")),
            ]
        })
        .collect())
}

/// Adds each point to the partial sums `(x, y, count)` of its nearest center
/// (`sums.len() == 3 * centers.len()`).
pub(crate) fn assign(points: &[[f64; 2]], centers: &[[f64; 2]], sums: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { assign_avx2(points, centers, sums) };
    }
    assign_portable(points, centers, sums);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn assign_avx2(points: &[[f64; 2]], centers: &[[f64; 2]], sums: &mut [f64]) {
    assign_portable(points, centers, sums);
}

/// Points in chunks copied to coordinate arrays: for each center, the distances of the
/// whole chunk (a loop the compiler vectorizes), keeping the nearest center per point.
#[inline(always)]
fn assign_portable(points: &[[f64; 2]], centers: &[[f64; 2]], sums: &mut [f64]) {
    const CHUNK: usize = 256;
    let (mut xs, mut ys) = ([0.0f64; CHUNK], [0.0f64; CHUNK]);
    let (mut best, mut which) = ([0.0f64; CHUNK], [0.0f64; CHUNK]);
    for chunk in points.chunks(CHUNK) {
        let n = chunk.len();
        for (i, p) in chunk.iter().enumerate() {
            xs[i] = p[0];
            ys[i] = p[1];
        }
        let (xs, ys, best, which) = (&xs[..n], &ys[..n], &mut best[..n], &mut which[..n]);
        best.fill(f64::INFINITY);
        for (c, center) in centers.iter().enumerate() {
            let (x0, y0, label) = (center[0], center[1], c as f64);
            for i in 0..n {
                let (dx, dy) = (xs[i] - x0, ys[i] - y0);
                let d = dx * dx + dy * dy;
                let closer = d < best[i];
                best[i] = if closer { d } else { best[i] };
                which[i] = if closer { label } else { which[i] };
            }
        }
        for i in 0..n {
            let c = which[i] as usize * 3;
            sums[c] += xs[i];
            sums[c + 1] += ys[i];
            sums[c + 2] += 1.0;
        }
    }
}

/// New centers from summed coordinates and counts (a center without points stays put).
pub(crate) fn update(centers: &mut [[f64; 2]], sums: &[f64]) {
    for (c, s) in centers.iter_mut().zip(sums.chunks_exact(3)) {
        if s[2] > 0.0 {
            *c = [s[0] / s[2], s[1] / s[2]];
        }
    }
}

/// Plain Lloyd's algorithm, one point at a time (the reference).
pub(crate) fn lloyd(points: &[[f64; 2]], first: &[[f64; 2]], iterations: u64) -> Vec<[f64; 2]> {
    let mut centers = first.to_vec();
    for _ in 0..iterations {
        let mut sums = vec![0.0f64; centers.len() * 3];
        for p in points {
            let mut best = (f64::INFINITY, 0);
            for (c, center) in centers.iter().enumerate() {
                let d = (p[0] - center[0]).powi(2) + (p[1] - center[1]).powi(2);
                if d < best.0 {
                    best = (d, c);
                }
            }
            sums[best.1 * 3] += p[0];
            sums[best.1 * 3 + 1] += p[1];
            sums[best.1 * 3 + 2] += 1.0;
        }
        update(&mut centers, &sums);
    }
    centers
}

/// The K-means examples' input flags.
#[derive(Debug, clap::Args)]
pub(crate) struct PointsInput {
    /// Points as CSV (`x,y` lines) or .npy (float64, shape (n, 2)).
    #[arg(long, conflicts_with = "generate")]
    pub(crate) input: Option<PathBuf>,
    /// Generate --points points in 16 Gaussian blobs instead.
    #[arg(long)]
    pub(crate) generate: bool,
    /// Seed of the generated points.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Points to generate.
    #[arg(long, default_value_t = POINTS)]
    pub(crate) points: u64,
    /// Centers (the first k points start as centers).
    #[arg(long, default_value_t = BLOBS)]
    pub(crate) k: usize,
    /// Iterations.
    #[arg(long, default_value_t = 10)]
    pub(crate) iterations: u64,
    /// Write the final centers as CSV (`centers.csv`) here.
    #[arg(long)]
    pub(crate) output: Option<PathBuf>,
}

impl PointsInput {
    /// Every point (read, or generated).
    pub(crate) fn all(&self) -> Result<Vec<[f64; 2]>, String> {
        match &self.input {
            Some(path) => read(path),
            None => Ok((0..self.points).map(|i| point(self.seed, i)).collect()),
        }
    }

    /// Checks the flags: an input, and at least k points (`n`).
    pub(crate) fn check(&self, n: u64) -> Result<(), String> {
        if self.input.is_none() && !self.generate {
            return Err("give --input FILE or --generate".into());
        }
        if self.k == 0 || n < self.k as u64 {
            return Err(format!("--k {} needs at least that many points (there are {n})", self.k));
        }
        Ok(())
    }

    /// Writes `centers.csv` to `--output`, if given.
    pub(crate) fn write(&self, centers: &[[f64; 2]]) -> std::io::Result<()> {
        let Some(dir) = &self.output else { return Ok(()) };
        std::fs::create_dir_all(dir)?;
        let mut text = String::from("x,y\n");
        for c in centers {
            text.push_str(&format!("{},{}\n", c[0], c[1]));
        }
        std::fs::write(dir.join("centers.csv"), text)
    }
}
