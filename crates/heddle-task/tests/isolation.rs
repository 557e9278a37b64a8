//! Isolated tasks (`TaskGraph::isolated`): the same graph run with its middle vertex as
//! threads and as child processes gives the same records (a keyed running count that
//! emits per record and a summary at the end of its input, drained a slice at a time);
//! the process's pid differs from the worker's; a panic in the process fails the job
//! naming the task and the panic; graphs that cannot isolate are refused.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use common::{on_workers, Numbers};
use heddle_dataflow::Options;
use heddle_task::{
    Compute, Context, Edge, Isolation, Job, Plan, Produced, Resources, Result, RoundRobin,
    TaskGraph, WorkerSpec,
};

/// Counts records per key (`x % 7`), emitting `(key, count, pid)` for each, then one
/// `(key, total, pid)` per key at the end, two per `drain` call.
#[derive(Default)]
struct Running {
    counts: BTreeMap<u64, u64>,
    ending: Vec<(u64, u64)>,
    panic_at: Option<u64>,
}

impl Compute for Running {
    type In = u64;
    type Out = (u64, u64, u32);
    fn execute(&mut self, ctx: &mut Context<'_, (u64, u64, u32)>, x: u64) -> Result<()> {
        assert!(self.panic_at != Some(x), "record {x} is poison");
        let c = self.counts.entry(x % 7).or_default();
        *c += 1;
        ctx.emit((x % 7, *c, std::process::id()));
        Ok(())
    }
    fn end_of_input(&mut self, _: &mut Context<'_, (u64, u64, u32)>) -> Result<()> {
        self.ending = self.counts.iter().map(|(&k, &n)| (k + 100, n)).collect();
        Ok(())
    }
    fn drain(&mut self, ctx: &mut Context<'_, (u64, u64, u32)>) -> Result<Produced> {
        for _ in 0..2 {
            let Some((k, n)) = self.ending.pop() else { return Ok(Produced::Done) };
            ctx.emit((k, n, std::process::id()));
        }
        Ok(if self.ending.is_empty() { Produced::Done } else { Produced::More })
    }
}

type Got = Arc<Mutex<Vec<(u64, u64, u32)>>>;

struct Collect(Got);
impl Compute for Collect {
    type In = (u64, u64, u32);
    type Out = ();
    fn execute(&mut self, _: &mut Context<'_, ()>, r: (u64, u64, u32)) -> Result<()> {
        self.0.lock().unwrap().push(r);
        Ok(())
    }
}

fn run(isolation: Isolation, panic_at: Option<u64>) -> (Vec<Result<()>>, Vec<(u64, u64, u32)>) {
    let got: Got = Arc::new(Mutex::new(Vec::new()));
    let results = on_workers(2, |comm| {
        let mut g = TaskGraph::new();
        let src = g.source("numbers", 2, |i| Numbers {
            next: u64::from(i) * 500,
            end: u64::from(i) * 500 + 500,
            per_call: 37,
        });
        let counter = g.isolated("counter", 2, move |_| Running { panic_at, ..Running::default() });
        g.resources(&counter, Resources::new(0.5, 256 << 20).isolation(isolation));
        let g2 = got.clone();
        let sink = g.compute("sink", 1, move |_| Collect(g2.clone()));
        g.connect(&src, &counter, Edge::hash());
        g.connect(&counter, &sink, Edge::hash());
        let plan = Plan::new(&g, &WorkerSpec::discover(comm)?, &RoundRobin)?;
        let report = Job::new(comm, &g, &plan, Options::batch())?.run()?;
        // Each counter instance here says what its process used (a thread: nothing),
        // its start covering its confinement.
        for t in report.tasks.iter().filter(|t| t.task.starts_with("counter")) {
            let fine = match (&t.process, isolation) {
                (None, Isolation::Thread) => true,
                (Some(u), Isolation::Process) => u.start_s > 0.0 && u.start_s >= u.confine_s,
                _ => false,
            };
            if !fine && panic_at.is_none() {
                return Err(heddle_task::Error::Graph(format!("{}: {:?}", t.task, t.process)));
            }
        }
        Ok(())
    });
    let mut records = got.lock().unwrap().clone();
    records.sort_unstable();
    (results, records)
}

#[test]
fn processes_and_threads_give_the_same_records() {
    let (ok, threads) = run(Isolation::Thread, None);
    assert!(ok.iter().all(Result::is_ok), "{ok:?}");
    let (ok, processes) = run(Isolation::Process, None);
    assert!(ok.iter().all(Result::is_ok), "{ok:?}");
    let me = std::process::id();
    assert!(threads.iter().all(|r| r.2 == me), "threads run in the test's process");
    assert!(processes.iter().all(|r| r.2 != me), "processes have pids of their own");
    let strip = |v: &[(u64, u64, u32)]| v.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>();
    assert_eq!(strip(&threads), strip(&processes));
    // 1000 numbers: one record each, plus one total per key and instance.
    let per_record = processes.iter().filter(|r| r.0 < 100).count();
    assert_eq!(per_record, 1000);
    let totals: u64 = processes.iter().filter(|r| r.0 >= 100).map(|r| r.1).sum();
    assert_eq!(totals, 1000);
}

#[test]
fn a_panic_in_the_process_fails_the_job_naming_the_task() {
    let (results, _) = run(Isolation::Process, Some(321));
    let failed: Vec<String> =
        results.iter().filter_map(|r| r.as_ref().err()).map(ToString::to_string).collect();
    assert!(
        failed.iter().any(|e| e.contains("counter[") && e.contains("record 321 is poison")),
        "{failed:?}"
    );
}

#[test]
fn graphs_that_cannot_isolate_are_refused() {
    let mut g = TaskGraph::new();
    let src = g.source("numbers", 1, |_| Numbers { next: 0, end: 1, per_call: 1 });
    let got: Got = Arc::default();
    let sink = g.compute("plain", 1, move |_| Collect(got.clone()));
    let c = g.isolated("c", 1, |_| Running::default());
    g.connect(&src, &c, Edge::direct());
    g.resources(&sink, Resources::default().isolation(Isolation::Process));
    let e = g.validate().unwrap_err().to_string();
    assert!(e.contains("'plain'") && e.contains("TaskGraph::isolated"), "{e}");

    let mut g = TaskGraph::new();
    let src = g.source("numbers", 1, |_| Numbers { next: 0, end: 1, per_call: 1 });
    let c = g.isolated("c", 1, |_| Running::default());
    g.connect(&src, &c, Edge::direct());
    g.collective(&c);
    let e = g.validate().unwrap_err().to_string();
    assert!(e.contains("'c'") && e.contains("collective"), "{e}");
}
