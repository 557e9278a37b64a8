//! Bridge tasks in a graph: the Python SDK's reference filter (`sdk/python`) as a vertex of
//! two instances on two workers, fed by a source and drained into a sink over a keyed
//! partition; and a failing filter ending the job with its error.

mod common;

use std::sync::{Arc, Mutex};

use common::on_workers;
use heddle_bridge::{BridgeConfig, FilterCommand, Record, Transport};
use heddle_dataflow::Options;
use heddle_task::{
    Compute, Context, Edge, Job, Plan, Produced, Result, RoundRobin, Source, TaskGraph, WorkerSpec,
};

fn reference() -> FilterCommand {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../sdk/python/tests/reference_filter.py");
    FilterCommand::new("python3").arg(path.display().to_string())
}

/// Emits words `w0 .. w{n}` keyed by themselves, instance i taking every p-th.
struct Words {
    next: u64,
    n: u64,
    step: u64,
}

impl Source for Words {
    type Out = Record;
    fn next(&mut self, ctx: &mut Context<'_, Record>) -> Result<Produced> {
        while self.next < self.n && ctx.emitted() < 64 {
            let w = format!("w{}", self.next);
            ctx.emit(Record::text(w.clone()).with_key(w.into_bytes()));
            self.next += self.step;
        }
        Ok(if self.next >= self.n { Produced::Done } else { Produced::More })
    }
}

struct Collect(Arc<Mutex<Vec<Record>>>);

impl Compute for Collect {
    type In = Record;
    type Out = ();
    fn execute(&mut self, _: &mut Context<'_, ()>, r: Record) -> Result<()> {
        self.0.lock().unwrap().push(r);
        Ok(())
    }
}

fn run(n: u64, extra: &[&str]) -> (Vec<Result<()>>, Vec<Record>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let results = on_workers(2, |comm| {
        let mut g = TaskGraph::new();
        let src = g.source("words", 2, move |i| Words { next: u64::from(i), n, step: 2 });
        let mut args = vec!["records=".to_string()];
        args.extend(extra.iter().cloned());
        let cfg = BridgeConfig::new("upper").transport(Transport::Unix).args(args);
        let up = g.bridge_with("upper", 2, reference(), cfg);
        let sink = g.compute("collect", 2, {
            let got = got.clone();
            move |_| Collect(got.clone())
        });
        g.connect(&src, &up, Edge::direct());
        g.connect(&up, &sink, Edge::partition(|r: &Record| r.key.len()));
        let plan = Plan::new(&g, &WorkerSpec::discover(comm)?, &RoundRobin)?;
        Job::new(comm, &g, &plan, Options::batch())?.run().map(drop)
    });
    let got = got.lock().unwrap().clone();
    (results, got)
}

#[test]
fn a_python_filter_runs_as_a_vertex_of_two_instances() {
    let (results, got) = run(500, &[]);
    for r in &results {
        assert!(r.is_ok(), "{r:?}");
    }
    let mut words: Vec<String> =
        got.iter().filter(|r| !r.key.is_empty()).map(|r| r.as_text().unwrap().to_owned()).collect();
    words.sort();
    let mut want: Vec<String> = (0..500).map(|i| format!("W{i}")).collect();
    want.sort();
    assert_eq!(words, want);
    let counts: u64 = got
        .iter()
        .filter(|r| r.key.is_empty())
        .map(|r| r.as_text().unwrap().strip_prefix("records=").unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(counts, 500, "each instance's finalize reports its share");
}

#[test]
fn a_failing_filter_fails_the_job_naming_the_task_and_record() {
    let (results, _) = run(200, &["7"]);
    let errs: Vec<String> =
        results.iter().filter_map(|r| r.as_ref().err()).map(|e| e.to_string()).collect();
    assert!(!errs.is_empty(), "the job should fail");
    assert!(
        errs.iter()
            .any(|e| e.contains("upper") && e.contains("record 7") && e.contains("asked to fail")),
        "{errs:?}"
    );
}
