//! The executor thread pool: chains of task instances spread over threads, each chain
//! on one thread; results equal a plain count; failures end the job. (The whole `tasks`
//! suite also runs on the pool under `HEDDLE_TASK_THREADS=2`, see the Makefile.)

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use common::on_workers;
use heddle_dataflow::Options;
use heddle_task::{
    Compute, Context, Edge, Error, Job, Plan, Produced, Result, RoundRobin, Source, TaskGraph,
    WorkerSpec,
};

/// (vertex, instance) -> names of the threads that ran it.
type Seen = Arc<Mutex<BTreeMap<(String, u32), BTreeSet<String>>>>;

fn note(seen: &Seen, ctx_name: &str, index: u32) {
    let thread = std::thread::current().name().unwrap_or("unnamed").to_string();
    seen.lock().unwrap().entry((ctx_name.to_string(), index)).or_default().insert(thread);
}

struct Numbers {
    next: u64,
    end: u64,
    seen: Seen,
}

impl Source for Numbers {
    type Out = u64;
    fn next(&mut self, ctx: &mut Context<'_, u64>) -> Result<Produced> {
        note(&self.seen, "numbers", ctx.index());
        while self.next < self.end && ctx.emitted() < 500 {
            ctx.emit(self.next);
            self.next += 1;
        }
        Ok(if self.next == self.end { Produced::Done } else { Produced::More })
    }
}

struct Keyed {
    keys: u64,
    seen: Seen,
    fail_at: Option<u64>,
}

impl Compute for Keyed {
    type In = u64;
    type Out = (u64, u64);
    fn execute(&mut self, ctx: &mut Context<'_, (u64, u64)>, x: u64) -> Result<()> {
        note(&self.seen, "key", ctx.index());
        if self.fail_at == Some(x) {
            return Err(Error::Graph(format!("record {x} is poisoned")));
        }
        ctx.emit((x % self.keys, 1));
        Ok(())
    }
}

struct Collect(Arc<Mutex<Vec<(u64, u64)>>>);

impl Compute for Collect {
    type In = (u64, u64);
    type Out = ();
    fn execute(&mut self, _: &mut Context<'_, ()>, x: (u64, u64)) -> Result<()> {
        self.0.lock().unwrap().push(x);
        Ok(())
    }
}

/// numbers -(direct, chained)-> key -(keyed reduce)-> collect with `per` instances per
/// worker on `threads` executor threads; returns the counts and what ran where.
type Outcome = (Result<Vec<(u64, u64)>>, Seen);

fn run(workers_n: usize, per: u32, threads: usize, n: u64, fail_at: Option<u64>) -> Vec<Outcome> {
    let p = workers_n as u32 * per;
    on_workers(workers_n, |comm| {
        let seen: Seen = Arc::default();
        let out = Arc::new(Mutex::new(Vec::new()));
        let mut g = TaskGraph::new();
        let s1 = seen.clone();
        let src = g.source("numbers", p, move |i| Numbers {
            next: n * u64::from(i) / u64::from(p),
            end: n * u64::from(i + 1) / u64::from(p),
            seen: s1.clone(),
        });
        let s2 = seen.clone();
        let key = g.compute("key", p, move |_| Keyed { keys: 41, seen: s2.clone(), fail_at });
        let o = out.clone();
        let sink = g.compute("collect", p, move |_| Collect(o.clone()));
        g.connect(&src, &key, Edge::direct());
        g.connect(&key, &sink, Edge::keyed_reduce(|a: u64, b| a + b));
        let plan = Plan::new(&g, &WorkerSpec::discover(comm).unwrap(), &RoundRobin).unwrap();
        let result = Job::new(comm, &g, &plan, Options::batch()).unwrap().threads(threads).run();
        (result.map(|_| out.lock().unwrap().clone()), seen)
    })
}

#[test]
fn chains_run_on_executor_threads_and_counts_match_a_plain_count() {
    let n = 200_000u64;
    for (workers_n, per, threads) in [(1usize, 3u32, 2usize), (2, 2, 2), (2, 3, 3)] {
        let got = run(workers_n, per, threads, n, None);
        let mut total: BTreeMap<u64, u64> = BTreeMap::new();
        for (result, seen) in got {
            for (k, c) in result.expect("the job succeeds") {
                assert!(total.insert(k, c).is_none(), "key {k} reported twice");
            }
            let seen = seen.lock().unwrap();
            let mut used = BTreeSet::new();
            for ((vertex, index), names) in seen.iter() {
                assert_eq!(names.len(), 1, "{vertex}[{index}] ran on one thread, not {names:?}");
                assert!(
                    names.iter().all(|t| t.starts_with("heddle-exec-")),
                    "{vertex}[{index}] ran on {names:?}, not a pool thread"
                );
                used.extend(names.iter().cloned());
                if vertex == "key" {
                    assert_eq!(
                        seen.get(&("numbers".to_string(), *index)),
                        Some(names),
                        "a chained pair shares its thread"
                    );
                }
            }
            assert_eq!(
                used.len(),
                threads.min(per as usize),
                "{workers_n} workers, {per} chains each, {threads} threads: {used:?}"
            );
        }
        let mut want = BTreeMap::new();
        for x in 0..n {
            *want.entry(x % 41).or_insert(0) += 1;
        }
        assert_eq!(total, want, "{workers_n} workers, {per} per worker, {threads} threads");
    }
}

#[test]
fn a_task_failing_on_a_pool_thread_ends_the_job_with_its_name() {
    let got = run(1, 2, 2, 100_000, Some(77_777));
    let (result, _) = &got[0];
    match result {
        Err(Error::Task { task, message }) => {
            assert_eq!(task, "key[1]");
            assert!(message.contains("record 77777 is poisoned"), "{message}");
        }
        other => panic!("expected the task's error, got {other:?}"),
    }
}
