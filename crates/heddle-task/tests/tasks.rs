//! The task system against naive references: graphs on 1-4 workers (threads with
//! in-process transports), schedulers, strategies, iterations and BSP inside tasks.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{on_workers, Numbers};
use heddle_comm::{CommConfig, Communicator};
use heddle_dataflow::{Options, TaskId};
use heddle_task::{
    Compute, Context, DataLocality, Edge, Error, FirstFit, Job, Plan, Produced, Resources, Result,
    RoundRobin, Scheduler, Source, Strategy, TaskGraph, WorkerSpec,
};

/// Emits `(x % keys, 1)`.
struct Keyed {
    keys: u64,
}

impl Compute for Keyed {
    type In = u64;
    type Out = (u64, u64);
    fn execute(&mut self, ctx: &mut Context<'_, (u64, u64)>, x: u64) -> Result<()> {
        ctx.emit((x % self.keys, 1));
        Ok(())
    }
}

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

fn specs(caps: &[(&str, f64, u64)]) -> Vec<WorkerSpec> {
    caps.iter()
        .enumerate()
        .map(|(rank, (host, cpu, memory))| WorkerSpec {
            rank,
            host: host.to_string(),
            cpus: *cpu,
            memory: *memory,
        })
        .collect()
}

fn shape(name: &str, parallelism: u32, resources: Resources) -> heddle_task::VertexShape {
    heddle_task::VertexShape { name: name.into(), parallelism, resources }
}

#[test]
fn first_fit_packs_heterogeneous_workers_in_order() {
    let workers = specs(&[("a", 4.0, 8 << 30), ("b", 1.0, 1 << 30), ("c", 8.0, 64 << 30)]);
    let vs = vec![
        shape("big", 2, Resources::new(3.0, 4 << 30)),
        shape("small", 3, Resources::new(1.0, 1 << 29)),
    ];
    let plan = FirstFit.place(&vs, &workers).unwrap();
    // big[0] fills worker a to 1 cpu left; big[1] does not fit a or b -> c;
    // small[0] -> a (last cpu), small[1] -> b, small[2] -> c.
    assert_eq!(plan, vec![vec![0, 2], vec![0, 1, 2]]);
    // Deterministic.
    assert_eq!(FirstFit.place(&vs, &workers).unwrap(), plan);
}

#[test]
fn a_request_that_cannot_fit_names_the_task_and_the_shortfall() {
    let workers = specs(&[("a", 2.0, 1 << 30), ("b", 2.0, 1 << 30)]);
    let vs = vec![shape("train", 2, Resources::new(1.0, 3 << 30))];
    for s in [&FirstFit as &dyn Scheduler, &DataLocality, &RoundRobin] {
        let e = s.place(&vs, &workers).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::Plan(_)), "{msg}");
        assert!(
            msg.contains("train[0]")
                && msg.contains("short by 2 GiB of memory (asks 3 GiB, at most 1 GiB free"),
            "{s:?}: {msg}"
        );
    }
    let e = FirstFit
        .place(&[shape("hungry", 1, Resources::new(16.0, 0))], &workers)
        .unwrap_err()
        .to_string();
    assert!(e.contains("hungry[0]") && e.contains("cpu") && e.contains("asks 16"), "{e}");
}

#[test]
fn data_locality_prefers_the_hosts_that_hold_the_input() {
    let workers = specs(&[
        ("a", 2.0, 1 << 30),
        ("b", 2.0, 1 << 30),
        ("c", 2.0, 1 << 30),
        ("b", 2.0, 1 << 30),
    ]);
    let vs = vec![
        shape("read", 3, Resources::new(1.0, 0).on_hosts(["b"])),
        shape("free", 2, Resources::new(1.0, 0)),
    ];
    let plan = DataLocality.place(&vs, &workers).unwrap();
    // Workers 1 and 3 are on host b: read[0] -> 1, read[1] -> 3, read[2] -> 1 (room left).
    assert_eq!(plan[0], vec![1, 3, 1]);
    // The rest go where most cpu is free: a (2.0) then c (2.0).
    assert_eq!(plan[1], vec![0, 2]);
}

#[test]
fn the_plan_prints_every_task_and_edge() {
    let comm = heddle_comm::solo(CommConfig::default()).unwrap();
    let mut g = TaskGraph::new();
    let a = g.source("a", 2, |_| Numbers { next: 0, end: 0, per_call: 1 });
    let b = g.compute("b", 2, |_| Keyed { keys: 1 });
    g.connect(&a, &b, Edge::direct());
    let text = Plan::new(&g, &workers(&comm), &RoundRobin).unwrap().to_string();
    assert!(
        text.contains("a[0] a[1] b[0] b[1]") && text.contains("Direct (chained in memory)"),
        "{text}"
    );
}

#[test]
fn malformed_graphs_are_refused_with_the_reason() {
    let comm = heddle_comm::solo(CommConfig::default()).unwrap();
    let w = workers(&comm);
    let mut g = TaskGraph::new();
    let a = g.source("a", 2, |_| Numbers { next: 0, end: 0, per_call: 1 });
    let b = g.compute("b", 3, |_| Keyed { keys: 1 });
    g.connect(&a, &b, Edge::direct());
    let e = Plan::new(&g, &w, &RoundRobin).unwrap_err().to_string();
    assert!(e.contains("direct") && e.contains("equal parallelism"), "{e}");

    let mut g = TaskGraph::new();
    let _ = g.compute("orphan", 1, |_| Keyed { keys: 1 });
    let e = Plan::new(&g, &w, &RoundRobin).unwrap_err().to_string();
    assert!(e.contains("'orphan' has no input"), "{e}");

    let mut g = TaskGraph::new();
    let _ = g.source("zero", 0, |_| Numbers { next: 0, end: 0, per_call: 1 });
    assert!(Plan::new(&g, &w, &RoundRobin).unwrap_err().to_string().contains("parallelism 0"));

    for cpu in [0.0, -1.0, f64::NAN] {
        let mut g = TaskGraph::new();
        let v = g.source("spin", 1, |_| Numbers { next: 0, end: 0, per_call: 1 });
        g.resources(&v, Resources::new(cpu, 0));
        let e = Plan::new(&g, &w, &RoundRobin).unwrap_err().to_string();
        assert!(e.contains("vertex 'spin' requests") && e.contains("more than 0"), "{e}");
    }
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
