//! The task system against naive references: graphs on 1-4 workers (threads with
//! in-process transports), edge kinds, iterations and BSP inside tasks, failures, stops
//! and sort edges (plans: `task_plans.rs`; strategies: `task_strategies.rs`).

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use common::{on_workers, Keyed, Numbers};
use heddle_comm::{CommConfig, Communicator};
use heddle_dataflow::{Options, TaskId};
use heddle_task::{
    Compute, Context, Edge, Error, Job, Plan, Produced, Result, RoundRobin, Source, TaskGraph,
    WorkerSpec,
};

/// Collects what it receives into a shared vector.
struct Collect<T>(Arc<Mutex<Vec<T>>>);

impl<T: Send + 'static> Compute for Collect<T> {
    type In = T;
    type Out = ();
    fn execute(&mut self, _: &mut Context<'_, ()>, x: T) -> Result<()> {
        self.0.lock().unwrap().push(x);
        Ok(())
    }
}

fn workers(comm: &Communicator) -> Vec<WorkerSpec> {
    WorkerSpec::discover(comm).expect("discover")
}

/// numbers -> (chained) keyed -> keyed_reduce -> collect, on 1-4 workers with 1-3
/// instances per worker, both modes: the counts per key match a plain count.
#[test]
fn keyed_counts_match_a_plain_count() {
    let (n, keys) = (10_000u64, 37u64);
    for workers_n in 1..=4usize {
        for per in 1..=3u32 {
            let p = workers_n as u32 * per;
            let got = on_workers(workers_n, |comm| {
                let out = Arc::new(Mutex::new(Vec::new()));
                let mut g = TaskGraph::new();
                let src = g.source("numbers", p, move |i| Numbers {
                    next: n * u64::from(i) / u64::from(p),
                    end: n * u64::from(i + 1) / u64::from(p),
                    per_call: 100,
                });
                let key = g.compute("key", p, move |_| Keyed { keys });
                let o = out.clone();
                let sink = g.compute("collect", p, move |_| Collect(o.clone()));
                g.connect(&src, &key, Edge::direct());
                g.connect(&key, &sink, Edge::keyed_reduce(|a: u64, b| a + b));
                let plan = Plan::new(&g, &workers(comm), &RoundRobin).unwrap();
                assert!(
                    plan.edges[0].chained,
                    "direct edge between co-located instances is chained"
                );
                Job::new(comm, &g, &plan, Options::batch()).unwrap().run().unwrap();
                let v = out.lock().unwrap().clone();
                v
            });
            let mut total: BTreeMap<u64, u64> = BTreeMap::new();
            for (k, c) in got.into_iter().flatten() {
                assert!(total.insert(k, c).is_none(), "key {k} reported twice");
            }
            let mut want = BTreeMap::new();
            for x in 0..n {
                *want.entry(x % keys).or_insert(0) += 1;
            }
            assert_eq!(total, want, "{workers_n} workers, {per} per worker");
        }
    }
}

