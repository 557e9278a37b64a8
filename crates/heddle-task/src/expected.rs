//! Expected usage per call: how often a task expects each of its methods to be called
//! (Squirrel's ⟨interface, method, usage⟩ in calls per second). A contract that declares
//! it ([`crate::Resources::expect`]) lets the plan say what an isolated process's channel
//! will cost at that rate, makes admission hold those cores too, and is checked against
//! what the task really got when the job ends: a rate well over the expected one is
//! reported, since what was reserved for the task was reckoned on it.

use serde::{Deserialize, Serialize};

use crate::isolation::COSTS;
use crate::{Error, Report, Resources, Result, TaskGraph};

/// The methods whose calls a contract may expect (a source's `next` is called as fast as
/// its output is taken, so it has no rate of its own).
pub(crate) const METHODS: [&str; 2] = ["execute", "tick"];

/// Calls per second a task expects of one of its methods.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expected {
    /// `execute` or `tick`.
    pub method: String,
    /// Calls per second, per instance.
    pub calls_per_s: f64,
}

/// How far over its expected rate a task may run before it is reported.
const OVER: f64 = 1.5;

/// Refuses expectations of unknown methods, or rates that are not above 0, naming the
/// vertex.
pub(crate) fn validate(graph: &TaskGraph) -> Result<()> {
    for v in &graph.vertices {
        for e in &v.resources.expected {
            if !METHODS.contains(&e.method.as_str()) {
                return Err(Error::Graph(format!(
                    "vertex '{}' expects calls of '{}': expected usage is given for {}",
                    v.name,
                    e.method,
                    METHODS.join(" or ")
                )));
            }
            if !(e.calls_per_s.is_finite() && e.calls_per_s > 0.0) {
                return Err(Error::Graph(format!(
                    "vertex '{}' expects {} {} calls a second: give a rate above 0",
                    v.name, e.calls_per_s, e.method
                )));
            }
        }
    }
    Ok(())
}

/// Expected calls per second of `method` under `contract` (0 when it says nothing).
pub(crate) fn rate(contract: &Resources, method: &str) -> f64 {
    contract.expected.iter().filter(|e| e.method == method).map(|e| e.calls_per_s).sum()
}

/// Cores an isolated instance's channel costs more than a thread's at its expected
/// `execute` rate (each record crosses the rings), by the measured [`COSTS`].
pub(crate) fn channel_cores(contract: &Resources) -> f64 {
    rate(contract, "execute") * (COSTS.process_record_ns - COSTS.thread_record_ns) * 1e-9
}

/// Reports (a warning) every task of `report` that ran its methods more than 1.5 times
/// as often as its vertex's contract (in `contracts`, by vertex name) expected, over
/// `report.job_s`; returns the warnings.
pub(crate) fn warn_over(contracts: &[(String, Resources)], report: &Report) -> Vec<String> {
    let mut warnings = Vec::new();
    if report.job_s <= 0.0 {
        return warnings;
    }
    for t in &report.tasks {
        let name = t.task.rsplit_once('[').map_or(t.task.as_str(), |(n, _)| n);
        let Some((_, contract)) = contracts.iter().find(|(n, _)| n == name) else { continue };
        for (method, calls) in [("execute", t.executed), ("tick", t.ticks)] {
            let expected = rate(contract, method);
            let got = calls as f64 / report.job_s;
            if expected > 0.0 && got > expected * OVER {
                let w = format!(
                    "task {} had {got:.0} {method} calls a second, {:.1}× the {expected} its \
                     contract expects: what is reserved for it was reckoned on that rate",
                    t.task,
                    got / expected
                );
                tracing::warn!("{w}");
                warnings.push(w);
            }
        }
    }
    warnings
}

/// The plan's lines for the vertices that expect a rate: `name`, its contract, and
/// whether it runs as processes.
pub(crate) fn describe(name: &str, contract: &Resources, isolated: bool) -> Option<String> {
    if contract.expected.is_empty() {
        return None;
    }
    let rates: Vec<String> = contract
        .expected
        .iter()
        .map(|e| format!("{} {} calls/s", e.calls_per_s, e.method))
        .collect();
    let channel = if isolated && rate(contract, "execute") > 0.0 {
        let cores = channel_cores(contract);
        format!(
            "; as a process, its channel costs about {cores:.3} cores more than a thread's \
             ({:.0}% of its {} cores), held by admission",
            100.0 * cores / contract.cpus,
            contract.cpus
        )
    } else {
        String::new()
    };
    Some(format!("  vertex {name}: expects {} an instance{channel}", rates.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TaskStats;

    fn stats(task: &str, executed: u64, ticks: u64) -> TaskStats {
        TaskStats { task: task.into(), executed, ticks, ..TaskStats::default() }
    }

    #[test]
    fn tasks_well_over_their_expected_rate_are_reported() {
        let contracts = vec![
            ("parse".to_owned(), Resources::new(1.0, 0).expect("execute", 1000.0)),
            ("plain".to_owned(), Resources::new(1.0, 0)),
        ];
        let report = Report {
            job_s: 2.0,
            tasks: vec![
                stats("parse[0]", 2000, 0),
                stats("parse[1]", 5000, 0),
                stats("plain[0]", 1 << 30, 0),
            ],
            ..Report::default()
        };
        let warned = warn_over(&contracts, &report);
        assert_eq!(warned.len(), 1, "{warned:?}");
        assert!(warned[0].starts_with("task parse[1] had 2500 execute calls a second, 2.5×"));
    }

    #[test]
    fn a_channel_costs_what_the_measured_costs_say() {
        let r = Resources::new(0.5, 0).expect("execute", 1e6).expect("tick", 10.0);
        let want = 1e6 * (COSTS.process_record_ns - COSTS.thread_record_ns) * 1e-9;
        assert!((channel_cores(&r) - want).abs() < 1e-12);
        let line = describe("parse", &r, true).unwrap();
        assert!(line.contains("expects 1000000 execute calls/s, 10 tick calls/s"), "{line}");
        assert!(line.contains(&format!("about {want:.3} cores")), "{line}");
        assert!(describe("parse", &Resources::new(0.5, 0), true).is_none());
    }
}
