//! Amounts of bytes as people write them: `200MiB`, `1.5GiB`, `64Ki`, `2G`, `4096`.
//!
//! Binary suffixes (`KiB`, `MiB`, `GiB`, `TiB`, and Kubernetes' `Ki`, `Mi`, `Gi`, `Ti`) are
//! powers of 1024; decimal ones (`kB`/`KB`, `MB`, `GB`, `TB`, and Kubernetes' `k`, `M`, `G`,
//! `T`) powers of 1000, as Kubernetes reads them; `B` or no suffix are bytes.

/// Parses an amount of bytes.
///
/// ```
/// use heddle_task::parse_bytes;
/// assert_eq!(parse_bytes("200MiB"), Ok(200 << 20));
/// assert_eq!(parse_bytes("1.5 GiB"), Ok(3 << 29));
/// assert_eq!(parse_bytes("2G"), Ok(2_000_000_000));
/// assert_eq!(parse_bytes("4096"), Ok(4096));
/// assert!(parse_bytes("-1MiB").unwrap_err().contains("negative"));
/// ```
///
/// # Errors
/// A message saying what is wrong with `text` (empty, negative, not a number, an unknown
/// suffix, too large, or a fraction of a byte) and what is accepted.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'));
    let (number, suffix) = t.split_at(split.unwrap_or(t.len()));
    let suffix = suffix.trim();
    let accepted = "write a number of bytes with an optional suffix: B, KiB, MiB, GiB, TiB \
                    (or Ki, Mi, Gi, Ti), kB, MB, GB, TB (or k, M, G, T), e.g. 200MiB";
    if number.is_empty() {
        return Err(format!("`{text}` is not an amount of bytes: {accepted}"));
    }
    if number.starts_with('-') {
        return Err(format!("`{text}` is negative: an amount of bytes is at least 0"));
    }
    let scale: u64 = match suffix {
        "" | "B" => 1,
        "KiB" | "Ki" => 1 << 10,
        "MiB" | "Mi" => 1 << 20,
        "GiB" | "Gi" => 1 << 30,
        "TiB" | "Ti" => 1 << 40,
        "kB" | "KB" | "k" => 1_000,
        "MB" | "M" => 1_000_000,
        "GB" | "G" => 1_000_000_000,
        "TB" | "T" => 1_000_000_000_000,
        other => return Err(format!("`{text}`: unknown unit `{other}`; {accepted}")),
    };
    if let Ok(n) = number.parse::<u64>() {
        return n.checked_mul(scale).ok_or_else(|| format!("`{text}` is too large"));
    }
    let x: f64 = number
        .parse()
        .ok()
        .filter(|x: &f64| x.is_finite())
        .ok_or_else(|| format!("`{text}` is not an amount of bytes: {accepted}"))?;
    let bytes = x * scale as f64;
    if bytes >= u64::MAX as f64 {
        return Err(format!("`{text}` is too large"));
    }
    if bytes.fract() != 0.0 {
        return Err(format!("`{text}` is not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

/// Parses a number of cores: positive and finite (`0.5`, `2`), or Kubernetes' millicores
/// (`500m`).
///
/// ```
/// use heddle_task::parse_cpus;
/// assert_eq!(parse_cpus("0.5"), Ok(0.5));
/// assert_eq!(parse_cpus("250m"), Ok(0.25));
/// assert!(parse_cpus("0").is_err());
/// ```
///
/// # Errors
/// A message naming `text` when it is not a positive finite number.
pub fn parse_cpus(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (number, scale) = t.strip_suffix('m').map_or((t, 1.0), |n| (n, 1e-3));
    match number.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x * scale),
        Ok(_) => Err(format!("`{text}` cores: a number of cores is above 0, e.g. 0.5, 2 or 500m")),
        Err(_) => Err(format!("`{text}` is not a number of cores: write e.g. 0.5, 2 or 500m")),
    }
}

/// Writes `cpus` cores as Kubernetes does: whole cores as a number, others in millicores
/// (`0.5` → `500m`).
///
/// ```
/// assert_eq!(heddle_task::kubernetes_cpus(2.0), "2");
/// assert_eq!(heddle_task::kubernetes_cpus(0.25), "250m");
/// ```
pub fn kubernetes_cpus(cpus: f64) -> String {
    if cpus.fract() == 0.0 {
        format!("{cpus:.0}")
    } else {
        format!("{:.0}m", (cpus * 1000.0).ceil())
    }
}

/// Writes `bytes` with the largest binary unit that keeps it short: `200 MiB`.
///
/// ```
/// assert_eq!(heddle_task::format_bytes(200 << 20), "200 MiB");
/// assert_eq!(heddle_task::format_bytes(1536), "1.5 KiB");
/// ```
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] =
        [(1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (size, unit) in UNITS {
        if bytes >= size {
            let x = bytes as f64 / size as f64;
            return if x.fract() == 0.0 {
                format!("{x:.0} {unit}")
            } else {
                format!("{:.1} {unit}", (x * 10.0).round() / 10.0)
            };
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_and_every_mistake() {
        for (t, want) in [
            ("0", 0),
            ("512B", 512),
            ("64KiB", 64 << 10),
            ("64Ki", 64 << 10),
            ("3 MiB", 3 << 20),
            ("2GiB", 2 << 30),
            ("1TiB", 1 << 40),
            ("1.25MiB", 1_310_720),
            ("10kB", 10_000),
            ("10k", 10_000),
            ("7M", 7_000_000),
            ("1.5GB", 1_500_000_000),
            ("2T", 2_000_000_000_000),
        ] {
            assert_eq!(parse_bytes(t), Ok(want), "{t}");
        }
        for (t, says) in [
            ("", "not an amount"),
            ("MiB", "not an amount"),
            ("-5", "negative"),
            ("-1GiB", "negative"),
            ("5 XB", "unknown unit `XB`"),
            ("1.2.3MiB", "not an amount"),
            ("0.5B", "whole number"),
            ("99999999999TiB", "too large"),
            ("18446744073709551616", "too large"),
        ] {
            let e = parse_bytes(t).unwrap_err();
            assert!(e.contains(says), "{t}: {e}");
        }
    }

    #[test]
    fn cores_are_positive() {
        assert_eq!(parse_cpus("2"), Ok(2.0));
        assert_eq!(parse_cpus("1500m"), Ok(1.5));
        for t in ["0", "-1", "nan", "inf", "x", "m", "0m", "-5m"] {
            assert!(parse_cpus(t).is_err(), "{t}");
        }
    }
}
