//! The results as the user sees them: the Heddle-vs-peer markdown table and the `--json` file.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::args::{BenchCollectivesArgs, Transport};
use super::record::{collective_order, Record};
use super::sides::MPIRUN_FLAGS;
use super::BoxError;

/// What `--json FILE` receives.
#[derive(Debug, Serialize)]
struct JsonReport<'a> {
    benchmark: &'static str,
    vs: &'a str,
    transport: &'static str,
    quick: bool,
    repeat: usize,
    ranks: &'a [usize],
    sizes: &'a [u64],
    collectives: &'a [String],
    mpirun_flags: &'static [&'static str],
    records: &'a [Record],
    failures: &'a [String],
}

/// Writes the settings of the run, every measurement and every failure to `path`, as pretty
/// JSON with a trailing newline.
pub(super) fn write_json(
    path: &Path,
    args: &BenchCollectivesArgs,
    records: &[Record],
    failures: &[String],
) -> Result<(), BoxError> {
    let report = JsonReport {
        benchmark: "collectives",
        vs: &args.vs,
        transport: args.transport.unwrap_or(Transport::Auto).as_str(),
        quick: args.quick,
        repeat: args.repeat.max(1),
        ranks: &args.ranks,
        sizes: &args.sizes,
        collectives: &args.collectives,
        mpirun_flags: MPIRUN_FLAGS,
        records,
        failures,
    };
    let text = serde_json::to_string_pretty(&report)?;
    std::fs::write(path, text + "\n")
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(())
}

/// One table row: the Heddle and the peer measurement of a (collective, ranks, bytes).
#[derive(Debug, Default)]
struct Row {
    collective: String,
    ranks: usize,
    bytes: u64,
    heddle: Option<Record>,
    peer: Option<Record>,
}

/// Pairs Heddle records with the `peer` system's, in table order. A later record for the same
/// key and system replaces an earlier one; systems other than these two are ignored.
fn merge(records: &[Record], peer: &str) -> Vec<Row> {
    let mut rows: BTreeMap<(usize, String, usize, u64), Row> = BTreeMap::new();
    for r in records {
        let is_heddle = r.system == "heddle";
        if !is_heddle && r.system != peer {
            continue;
        }
        let key = (collective_order(&r.collective), r.collective.clone(), r.ranks, r.bytes);
        let row = rows.entry(key).or_insert_with(|| Row {
            collective: r.collective.clone(),
            ranks: r.ranks,
            bytes: r.bytes,
            ..Row::default()
        });
        if is_heddle {
            row.heddle = Some(r.clone());
        } else {
            row.peer = Some(r.clone());
        }
    }
    rows.into_values().collect()
}

/// `a / b` when both exist and `b > 0`.
fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() && b.is_finite() => Some(a / b),
        _ => None,
    }
}

/// GB/s (10^9 B/s) of moving `bytes` in `us` microseconds.
fn gbps(bytes: u64, us: f64) -> Option<f64> {
    (us > 0.0).then(|| bytes as f64 / (us * 1e3))
}

/// Microseconds with 2, 1 or 0 decimals below 10, below 1000 and above; "-" when missing.
fn fmt_us(v: Option<f64>) -> String {
    match v {
        None => "-".to_string(),
        Some(v) if v < 10.0 => format!("{v:.2}"),
        Some(v) if v < 1000.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.0}"),
    }
}

/// `v` with `decimals` decimals; "-" when missing.
fn fmt_fixed(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.decimals$}"))
}

/// `b` in the largest binary unit (KiB, MiB, GiB) that divides it, else in bytes.
fn fmt_bytes(b: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in UNITS {
        if b >= unit && b.is_multiple_of(unit) {
            return format!("{} {name}", b / unit);
        }
    }
    format!("{b} B")
}

/// "yes" when both sides verified, else what each side reported ("yes", "NO" or "-").
fn fmt_verified(h: Option<&Record>, p: Option<&Record>, peer: &str) -> String {
    let one = |r: Option<&Record>| match r.map(|r| r.verified) {
        Some(true) => "yes",
        Some(false) => "NO",
        None => "-",
    };
    match (h.map(|r| r.verified), p.map(|r| r.verified)) {
        (Some(true), Some(true)) => "yes".to_string(),
        _ => format!("heddle {} / {peer} {}", one(h), one(p)),
    }
}

/// How the peer system is named in column headers.
fn peer_title(peer: &str) -> String {
    match peer {
        "mpi" => "MPI".to_string(),
        other => other.to_string(),
    }
}

