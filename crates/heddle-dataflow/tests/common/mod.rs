//! What the dataflow operation tests share: task layouts over 1–4 workers, a runner that
//! drives an operation on every worker, and the inputs (skewed keys, an empty source).
#![allow(dead_code, unreachable_pub)] // each test file uses its part

use std::collections::BTreeMap;

use heddle_comm::{local_world_on_hosts, CommConfig, Communicator};
use heddle_dataflow::{drive, EdgeSpec, Event, Operation, Options, Placement, TaskId};
/// A task layout: `per` sources per worker and as many targets, disjoint or the same tasks.
#[derive(Debug, Clone)]
pub struct Layout {
    pub workers: usize,
    pub sources: Vec<TaskId>,
    pub targets: Vec<TaskId>,
    pub placement: Placement,
}

pub fn layouts() -> Vec<Layout> {
    let mut out = Vec::new();
    for workers in 1..=4usize {
        for per in 1..=3u32 {
            let n = workers as u32 * per;
            for overlap in [false, true] {
                let sources: Vec<TaskId> = (0..n).collect();
                let targets: Vec<TaskId> =
                    if overlap { sources.clone() } else { (n..2 * n).collect() };
                out.push(Layout {
                    workers,
                    sources,
                    targets,
                    placement: Placement::round_robin(2 * n, workers),
                });
            }
        }
    }
    out
}

/// Runs `make`'s operation on every worker with each source's input from `input`, and
/// returns every target's events.
pub fn run<O: Operation>(
    layout: &Layout,
    edge: u32,
    make: impl Fn(&Communicator, EdgeSpec) -> O + Sync,
    input: impl Fn(TaskId) -> Vec<O::In> + Sync,
) -> BTreeMap<TaskId, Vec<Event<O::Out>>>
where
    O::Out: Send,
{
    // Workers on two pretend hosts (even and odd): trees go per host first, as across
    // machines.
    let hosts: Vec<u32> = (0..layout.workers as u32).map(|w| w % 2).collect();
    let comms = local_world_on_hosts(&hosts, CommConfig::default()).unwrap();
    std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .iter()
            .map(|c| {
                let (make, input) = (&make, &input);
                s.spawn(move || {
                    let spec = EdgeSpec::new(
                        edge,
                        layout.sources.clone(),
                        layout.targets.clone(),
                        layout.placement.clone(),
                    );
                    let mut op = make(c, spec);
                    let mine: Vec<(TaskId, Vec<O::In>)> = layout
                        .sources
                        .iter()
                        .filter(|&&t| layout.placement.worker(t).unwrap() == c.rank())
                        .map(|&t| (t, input(t)))
                        .collect();
                    drive(&mut op, mine).unwrap()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("worker panicked")).collect()
    })
}

pub fn data<T>(events: &[Event<T>]) -> Vec<&T> {
    assert!(matches!(events.last(), Some(Event::End)), "a target did not end");
    assert_eq!(
        events.iter().filter(|e| matches!(e, Event::End)).count(),
        1,
        "End must come exactly once"
    );
    events.iter().filter_map(|e| if let Event::Data(d) = e { Some(d) } else { None }).collect()
}

/// Source 0 sends nothing; source s sends `5 * s + (s % 3) * 40` records.
pub fn count(s: TaskId) -> u64 {
    if s == 0 {
        0
    } else {
        u64::from(5 * s + (s % 3) * 40)
    }
}

pub fn numbers(s: TaskId) -> Vec<u64> {
    (0..count(s)).map(|i| u64::from(s) * 100_000 + i).collect()
}

/// Skewed: most records carry key 0.
pub fn pairs(s: TaskId) -> Vec<(u32, i64)> {
    (0..count(s))
        .map(|i| (if i % 4 == 0 { (i % 13) as u32 } else { 0 }, i as i64 - i64::from(s)))
        .collect()
}

/// Both modes; a stuck operation fails the test within seconds instead of hanging.
pub fn modes() -> [Options; 2] {
    let t = Some(std::time::Duration::from_secs(10));
    [Options { timeout: t, ..Options::batch() }, Options { timeout: t, ..Options::streaming() }]
}

pub fn keyed(s: TaskId) -> Vec<(u64, u32)> {
    (0..count(s) as u32)
        .map(|i| ((u64::from(i) * 2_654_435_761 + u64::from(s) * 97) % 1000, s * 1000 + i))
        .collect()
}
