//! What a job reports to the dashboard's metrics, checked against counts worked out by
//! hand: records in and out per task instance, and the serialized bytes each one sent
//! and received (a `u64` record is 8 bytes of bincode plus a 4-byte length prefix).

mod common;

use std::sync::{Arc, Mutex};

use common::{on_workers, Numbers};
use heddle_comm::metrics;
use heddle_dataflow::Options;
use heddle_task::{Compute, Context, Edge, Job, Plan, Result, RoundRobin, TaskGraph, WorkerSpec};

/// Counts what it receives.
struct Count(Arc<Mutex<u64>>);

impl Compute for Count {
    type In = u64;
    type Out = ();
    fn execute(&mut self, _: &mut Context<'_, ()>, _: u64) -> Result<()> {
        *self.0.lock().unwrap() += 1;
        Ok(())
    }
}

/// The sum of `field` over the instances of `task` in this process's snapshot.
fn total(task: &str, field: fn(&metrics::TaskSample) -> u64) -> u64 {
    metrics::snapshot().tasks.iter().filter(|t| t.task == task).map(field).sum()
}

#[test]
fn bytes_out_of_the_sources_are_the_bytes_into_the_targets() {
    const PER_SOURCE: u64 = 5_000;
    for (mode, opts) in [("batch", Options::batch()), ("streaming", Options::streaming())] {
        let (src, dst) = (format!("numbers-{mode}"), format!("count-{mode}"));
        let counted = on_workers(2, |comm| {
            let seen = Arc::new(Mutex::new(0));
            let mut g = TaskGraph::new();
            let s = g.source(&src, 2, |i| Numbers {
                next: u64::from(i) * PER_SOURCE,
                end: u64::from(i + 1) * PER_SOURCE,
                per_call: 100,
            });
            let c = seen.clone();
            let d = g.compute(&dst, 2, move |_| Count(c.clone()));
            g.connect(&s, &d, Edge::hash());
            let plan = Plan::new(&g, &WorkerSpec::discover(comm).unwrap(), &RoundRobin).unwrap();
            Job::new(comm, &g, &plan, opts.clone()).unwrap().run().unwrap();
            let n = *seen.lock().unwrap();
            n
        });
        let records = 2 * PER_SOURCE;
        assert_eq!(counted.iter().sum::<u64>(), records, "{mode}");
        assert_eq!(total(&src, |t| t.records_out), records, "{mode}: records out");
        assert_eq!(total(&dst, |t| t.records_in), records, "{mode}: records in");
        assert_eq!(total(&src, |t| t.bytes_out), records * 12, "{mode}: bytes out");
        assert_eq!(total(&dst, |t| t.bytes_in), records * 12, "{mode}: bytes in");
        assert_eq!(total(&dst, |t| t.bytes_out), 0, "{mode}: the sink sends nothing");
    }
}
