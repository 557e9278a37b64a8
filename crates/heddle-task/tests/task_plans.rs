//! Planning tasks onto workers: first-fit packing of resource requests, refusals naming
//! the task and its shortfall, data locality, the printed plan and malformed graphs.

mod common;

use common::{Keyed, Numbers};
use heddle_comm::{CommConfig, Communicator};
use heddle_task::{
    DataLocality, Edge, Error, FirstFit, Plan, Resources, RoundRobin, Scheduler, TaskGraph,
    WorkerSpec,
};
fn workers(comm: &Communicator) -> Vec<WorkerSpec> {
    WorkerSpec::discover(comm).expect("discover")
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
