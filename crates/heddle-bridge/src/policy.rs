//! Policies (Granules' directives): rules over a bridge's diagnostics that switch its
//! transport while it runs (`spec/bridge.md` §6). A policy is a list of rules separated by
//! `;`, each `METRIC OP VALUE -> TRANSPORT`, tried in order every `check_every` records; the
//! first that holds and names another transport switches the bridge, at most once per
//! `cooldown`.
//!
//! | metric | what |
//! |---|---|
//! | `record_bytes` | mean payload of the records sent lately (exponential average) |
//! | `max_record_bytes` | largest record sent so far |
//! | `p50_us`, `p99_us` | record latency (DATA to the credit covering it) |
//! | `records_per_s` | records sent per second since the start |
//! | `in_flight` | records sent and not yet granted back |
//! | `open_fds`, `open_sockets` | descriptors and sockets open in the host's process |
//! | `shm_bytes` | shared memory the channel holds |
//!
//! Values take `K`/`M`/`G` (×1000) or `Ki`/`Mi`/`Gi` (×1024) and an optional `B`, or
//! `us`/`ms`/`s` for latencies (in µs).
//!
//! ```
//! use heddle_bridge::{Policy, Transport};
//! let p = Policy::parse("record_bytes > 64KiB -> shm; open_sockets > 900 -> pipe")?;
//! assert_eq!(p.rules().len(), 2);
//! assert_eq!(p.rules()[0].to, Transport::Shm);
//! assert!(Policy::parse("latency > 5 -> shm").is_err());
//! # Ok::<(), heddle_bridge::Error>(())
//! ```

use std::time::Duration;

use crate::{Diagnostics, Error, Result, Transport};

/// A quantity a rule tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Mean payload of recent records, bytes.
    RecordBytes,
    /// Largest record sent, bytes.
    MaxRecordBytes,
    /// Median latency, µs.
    P50Us,
    /// 99th-percentile latency, µs.
    P99Us,
    /// Records sent per second.
    RecordsPerS,
    /// Records in flight.
    InFlight,
    /// Descriptors open in the host process.
    OpenFds,
    /// Sockets open in the host process.
    OpenSockets,
    /// Shared memory of the channel, bytes.
    ShmBytes,
}

const METRICS: [(&str, Metric); 9] = [
    ("record_bytes", Metric::RecordBytes),
    ("max_record_bytes", Metric::MaxRecordBytes),
    ("p50_us", Metric::P50Us),
    ("p99_us", Metric::P99Us),
    ("records_per_s", Metric::RecordsPerS),
    ("in_flight", Metric::InFlight),
    ("open_fds", Metric::OpenFds),
    ("open_sockets", Metric::OpenSockets),
    ("shm_bytes", Metric::ShmBytes),
];

impl Metric {
    fn value(self, d: &Diagnostics) -> f64 {
        match self {
            Metric::RecordBytes => d.mean_record_bytes,
            Metric::MaxRecordBytes => d.max_record_sent as f64,
            Metric::P50Us => d.latency_p50_us,
            Metric::P99Us => d.latency_p99_us,
            Metric::RecordsPerS => d.records_per_s,
            Metric::InFlight => d.in_flight as f64,
            Metric::OpenFds => d.host_open_fds as f64,
            Metric::OpenSockets => d.host_open_sockets as f64,
            Metric::ShmBytes => d.shm_bytes as f64,
        }
    }

    fn name(self) -> &'static str {
        METRICS.iter().find(|(_, m)| *m == self).map_or("?", |(n, _)| n)
    }
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
}

/// One rule: when `metric op value` holds, move to `to`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// What is tested.
    pub metric: Metric,
    /// How.
    pub op: Op,
    /// Against what.
    pub value: f64,
    /// The transport to move to.
    pub to: Transport,
    text: String,
}

impl Rule {
    fn holds(&self, d: &Diagnostics) -> Option<f64> {
        let v = self.metric.value(d);
        let yes = match self.op {
            Op::Gt => v > self.value,
            Op::Ge => v >= self.value,
            Op::Lt => v < self.value,
            Op::Le => v <= self.value,
        };
        yes.then_some(v)
    }
}

/// Rules that switch a bridge's transport by its diagnostics.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    rules: Vec<Rule>,
    /// Records between evaluations.
    pub check_every: u64,
    /// Least time between two switches.
    pub cooldown: Duration,
}

fn number(text: &str, rule: &str) -> Result<f64> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let n: f64 = n
        .parse()
        .map_err(|_| Error::Config(format!("policy rule `{rule}`: `{t}` is not a number")))?;
    let unit = unit.trim().trim_end_matches('B');
    let scale = match unit {
        "" | "us" | "µs" => 1.0,
        "K" | "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "Ki" => 1024.0,
        "Mi" => 1048576.0,
        "Gi" => 1073741824.0,
        "ms" => 1e3,
        "s" => 1e6,
        _ => {
            return Err(Error::Config(format!(
                "policy rule `{rule}`: unknown unit `{unit}` (use K, M, Ki, Mi, B, us, ms, s)"
            )))
        }
    };
    Ok(n * scale)
}

impl Policy {
    /// Parses `METRIC OP VALUE -> TRANSPORT; ...`.
    ///
    /// # Errors
    /// [`Error::Config`] naming the rule and what is wrong in it.
    pub fn parse(text: &str) -> Result<Policy> {
        let mut rules = Vec::new();
        for rule in text.split(';').map(str::trim).filter(|r| !r.is_empty()) {
            let (cond, to) = rule.split_once("->").ok_or_else(|| {
                Error::Config(format!(
                    "policy rule `{rule}`: expected `METRIC OP VALUE -> TRANSPORT`"
                ))
            })?;
            let to: Transport = to.trim().parse()?;
            let (at, op, len) = [(">=", Op::Ge), ("<=", Op::Le), (">", Op::Gt), ("<", Op::Lt)]
                .iter()
                .find_map(|(s, op)| cond.find(s).map(|i| (i, *op, s.len())))
                .ok_or_else(|| {
                    Error::Config(format!("policy rule `{rule}`: no comparison (>, >=, <, <=)"))
                })?;
            let name = cond[..at].trim();
            let metric =
                METRICS.iter().find(|(n, _)| *n == name).map(|(_, m)| *m).ok_or_else(|| {
                    let known: Vec<&str> = METRICS.iter().map(|(n, _)| *n).collect();
                    Error::Config(format!(
                        "policy rule `{rule}`: unknown metric `{name}`; use one of {}",
                        known.join(", ")
                    ))
                })?;
            let value = number(&cond[at + len..], rule)?;
            rules.push(Rule { metric, op, value, to, text: rule.to_owned() });
        }
        if rules.is_empty() {
            return Err(Error::Config("an empty policy".into()));
        }
        Ok(Policy { rules, check_every: 64, cooldown: Duration::from_millis(250) })
    }

    /// Whether a rule tests the process's descriptors or sockets.
    pub fn needs_resources(&self) -> bool {
        self.rules.iter().any(|r| matches!(r.metric, Metric::OpenFds | Metric::OpenSockets))
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The transport the first holding rule names, if it is not `current`, and why.
    pub fn decide(&self, d: &Diagnostics) -> Option<(Transport, String)> {
        self.rules.iter().find_map(|r| {
            let v = r.holds(d)?;
            (r.to != d.transport)
                .then(|| (r.to, format!("{} (the {} was {v:.0})", r.text, r.metric.name())))
        })
    }
}
