//! Task strategies (on data, at most k, periodic) and a task changing its strategy while
//! it runs.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::Numbers;
use heddle_comm::{CommConfig, Communicator};
use heddle_dataflow::Options;
use heddle_task::{
    Compute, Context, Edge, Job, Plan, Result, RoundRobin, Strategy, TaskGraph, WorkerSpec,
};
fn workers(comm: &Communicator) -> Vec<WorkerSpec> {
    WorkerSpec::discover(comm).expect("discover")
}
/// Counts executions and ticks; can switch strategy after `switch_after` records.
struct Probe {
    seen: Arc<Mutex<Vec<u64>>>,
    ticks: Arc<Mutex<u64>>,
    switch_to: Option<(usize, Strategy)>,
}

impl Compute for Probe {
    type In = u64;
    type Out = ();
    fn execute(&mut self, ctx: &mut Context<'_, ()>, x: u64) -> Result<()> {
        self.seen.lock().unwrap().push(x);
        if let Some((after, s)) = self.switch_to {
            if self.seen.lock().unwrap().len() == after {
                ctx.set_strategy(s);
            }
        }
        Ok(())
    }
    fn tick(&mut self, _: &mut Context<'_, ()>) -> Result<()> {
        *self.ticks.lock().unwrap() += 1;
        Ok(())
    }
}

/// A source that emits one number per call, every `period` (a periodic source).
fn probe_job(
    strategy: Strategy,
    source_strategy: Option<Strategy>,
    n: u64,
    switch_to: Option<(usize, Strategy)>,
) -> (Vec<u64>, u64, heddle_task::Report) {
    let comm = heddle_comm::solo(CommConfig::default()).unwrap();
    let (seen, ticks) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(0)));
    let mut g = TaskGraph::new();
    // Timed sources emit one record per run; others many (so tasks run batches).
    let per_call = if source_strategy.is_some() { 1 } else { 50 };
    let src = g.source("src", 1, move |_| Numbers { next: 0, end: n, per_call });
    let (s, t) = (seen.clone(), ticks.clone());
    let probe =
        g.compute("probe", 1, move |_| Probe { seen: s.clone(), ticks: t.clone(), switch_to });
    g.connect(&src, &probe, Edge::direct());
    g.strategy(&probe, strategy);
    if let Some(ss) = source_strategy {
        g.strategy(&src, ss);
    }
    let plan = Plan::new(&g, &workers(&comm), &RoundRobin).unwrap();
    let report = Job::new(&comm, &g, &plan, Options::batch()).unwrap().run().unwrap();
    let seen = seen.lock().unwrap().clone();
    let ticks = *ticks.lock().unwrap();
    (seen, ticks, report)
}

#[test]
fn strategy_on_data_runs_every_record() {
    let (seen, ticks, _) = probe_job(Strategy::on_data(), None, 1000, None);
    assert_eq!(seen, (0..1000).collect::<Vec<_>>());
    assert_eq!(ticks, 0);
}

#[test]
fn strategy_at_most_k_retires_the_task_and_counts_what_it_dropped() {
    let (seen, _, report) = probe_job(Strategy::on_data().at_most(5), None, 100, None);
    assert_eq!(seen, vec![0, 1, 2, 3, 4]);
    let probe = report.tasks.iter().find(|t| t.task == "probe[0]").unwrap();
    assert_eq!(probe.executed, 5);
    assert_eq!(probe.discarded, 95, "everything after retirement is counted as discarded");
}

#[test]
fn strategy_periodic_runs_on_a_timer_with_the_waiting_input() {
    // The source emits a number every 5 ms (20 of them); the task runs every 20 ms only.
    let (seen, ticks, _) = probe_job(
        Strategy::periodic(Duration::from_millis(20)),
        Some(Strategy::periodic(Duration::from_millis(5))),
        20,
        None,
    );
    assert_eq!(
        seen,
        (0..20).collect::<Vec<_>>(),
        "every record is executed, in order, at the ticks"
    );
    assert!(ticks >= 1, "ticks: {ticks}");
}

#[test]
fn a_task_changes_its_strategy_while_running() {
    // After 10 records the task limits itself to 5 more activations.
    let (seen, _, report) =
        probe_job(Strategy::on_data(), None, 100, Some((10, Strategy::on_data().at_most(15))));
    assert_eq!(seen, (0..15).collect::<Vec<_>>());
    assert_eq!(
        report.tasks.iter().find(|t| t.task == "probe[0]").unwrap().discarded,
        85,
        "{report:?}"
    );
}
