//! Task-graph iterations that checkpoint (`Job::iterate_checkpointed`): 3 workers run 2 x 5
//! passes of a graph whose tasks keep state across passes; a run that fails in pass 8 and
//! is run again resumes after pass 6 (the newest of the checkpoints every 3 passes) and
//! ends with exactly the state of a run that never failed. A checkpoint of another job is
//! refused on every worker.

mod common;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use common::on_workers;
use heddle_comm::Communicator;
use heddle_dataflow::Options;
use heddle_task::{
    Compute, Context, Edge, Job, LoopCheckpointing, Plan, Produced, Result, RoundRobin, Source,
    TaskGraph, WorkerSpec,
};

fn workers(comm: &Communicator) -> Vec<WorkerSpec> {
    WorkerSpec::discover(comm).expect("discover")
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("heddle-loop-ckpt-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The pass index of loop counters `at` of `counts` (2 x 5).
fn pass_of(at: &[u64]) -> u64 {
    at[0] * 5 + at[1]
}

/// Emits pass + 1 .. pass + 10 on every pass (stateless: the pass is in the counters).
struct PerPass {
    next: Option<u64>,
}

impl Source for PerPass {
    type Out = u64;
    fn next(&mut self, ctx: &mut Context<'_, u64>) -> Result<Produced> {
        let pass = pass_of(ctx.iteration());
        let next = self.next.get_or_insert(1);
        ctx.emit(pass * 100 + *next);
        *next += 1;
        if *next > 10 {
            self.next = None;
            return Ok(Produced::Done);
        }
        Ok(Produced::More)
    }
}

/// Sums what it receives over every pass (its state), failing in pass `fail` if set;
/// logs the passes it ran and its state at the end of each.
struct Sum {
    total: u64,
    fail: Option<u64>,
    log: Arc<Mutex<Vec<(u64, u64)>>>,
}

impl Compute for Sum {
    type In = u64;
    type Out = ();
    fn execute(&mut self, _: &mut Context<'_, ()>, x: u64) -> Result<()> {
        self.total = self.total.wrapping_mul(31).wrapping_add(x); // order-sensitive
        Ok(())
    }
    fn end_of_input(&mut self, ctx: &mut Context<'_, ()>) -> Result<()> {
        let pass = pass_of(ctx.iteration());
        if self.fail == Some(pass) {
            return Err(heddle_task::Error::Task {
                task: ctx.info().to_string(),
                message: format!("an injected failure in pass {pass}"),
            });
        }
        self.log.lock().unwrap().push((pass, self.total));
        Ok(())
    }
    fn snapshot(&mut self, _: &mut Context<'_, ()>, _: u64) -> Result<Option<Vec<u8>>> {
        Ok(Some(self.total.to_le_bytes().to_vec()))
    }
    fn restore(&mut self, _: &mut Context<'_, ()>, state: &[u8]) -> Result<()> {
        self.total = u64::from_le_bytes(state.try_into().expect("8 bytes"));
        Ok(())
    }
}

/// Runs 2 x 5 passes on 3 workers; returns each worker's (resumed from, log) or error.
fn run(dir: &std::path::Path, job: &str, fail: Option<u64>) -> Vec<Result<(u64, Vec<(u64, u64)>)>> {
    on_workers(3, |comm| {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut g = TaskGraph::new();
        let src = g.source("src", 3, |_| PerPass { next: None });
        let l = log.clone();
        let sum = g.compute("sum", 3, move |i| Sum {
            total: 0,
            fail: fail.filter(|_| i == 1),
            log: l.clone(),
        });
        g.connect(&src, &sum, Edge::direct());
        let plan = Plan::new(&g, &workers(comm), &RoundRobin).unwrap();
        let mut job_run = Job::new(comm, &g, &plan, Options::batch()).unwrap();
        let config = LoopCheckpointing::new(dir, job, 3);
        let from = job_run.iterate_checkpointed(&[2, 5], &config)?;
        job_run.close()?;
        let log = log.lock().unwrap().clone();
        Ok((from, log))
    })
}

#[test]
fn a_failed_iteration_resumes_after_its_newest_checkpoint_with_the_same_state() {
    let (plain_dir, ckpt_dir) = (dir("plain"), dir("resumed"));
    let plain = run(&plain_dir, "sums", None);
    let failed = run(&ckpt_dir, "sums", Some(7));
    assert!(failed.iter().all(Result::is_err), "the injected failure must fail every worker");
    let resumed = run(&ckpt_dir, "sums", None);
    for (p, r) in plain.into_iter().zip(resumed) {
        let (p_from, p_log) = p.expect("the plain run");
        let (r_from, r_log) = r.expect("the resumed run");
        assert_eq!((p_from, r_from), (0, 6));
        assert_eq!(p_log.len(), 10);
        // The resumed run ran passes 6..10 and ended in the same states.
        assert_eq!(r_log.iter().map(|(p, _)| *p).collect::<Vec<_>>(), vec![6, 7, 8, 9]);
        assert_eq!(r_log, p_log[6..].to_vec());
    }
    let _ = std::fs::remove_dir_all(&plain_dir);
    let _ = std::fs::remove_dir_all(&ckpt_dir);
}

#[test]
fn a_loop_checkpoint_of_another_job_is_refused_on_every_worker() {
    let d = dir("foreign");
    for r in run(&d, "first", None) {
        r.expect("the first run");
    }
    for r in run(&d, "second", None) {
        let e = r.expect_err("another job's checkpoint").to_string();
        assert!(e.contains("another job: \"first\", not \"second\""), "{e}");
        assert!(e.contains("loop-000000000009.ckpt"), "{e}");
    }
    let _ = std::fs::remove_dir_all(&d);
}
