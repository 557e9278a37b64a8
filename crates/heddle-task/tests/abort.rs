//! Aborting a job: a job whose sources never end stops with `Error::Aborted` and its
//! reason when its `AbortHandle` is aborted from another thread, on the calling thread and
//! on the executor pool; a reset handle serves the next job.

mod common;

use std::time::{Duration, Instant};

use common::on_workers;
use heddle_dataflow::Options;
use heddle_task::{
    AbortHandle, Compute, Context, Edge, Error, Job, Plan, Produced, Result, RoundRobin, Source,
    TaskGraph, WorkerSpec,
};

/// Emits forever unless `limit` is given.
struct Counting {
    next: u64,
    limit: Option<u64>,
}

impl Source for Counting {
    type Out = u64;
    fn next(&mut self, ctx: &mut Context<'_, u64>) -> Result<Produced> {
        while ctx.emitted() < 100 && self.limit.is_none_or(|l| self.next < l) {
            ctx.emit(self.next);
            self.next += 1;
        }
        Ok(if self.limit.is_some_and(|l| self.next >= l) { Produced::Done } else { Produced::More })
    }
}

struct Discard;

impl Compute for Discard {
    type In = u64;
    type Out = ();
    fn execute(&mut self, _: &mut Context<'_, ()>, _: u64) -> Result<()> {
        Ok(())
    }
}

/// source -(hash)-> sink, 2 instances per worker, on `threads` executor threads.
fn job(
    comm: &heddle_comm::Communicator,
    threads: usize,
    limit: Option<u64>,
    abort: &AbortHandle,
) -> Result<()> {
    let p = 2 * comm.size() as u32;
    let mut g = TaskGraph::new();
    let src = g.source("count", p, move |_| Counting { next: 0, limit });
    let sink = g.compute("drop", p, |_| Discard);
    g.connect(&src, &sink, Edge::hash());
    let plan = Plan::new(&g, &WorkerSpec::discover(comm)?, &RoundRobin)?;
    Job::new(comm, &g, &plan, Options::batch())?
        .threads(threads)
        .abort_with(abort.clone())
        .run()
        .map(drop)
}

#[test]
fn an_aborted_job_ends_with_its_reason_on_one_thread_and_on_the_pool() {
    for threads in [1, 2] {
        let got = on_workers(1, |comm| {
            let abort = AbortHandle::default();
            let a = abort.clone();
            let started = Instant::now();
            let t = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(150));
                a.abort("interrupted by the test");
                a.abort("a later reason is ignored");
            });
            let r = job(comm, threads, None, &abort);
            t.join().unwrap();
            (r, started.elapsed())
        });
        let (r, took) = &got[0];
        match r {
            Err(Error::Aborted(reason)) => assert_eq!(reason, "interrupted by the test"),
            other => panic!("{threads} threads: expected the abort, got {other:?}"),
        }
        assert!(*took < Duration::from_secs(10), "{threads} threads: the abort took {took:?}");
    }
}

#[test]
fn an_abort_stays_until_reset() {
    on_workers(2, |comm| {
        let abort = AbortHandle::default();
        abort.abort("early");
        assert!(abort.requested());
        assert!(matches!(job(comm, 1, Some(10), &abort), Err(Error::Aborted(r)) if r == "early"));
        abort.reset();
        assert!(!abort.requested());
        // Both workers aborted their first job alone; a fresh job on the same comm runs.
        job(comm, 1, Some(10_000), &abort).expect("a job after the reset");
    });
}