/// Every edge kind delivers what a plain computation says, in both modes.
#[test]
fn every_edge_kind_in_both_modes() {
    for opts in [Options::batch(), Options::streaming()] {
        for workers_n in [1usize, 2, 3] {
            let results = on_workers(workers_n, |comm| {
                let p = comm.size() as u32;
                let mk = |g: &mut TaskGraph, name: &str| {
                    g.source(name, p, move |i| Numbers {
                        next: u64::from(i) * 100,
                        end: u64::from(i) * 100 + 100,
                        per_call: 7,
                    })
                };
                let mut g = TaskGraph::new();
                let a = mk(&mut g, "a");
                let (part, bcast, red, gat) = (
                    Arc::new(Mutex::new(vec![])),
                    Arc::new(Mutex::new(vec![])),
                    Arc::new(Mutex::new(vec![])),
                    Arc::new(Mutex::new(vec![])),
                );
                let (pc, bc, rc, gc) = (part.clone(), bcast.clone(), red.clone(), gat.clone());
                let s1 = g.compute("part", p, move |_| Collect(pc.clone()));
                let s2 = g.compute("bcast", p, move |_| Collect(bc.clone()));
                let s3 = g.compute("reduce", 1, move |_| Collect(rc.clone()));
                let s4 = g.compute("gather", 1, move |_| Collect::<(TaskId, u64)>(gc.clone()));
                g.connect(&a, &s1, Edge::partition(move |x: &u64| (*x % 7) as usize));
                g.connect(&a, &s2, Edge::broadcast());
                g.connect(&a, &s3, Edge::reduce(|x: u64, y| x + y));
                g.connect(&a, &s4, Edge::gather());
                let plan = Plan::new(&g, &workers(comm), &RoundRobin).unwrap();
                Job::new(comm, &g, &plan, opts.clone()).unwrap().run().unwrap();
                let collected = (
                    part.lock().unwrap().clone(),
                    bcast.lock().unwrap().clone(),
                    red.lock().unwrap().clone(),
                    gat.lock().unwrap().clone(),
                );
                collected
            });
            let p = workers_n as u64;
            let all: Vec<u64> = (0..p * 100).collect();
            let mut parts: Vec<u64> = results.iter().flat_map(|r| r.0.clone()).collect();
            parts.sort_unstable();
            assert_eq!(parts, all, "partition delivers every record once ({:?})", opts.mode);
            for r in &results {
                let mut b = r.1.clone();
                b.sort_unstable();
                // Each broadcast instance on the worker receives everything.
                let instances = b.len() as u64 / (p * 100);
                assert_eq!(b.len() as u64, instances * p * 100);
                let mut want: Vec<u64> =
                    all.iter().flat_map(|&x| std::iter::repeat_n(x, instances as usize)).collect();
                want.sort_unstable();
                assert_eq!(b, want, "broadcast ({:?})", opts.mode);
            }
            let reduced: Vec<u64> = results.iter().flat_map(|r| r.2.clone()).collect();
            let gathered: Vec<(TaskId, u64)> = results.iter().flat_map(|r| r.3.clone()).collect();
            if opts.mode == heddle_dataflow::Mode::Batch {
                assert_eq!(reduced, vec![all.iter().sum::<u64>()], "batch reduce is one total");
            } else {
                assert!(!reduced.is_empty());
            }
            let mut g: Vec<u64> = gathered.iter().map(|x| x.1).collect();
            g.sort_unstable();
            assert_eq!(g, all, "gather ({:?})", opts.mode);
            for (task, x) in gathered {
                assert_eq!(u64::from(task), x / 100, "gathered records carry their source task");
            }
        }
    }
}

/// Emits 1..=10 on every pass.
struct PerPass {
    pass: Option<Vec<u64>>,
    next: u64,
}

impl Source for PerPass {
    type Out = u64;
    fn next(&mut self, ctx: &mut Context<'_, u64>) -> Result<Produced> {
        if self.pass.as_deref() != Some(ctx.iteration()) {
            self.pass = Some(ctx.iteration().to_vec());
            self.next = 1;
        }
        for _ in 0..3 {
            if self.next <= 10 {
                ctx.emit(self.next);
                self.next += 1;
            }
        }
        Ok(if self.next > 10 { Produced::Done } else { Produced::More })
    }
}

/// Keeps a running state across iterations and combines it with an allreduce on the
/// vertex communicator each iteration (BSP inside dataflow).
struct Accumulate {
    state: u64,
    log: Arc<Mutex<Vec<Snapshot>>>,
}

/// The state seen at one point: the records of an iteration and the running total.
type Snapshot = (Vec<u64>, u64);

impl Compute for Accumulate {
    type In = u64;
    type Out = ();
    fn execute(&mut self, _: &mut Context<'_, ()>, x: u64) -> Result<()> {
        self.state += x;
        Ok(())
    }
    fn end_of_input(&mut self, ctx: &mut Context<'_, ()>) -> Result<()> {
        let mut total = [self.state];
        ctx.comm()?.allreduce(&mut total, heddle_comm::Op::Sum)?;
        self.log.lock().unwrap().push((ctx.iteration().to_vec(), total[0]));
        Ok(())
    }
}