/// The markdown table: latency rows in µs, bandwidth rows in GB/s; missing values are "-".
pub(super) fn render_table(records: &[Record], peer: &str) -> String {
    let p = peer_title(peer);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| collective | ranks | bytes | Heddle p50 µs | {p} p50 µs | ratio (heddle/{peer}) \
         | Heddle p99 | {p} p99 | verified |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---|");
    for row in merge(records, peer) {
        let h = row.heddle.as_ref();
        let m = row.peer.as_ref();
        let (name, h50, m50, h99, m99, r) = if row.collective == "bandwidth" {
            // Throughput: GB/s at the median and at the p99 time; ratio > 1 = Heddle faster.
            let g = |rec: Option<&Record>, q99: bool| {
                rec.and_then(|r| {
                    if q99 {
                        gbps(r.bytes, r.p99_us)
                    } else {
                        r.gbps.or_else(|| gbps(r.bytes, r.p50_us))
                    }
                })
            };
            let (h50, m50) = (g(h, false), g(m, false));
            (
                "bandwidth (GB/s)".to_string(),
                fmt_fixed(h50, 2),
                fmt_fixed(m50, 2),
                fmt_fixed(g(h, true), 2),
                fmt_fixed(g(m, true), 2),
                ratio(h50, m50),
            )
        } else {
            let (h50, m50) = (h.map(|r| r.p50_us), m.map(|r| r.p50_us));
            (
                row.collective.clone(),
                fmt_us(h50),
                fmt_us(m50),
                fmt_us(h.map(|r| r.p99_us)),
                fmt_us(m.map(|r| r.p99_us)),
                ratio(h50, m50),
            )
        };
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {h50} | {m50} | {} | {h99} | {m99} | {} |",
            row.ranks,
            fmt_bytes(row.bytes),
            fmt_fixed(r, 2),
            fmt_verified(h, m, peer),
        );
    }
    let _ = write!(
        out,
        "\nratio = Heddle / {p}: below 1 Heddle is faster on latency rows (µs); on the bandwidth \
         row (GB/s, rank 0 -> rank 1) above 1 Heddle is faster. pingpong is one-way latency \
         (half a round trip)."
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_rules() {
        assert_eq!(ratio(Some(3.0), Some(1.5)), Some(2.0));
        assert_eq!(ratio(Some(1.0), Some(4.0)), Some(0.25));
        assert_eq!(ratio(None, Some(1.0)), None);
        assert_eq!(ratio(Some(1.0), None), None);
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio(Some(f64::NAN), Some(1.0)), None);
    }

    #[test]
    fn merge_pairs_and_orders() {
        let records = vec![
            Record::sample("mpi", "broadcast", 2, 8, 0.5),
            Record::sample("heddle", "allreduce", 4, 8, 2.0),
            Record::sample("mpi", "allreduce", 2, 1024, 1.0),
            Record::sample("heddle", "allreduce", 2, 8, 1.0),
            Record::sample("mpi", "allreduce", 2, 8, 0.9),
            Record::sample("mpi", "allreduce", 2, 8, 0.8), // a later duplicate wins
            Record::sample("spark", "allreduce", 2, 8, 9.0), // neither system: ignored
        ];
        let rows = merge(&records, "mpi");
        let keys: Vec<_> = rows.iter().map(|r| (r.collective.as_str(), r.ranks, r.bytes)).collect();
        assert_eq!(
            keys,
            vec![
                ("allreduce", 2, 8),
                ("allreduce", 2, 1024),
                ("allreduce", 4, 8),
                ("broadcast", 2, 8)
            ]
        );
        assert_eq!(rows[0].heddle.as_ref().map(|r| r.p50_us), Some(1.0));
        assert_eq!(rows[0].peer.as_ref().map(|r| r.p50_us), Some(0.8));
        assert!(rows[1].heddle.is_none());
        assert!(rows[2].peer.is_none());
    }

    #[test]
    fn table_shows_ratio_and_dashes() {
        let records = vec![
            Record::sample("heddle", "allreduce", 2, 8, 1.5),
            Record::sample("mpi", "allreduce", 2, 8, 1.0),
            Record::sample("mpi", "alltoall", 4, 1 << 20, 160.0),
        ];
        let table = render_table(&records, "mpi");
        let lines: Vec<&str> = table.lines().collect();
        let header = "| collective | ranks | bytes | Heddle p50 µs | MPI p50 µs";
        assert!(lines[0].starts_with(header));
        assert_eq!(lines[2], "| allreduce | 2 | 8 B | 1.50 | 1.00 | 1.50 | 3.00 | 2.00 | yes |");
        assert_eq!(
            lines[3],
            "| alltoall | 4 | 1 MiB | - | 160.0 | - | - | 320.0 | heddle - / mpi yes |"
        );
    }

    #[test]
    fn table_bandwidth_in_gbps_and_unverified() {
        let mut h = Record::sample("heddle", "bandwidth", 2, 16 << 20, 2000.0);
        h.gbps = Some(8.389);
        h.verified = false;
        let mut m = Record::sample("mpi", "bandwidth", 2, 16 << 20, 1000.0);
        m.gbps = None; // computed from p50 when absent
        let table = render_table(&[h, m], "mpi");
        let row = table.lines().nth(2).expect("row");
        // MPI: 16777216 B / 1000 µs = 16.78 GB/s; p99 = 2000 µs -> 8.39 GB/s.
        assert_eq!(
            row,
            "| bandwidth (GB/s) | 2 | 16 MiB | 8.39 | 16.78 | 0.50 | 4.19 | 8.39 | \
             heddle NO / mpi yes |"
        );
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_bytes(8), "8 B");
        assert_eq!(fmt_bytes(1024), "1 KiB");
        assert_eq!(fmt_bytes(65536), "64 KiB");
        assert_eq!(fmt_bytes(1000), "1000 B");
        assert_eq!(fmt_bytes(16 << 20), "16 MiB");
        assert_eq!(fmt_us(Some(0.957)), "0.96");
        assert_eq!(fmt_us(Some(18.64)), "18.6");
        assert_eq!(fmt_us(Some(3015.4)), "3015");
        assert_eq!(fmt_us(None), "-");
    }
}
