//! The K-means dataset: seeded points in Gaussian blobs (point i can be generated alone,
//! so each worker makes just its share), and readers of points from CSV (`x,y` lines) or
//! `.npy` (float64, shape (n, 2), C order).

use std::path::Path;

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
    let text = String::from_utf8(bytes).map_err(|_| format!("{} is neither .npy nor text CSV", path.display()))?;
    let mut points = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || (n == 0 && line.chars().next().is_some_and(char::is_alphabetic)) {
            continue; // blank lines and a header
        }
        let mut it = line.split(',').map(|f| f.trim().parse::<f64>());
        match (it.next(), it.next(), it.next()) {
            (Some(Ok(x)), Some(Ok(y)), None) => points.push([x, y]),
            _ => return Err(format!("{} line {}: expected two numbers `x,y`, got {line:?}", path.display(), n + 1)),
        }
    }
    Ok(points)
}

fn read_npy(bytes: &[u8]) -> Result<Vec<[f64; 2]>, String> {
    let (header_len, start) = match bytes.get(6) {
        Some(1) => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        Some(2 | 3) => (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12),
        _ => return Err("unsupported .npy version".into()),
    };
    let header = std::str::from_utf8(bytes.get(start..start + header_len).ok_or("truncated .npy header")?).map_err(|_| "bad .npy header")?;
    let compact: String = header.chars().filter(|c| !c.is_whitespace()).collect();
    if !compact.contains("'descr':'<f8'") || !compact.contains("'fortran_order':False") {
        return Err(format!("expected little-endian float64 in C order, header says {header:?}"));
    }
    let shape = compact.split("'shape':(").nth(1).and_then(|s| s.split(')').next()).ok_or("no shape in .npy header")?;
    let dims: Vec<usize> = shape.split(',').filter(|d| !d.is_empty()).map(|d| d.parse().map_err(|_| "bad shape")).collect::<Result<_, _>>()?;
    if dims.len() != 2 || dims[1] != 2 {
        return Err(format!("expected shape (n, 2), got ({shape})"));
    }
    let data = &bytes[start + header_len..];
    if data.len() < dims[0] * 16 {
        return Err("truncated .npy data".into());
    }
    Ok(data[..dims[0] * 16]
        .chunks_exact(16)
        .map(|c| [f64::from_le_bytes(c[..8].try_into().expect("8 bytes")), f64::from_le_bytes(c[8..].try_into().expect("8 bytes"))])
        .collect())
}