#[test]
fn nested_iterations_keep_task_state_and_run_collectives_inside_tasks() {
    for n in 1..=3usize {
        let logs = on_workers(n, |comm| {
            let p = comm.size() as u32;
            let log = Arc::new(Mutex::new(Vec::new()));
            let mut g = TaskGraph::new();
            // Every pass, instance i emits 1..=10 (its state grows by 55 per pass).
            let src = g.source("src", p, |_| PerPass { pass: None, next: 1 });
            let l = log.clone();
            let acc = g.compute("acc", p, move |_| Accumulate { state: 0, log: l.clone() });
            g.connect(&src, &acc, Edge::direct());
            g.collective(&acc);
            let plan = Plan::new(&g, &workers(comm), &RoundRobin).unwrap();
            let mut job = Job::new(comm, &g, &plan, Options::batch()).unwrap();
            job.iterate(&[2, 3]).unwrap();
            let report = job.close().unwrap();
            assert_eq!(report.passes, 6);
            let l = log.lock().unwrap().clone();
            l
        });
        for log in logs {
            let want: Vec<(Vec<u64>, u64)> =
                (0..6u64).map(|k| (vec![k / 3, k % 3], 55 * (k + 1) * n as u64)).collect();
            assert_eq!(log, want, "{n} workers");
        }
    }
}

#[test]
fn a_collective_vertex_needs_one_instance_per_worker() {
    let comm = heddle_comm::solo(CommConfig::default()).unwrap();
    let mut g = TaskGraph::new();
    let src = g.source("src", 2, |_| Numbers { next: 0, end: 1, per_call: 1 });
    let acc = g.compute("acc", 2, |_| Accumulate { state: 0, log: Arc::default() });
    g.connect(&src, &acc, Edge::direct());
    g.collective(&acc);
    let plan = Plan::new(&g, &workers(&comm), &RoundRobin).unwrap();
    let e = Job::new(&comm, &g, &plan, Options::batch()).unwrap_err().to_string();
    assert!(e.contains("'acc' has 2 instances on one worker"), "{e}");
}

/// Fails on the record `bad`.
struct Fragile {
    bad: u64,
}

impl Compute for Fragile {
    type In = u64;
    type Out = ();
    fn execute(&mut self, _: &mut Context<'_, ()>, x: u64) -> Result<()> {
        if x == self.bad {
            return Err(Error::Graph(format!("cannot take {x}")));
        }
        Ok(())
    }
}

#[test]
fn a_failing_task_ends_the_job_with_its_name() {
    let comm = heddle_comm::solo(CommConfig::default()).unwrap();
    let mut g = TaskGraph::new();
    let src = g.source("src", 1, |_| Numbers { next: 0, end: 100, per_call: 10 });
    let f = g.compute("fragile", 1, |_| Fragile { bad: 42 });
    g.connect(&src, &f, Edge::hash());
    let plan = Plan::new(&g, &workers(&comm), &RoundRobin).unwrap();
    let e = Job::new(&comm, &g, &plan, Options::batch()).unwrap().run().unwrap_err();
    assert!(matches!(&e, Error::Task { task, .. } if task == "fragile[0]"), "{e}");
    assert!(e.to_string().contains("cannot take 42"), "{e}");
}

/// An endless source: emits increasing numbers until stopped.
struct Endless(u64);

impl Source for Endless {
    type Out = u64;
    fn next(&mut self, ctx: &mut Context<'_, u64>) -> Result<Produced> {
        for _ in 0..64 {
            ctx.emit(self.0);
            self.0 += 1;
        }
        Ok(Produced::More)
    }
}

/// Stops the job after `after` records.
struct StopAfter {
    after: usize,
    seen: Arc<Mutex<Vec<u64>>>,
    stop: Arc<Mutex<Option<heddle_task::StopHandle>>>,
}

impl Compute for StopAfter {
    type In = u64;
    type Out = ();
    fn execute(&mut self, _: &mut Context<'_, ()>, x: u64) -> Result<()> {
        self.seen.lock().unwrap().push(x);
        if self.seen.lock().unwrap().len() == self.after {
            if let Some(h) = self.stop.lock().unwrap().as_ref() {
                h.stop();
            }
        }
        Ok(())
    }
}

