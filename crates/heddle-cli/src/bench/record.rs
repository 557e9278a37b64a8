//! The measurement record both sides print, parsed from their output and reduced over repeats.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Collectives in table order (also the default `--collectives`).
pub(super) const COLLECTIVES: &[&str] = &[
    "allreduce",
    "iallreduce",
    "scan",
    "broadcast",
    "allgather",
    "alltoall",
    "ring",
    "pingpong",
    "bandwidth",
];

/// One measurement line printed by either side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Record {
    /// `heddle` or `mpi`.
    pub(super) system: String,
    /// One of [`COLLECTIVES`].
    pub(super) collective: String,
    /// World size.
    pub(super) ranks: usize,
    /// Message size in bytes (per rank; per peer for alltoall).
    pub(super) bytes: u64,
    /// Median time of one operation, µs (per message for bandwidth, one way for pingpong).
    pub(super) p50_us: f64,
    /// 99th percentile, µs.
    pub(super) p99_us: f64,
    /// Timed iterations.
    pub(super) iters: u64,
    /// Whether the result of the operation was checked and right.
    pub(super) verified: bool,
    /// Bandwidth only: 10^9 bytes per second at the median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) gbps: Option<f64>,
}

#[cfg(test)]
impl Record {
    /// A verified record with `p99_us = 2 * p50_us`, 100 iterations and no `gbps`.
    pub(super) fn sample(
        system: &str,
        collective: &str,
        ranks: usize,
        bytes: u64,
        p50_us: f64,
    ) -> Self {
        Record {
            system: system.to_string(),
            collective: collective.to_string(),
            ranks,
            bytes,
            p50_us,
            p99_us: p50_us * 2.0,
            iters: 100,
            verified: true,
            gbps: None,
        }
    }
}

/// Removes a leading `[N] ` (the rank prefix of `heddle run`), if any.
fn strip_rank_prefix(line: &str) -> &str {
    let t = line.trim_start();
    if let Some(rest) = t.strip_prefix('[') {
        if let Some(end) = rest.find(']') {
            let inner = &rest[..end];
            if !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit()) {
                return rest[end + 1..].trim_start();
            }
        }
    }
    t
}

/// Parses one output line into a record; `None` for anything that is not one.
pub(super) fn parse_line(line: &str) -> Option<Record> {
    let body = strip_rank_prefix(line).trim_end();
    if !body.starts_with('{') {
        return None;
    }
    serde_json::from_str(body).ok()
}

/// Position of collective `c` in [`COLLECTIVES`]; unknown ones sort last.
pub(super) fn collective_order(c: &str) -> usize {
    COLLECTIVES.iter().position(|k| *k == c).unwrap_or(COLLECTIVES.len())
}

/// Sorts records by collective (table order), ranks, bytes, system.
pub(super) fn sort_records(records: &mut [Record]) {
    records.sort_by(|a, b| {
        (collective_order(&a.collective), &a.collective, a.ranks, a.bytes, &a.system).cmp(&(
            collective_order(&b.collective),
            &b.collective,
            b.ranks,
            b.bytes,
            &b.system,
        ))
    });
}

/// Keeps one record per (system, collective, ranks, bytes): the one with the median p50 (the
/// lower median for an even count), with `verified` true only if every run verified.
pub(super) fn median_runs(records: Vec<Record>) -> Vec<Record> {
    let mut groups: BTreeMap<(String, String, usize, u64), Vec<Record>> = BTreeMap::new();
    for r in records {
        let key = (r.system.clone(), r.collective.clone(), r.ranks, r.bytes);
        groups.entry(key).or_default().push(r);
    }
    groups
        .into_values()
        .map(|mut runs| {
            let verified = runs.iter().all(|r| r.verified);
            runs.sort_by(|a, b| a.p50_us.total_cmp(&b.p50_us));
            let mut chosen = runs.swap_remove((runs.len() - 1) / 2);
            chosen.verified = verified;
            chosen
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = concat!(
        r#"{"system": "heddle", "collective": "allreduce", "ranks": 2, "bytes": 8, "#,
        r#""p50_us": 1.0, "p99_us": 1.5, "iters": 1000, "verified": true}"#
    );

    #[test]
    fn parses_plain_and_prefixed_lines() {
        let plain = parse_line(LINE).expect("plain line");
        assert_eq!(plain.system, "heddle");
        assert_eq!(plain.collective, "allreduce");
        assert_eq!((plain.ranks, plain.bytes, plain.iters), (2, 8, 1000));
        assert_eq!((plain.p50_us, plain.p99_us), (1.0, 1.5));
        assert!(plain.verified);
        assert_eq!(plain.gbps, None);
        assert_eq!(parse_line(&format!("[0] {LINE}")), Some(plain.clone()));
        assert_eq!(parse_line(&format!("[12]   {LINE}  \r")), Some(plain.clone()));
        assert_eq!(parse_line(&format!("[3]{LINE}")), Some(plain));
    }

    #[test]
    fn parses_bandwidth_gbps() {
        let line = concat!(
            r#"[0] {"system": "mpi", "collective": "bandwidth", "ranks": 2, "bytes": 16777216, "#,
            r#""p50_us": 1375.0, "p99_us": 1500.0, "iters": 20, "verified": true, "gbps": 12.2}"#
        );
        let r = parse_line(line).expect("bandwidth line");
        assert_eq!(r.gbps, Some(12.2));
        assert_eq!(r.bytes, 16 << 20);
    }

    #[test]
    fn ignores_non_records() {
        assert_eq!(parse_line(""), None);
        assert_eq!(parse_line("[0] worker 0 ready"), None);
        assert_eq!(parse_line("[x] {\"a\": 1}"), None);
        assert_eq!(parse_line("{\"system\": \"mpi\"}"), None, "missing fields");
        assert_eq!(parse_line("{not json"), None);
        assert_eq!(parse_line("[abc] {}"), None);
        // A non-numeric bracket is not a rank prefix, so the line does not start with '{'.
        assert_eq!(parse_line(&format!("[a] {LINE}")), None);
    }

    #[test]
    fn median_of_repeats() {
        let mut bad = Record::sample("mpi", "allreduce", 2, 8, 0.7);
        bad.verified = false;
        let runs = vec![
            Record::sample("mpi", "allreduce", 2, 8, 1.0),
            bad,
            Record::sample("mpi", "allreduce", 2, 8, 0.9),
            Record::sample("heddle", "allreduce", 2, 8, 3.0),
            Record::sample("heddle", "allreduce", 2, 8, 2.0),
        ];
        let mut out = median_runs(runs);
        sort_records(&mut out);
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].system.as_str(), out[0].p50_us), ("heddle", 2.0));
        assert!(out[0].verified);
        assert_eq!((out[1].system.as_str(), out[1].p50_us), ("mpi", 0.9));
        assert!(!out[1].verified, "one unverified run taints the measurement");
    }
}
