//! One failing task stops the whole job: the worker where it failed returns the task's
//! error, every other worker returns the job's abort naming the origin rank and task, and
//! no worker finishes with a result that lacks the failed worker's records.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::{on_workers, Numbers};
use heddle_comm::Communicator;
use heddle_task::{
    Compute, Context, Edge, Error, Job, Plan, Produced, Result, RoundRobin, Source, TaskGraph,
    WorkerSpec,
};

/// Instance `bad` fails at its 100th record; the others count what they see.
struct FailsOnOneInstance {
    bad: u32,
    seen: u64,
    total: Arc<AtomicU64>,
}

impl Compute for FailsOnOneInstance {
    type In = u64;
    type Out = ();
    fn execute(&mut self, ctx: &mut Context<'_, ()>, _: u64) -> Result<()> {
        self.seen += 1;
        if ctx.index() == self.bad && self.seen == 100 {
            return Err(Error::Graph("record 100 is malformed".into()));
        }
        self.total.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

fn run_failing_job(comm: &Communicator, total: &Arc<AtomicU64>) -> Result<()> {
    let n = comm.size() as u32;
    let mut g = TaskGraph::new();
    let src = g.source("numbers", n, |_| Numbers { next: 0, end: 200_000, per_call: 64 });
    let total = total.clone();
    let check = g.compute("check", n, move |_| FailsOnOneInstance {
        bad: 1,
        seen: 0,
        total: total.clone(),
    });
    g.connect(&src, &check, Edge::hash());
    let plan = Plan::new(&g, &WorkerSpec::discover(comm)?, &RoundRobin)?;
    Job::new(comm, &g, &plan, heddle_dataflow::Options::batch())?.run().map(|_| ())
}

#[test]
fn a_task_failing_on_one_worker_aborts_every_worker_with_its_cause() {
    for n in [2, 3] {
        let total = Arc::new(AtomicU64::new(0));
        let results = on_workers(n, |comm| run_failing_job(comm, &total));
        for (rank, r) in results.iter().enumerate() {
            match (rank, r) {
                (1, Err(Error::Task { task, message })) => {
                    assert_eq!(task, "check[1]");
                    assert!(message.contains("record 100 is malformed"), "{message}");
                }
                (1, other) => panic!("{n} workers: the failing worker returned {other:?}"),
                (_, Err(Error::Comm(heddle_comm::Error::Aborted(cause)))) => {
                    assert_eq!(
                        (cause.origin, cause.task.as_deref()),
                        (1, Some("check[1]")),
                        "{n} workers"
                    );
                    assert!(cause.message.contains("record 100 is malformed"), "{cause}");
                }
                (_, other) => {
                    panic!("{n} workers: rank {rank} must be aborted by rank 1, got {other:?}")
                }
            }
        }
        assert!(total.load(Ordering::Relaxed) < (n as u64) * 200_000, "the job did not stop early");
    }
}

#[test]
fn an_abort_is_local_in_a_world_of_one() {
    // Nothing to tell, and a notebook must stay usable: the communicator is not aborted.
    let comm = heddle_comm::solo(heddle_comm::CommConfig::default()).unwrap();
    let total = Arc::new(AtomicU64::new(0));
    let mut g = TaskGraph::new();
    let src = g.source("numbers", 2, |_| Numbers { next: 0, end: 1000, per_call: 64 });
    let t = total.clone();
    let check =
        g.compute("check", 2, move |_| FailsOnOneInstance { bad: 1, seen: 0, total: t.clone() });
    g.connect(&src, &check, Edge::hash());
    let plan = Plan::new(&g, &WorkerSpec::discover(&comm).unwrap(), &RoundRobin).unwrap();
    let e =
        Job::new(&comm, &g, &plan, heddle_dataflow::Options::batch()).unwrap().run().unwrap_err();
    assert!(matches!(&e, Error::Task { task, .. } if task == "check[1]"), "{e}");
    assert!(comm.check_aborted().is_ok());
    comm.barrier().expect("the communicator is still usable");
}

/// Instance 1 fails at once with an error of a layer above the task system; the others
/// produce nothing.
struct RaisesOnInstanceOne;

impl Source for RaisesOnInstanceOne {
    type Out = u64;
    fn next(&mut self, ctx: &mut Context<'_, u64>) -> Result<Produced> {
        if ctx.index() == 1 {
            return Err(Error::raised("Io", std::io::Error::other("rows.csv: disk on fire")));
        }
        Ok(Produced::Done)
    }
}

#[test]
fn an_error_raised_in_a_task_keeps_its_value_kind_and_task() {
    let results = on_workers(2, |comm| {
        let mut g = TaskGraph::new();
        let src = g.source("read", 2, |_| RaisesOnInstanceOne);
        let total = Arc::new(AtomicU64::new(0));
        let check = g.compute("check", 2, move |_| FailsOnOneInstance {
            bad: 9,
            seen: 0,
            total: total.clone(),
        });
        g.connect(&src, &check, Edge::hash());
        let plan = Plan::new(&g, &WorkerSpec::discover(comm)?, &RoundRobin)?;
        Job::new(comm, &g, &plan, heddle_dataflow::Options::batch())?.run().map(|_| ())
    });
    match &results[1] {
        Err(Error::Raised { task, kind, source }) => {
            assert_eq!((task.as_str(), *kind), ("read[1]", "Io"));
            let io = source.downcast_ref::<std::io::Error>().expect("the raised value");
            assert_eq!(io.to_string(), "rows.csv: disk on fire");
        }
        other => panic!("the failing worker returned {other:?}"),
    }
    match &results[0] {
        Err(Error::Comm(heddle_comm::Error::Aborted(cause))) => {
            assert_eq!(
                (cause.origin, cause.task.as_deref(), cause.kind.as_str()),
                (1, Some("read[1]"), "Io")
            );
            assert_eq!(cause.message, "rows.csv: disk on fire");
        }
        other => panic!("rank 0 must be aborted by rank 1, got {other:?}"),
    }
}