#[test]
fn a_streaming_job_runs_until_stopped_and_loses_nothing_sent() {
    let results = on_workers(2, |comm| {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(Mutex::new(None));
        let mut g = TaskGraph::new();
        let src = g.source("endless", 2, |i| Endless(u64::from(i) << 40));
        let (s, h) = (seen.clone(), stop.clone());
        let sink = g.compute("sink", 2, move |_| StopAfter {
            after: 5000,
            seen: s.clone(),
            stop: h.clone(),
        });
        g.connect(&src, &sink, Edge::hash());
        let plan = Plan::new(&g, &workers(comm), &RoundRobin).unwrap();
        let job = Job::new(comm, &g, &plan, Options::streaming()).unwrap();
        *stop.lock().unwrap() = Some(job.stop_handle());
        let report = job.run().unwrap();
        let emitted: u64 =
            report.tasks.iter().filter(|t| t.task.starts_with("endless")).map(|t| t.emitted).sum();
        let v = seen.lock().unwrap().clone();
        (v, emitted)
    });
    // Everything emitted by both sources arrived somewhere, each once.
    let emitted: u64 = results.iter().map(|r| r.1).sum();
    let mut all: Vec<u64> = results.into_iter().flat_map(|r| r.0).collect();
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "no record arrived twice");
    assert_eq!(n as u64, emitted, "every emitted record arrived");
    assert!(n >= 5000);
}

/// Keeps `(instance, record)` for each record it receives, in arrival order.
struct ByInstance(Arc<Mutex<Vec<InstanceRecord>>>);

/// An instance and a record it received.
type InstanceRecord = (u32, (u64, u64));

impl Compute for ByInstance {
    type In = (u64, u64);
    type Out = ();
    fn execute(&mut self, ctx: &mut Context<'_, ()>, x: (u64, u64)) -> Result<()> {
        self.0.lock().unwrap().push((ctx.index(), x));
        Ok(())
    }
}

/// Keys scattered by a multiplicative hash, value the record's number.
struct Scatter;

impl Compute for Scatter {
    type In = u64;
    type Out = (u64, u64);
    fn execute(&mut self, ctx: &mut Context<'_, (u64, u64)>, x: u64) -> Result<()> {
        ctx.emit((x.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1000, x));
        Ok(())
    }
}

/// A sort edge over 3 instances on 1-3 workers, with a budget small enough to spill: each
/// instance receives its key range sorted, and all of them hold every record once.
#[test]
fn a_sort_edge_sorts_each_range_and_the_ranges_follow_each_other() {
    let n = 20_000u64;
    let dir = std::env::temp_dir().join(format!("heddle-task-sort-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for workers_n in 1..=3usize {
        let got = on_workers(workers_n, |comm| {
            let out = Arc::new(Mutex::new(Vec::new()));
            let mut g = TaskGraph::new();
            let p = workers_n as u32;
            let src = g.source("numbers", p, move |i| Numbers {
                next: n * u64::from(i) / u64::from(p),
                end: n * u64::from(i + 1) / u64::from(p),
                per_call: 500,
            });
            let key = g.compute("scatter", p, |_| Scatter);
            let o = out.clone();
            let sink = g.compute("sorted", 3, move |_| ByInstance(o.clone()));
            g.connect(&src, &key, Edge::direct());
            g.connect(&key, &sink, Edge::sort(vec![333, 667]));
            let plan = Plan::new(&g, &workers(comm), &RoundRobin).unwrap();
            let opts = Options::batch().spill(16 << 10, vec![dir.clone()]);
            Job::new(comm, &g, &plan, opts).unwrap().run().unwrap();
            let v = out.lock().unwrap().clone();
            v
        });
        let all: Vec<(u32, (u64, u64))> = got.into_iter().flatten().collect();
        let mut records: Vec<u64> = all.iter().map(|(_, r)| r.1).collect();
        records.sort_unstable();
        assert_eq!(records, (0..n).collect::<Vec<_>>(), "{workers_n} workers: every record once");
        for i in 0..3u32 {
            let keys: Vec<u64> = all.iter().filter(|(at, _)| *at == i).map(|(_, r)| r.0).collect();
            assert!(
                keys.windows(2).all(|w| w[0] <= w[1]),
                "{workers_n} workers: instance {i} receives its range sorted"
            );
            let (lo, hi) = [(0, 333), (333, 667), (667, 1000)][i as usize];
            assert!(
                keys.iter().all(|k| (lo..hi).contains(k)),
                "{workers_n} workers: instance {i} holds keys {lo}..{hi}"
            );
        }
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "spill files removed");
    std::fs::remove_dir_all(&dir).unwrap();
}
