//! Flow control and barriers in the dataflow operations: a slow consumer stays within its
//! budget and loses nothing; checkpoint barriers are aligned, ordered after the data
//! before them, and pass through trees in every mode.

use std::collections::BTreeMap;

use heddle_comm::{local_world, CommConfig, Communicator};
use heddle_dataflow::{
    BroadcastTree, EdgeSpec, Event, Gather, Offer, Operation, Options, Partition, Placement, TaskId,
};

#[test]
fn a_slow_consumer_stays_within_budget_and_loses_nothing() {
    const BUDGET: u64 = 64 << 10;
    let comms = local_world(2, CommConfig::default()).unwrap();
    let records = 3000u64;
    std::thread::scope(|s| {
        for c in &comms {
            s.spawn(move || {
                let spec =
                    EdgeSpec::new(9, vec![0], vec![1], Placement::from_pairs([(0, 0), (1, 1)]));
                let opts = Options::streaming().budget(BUDGET).batch_size(4 << 10);
                let mut op = Partition::new(c, spec, opts, |_: &Vec<u8>| 0).unwrap();
                if c.rank() == 0 {
                    let mut full = 0;
                    for i in 0..records {
                        let mut item = vec![(i % 251) as u8; 1000];
                        item[..8].copy_from_slice(&i.to_le_bytes());
                        loop {
                            match op.offer(0, item).unwrap() {
                                Offer::Accepted => break,
                                Offer::Full(back) => {
                                    full += 1;
                                    item = back;
                                    if !op.progress().unwrap() {
                                        op.wait().unwrap();
                                    }
                                }
                            }
                        }
                    }
                    op.finish(0).unwrap();
                    while !op.is_done() {
                        if !op.progress().unwrap() {
                            op.wait().unwrap();
                        }
                    }
                    assert!(full > 0, "the slow consumer never pushed back");
                } else {
                    let mut next = 0u64;
                    loop {
                        op.progress().unwrap();
                        match op.poll(1) {
                            Some(Event::Data(item)) => {
                                assert_eq!(
                                    u64::from_le_bytes(item[..8].try_into().unwrap()),
                                    next,
                                    "records lost or reordered"
                                );
                                next += 1;
                                if next.is_multiple_of(100) {
                                    std::thread::sleep(std::time::Duration::from_millis(2));
                                }
                            }
                            Some(Event::End) => break,
                            Some(Event::Barrier(_)) => unreachable!(),
                            None => op.wait().unwrap(),
                        }
                    }
                    assert_eq!(next, records);
                    let (_, peak) = op.buffered_bytes();
                    assert!(
                        peak > 0 && peak <= BUDGET,
                        "peak buffered {peak} bytes exceeds the budget {BUDGET}"
                    );
                }
            });
        }
    });
}

#[test]
fn barriers_are_aligned_and_ordered_after_data() {
    // Three sources on two workers; each sends a different number of records before and
    // after barrier 7; one target must see every pre-barrier record, then the barrier,
    // then only post-barrier records.
    let comms = local_world(2, CommConfig::default()).unwrap();
    let placement = Placement::from_pairs([(0, 0), (1, 1), (2, 1), (3, 0)]);
    let out: Vec<Vec<Event<(u32, u32, bool)>>> = std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .iter()
            .map(|c| {
                let placement = placement.clone();
                s.spawn(move || {
                    let spec = EdgeSpec::new(10, vec![0, 1, 2], vec![3], placement.clone());
                    let mut op = Gather::new(c, spec, Options::streaming().batch_size(64)).unwrap();
                    let mine: Vec<u32> = [0u32, 1, 2]
                        .into_iter()
                        .filter(|&t| placement.worker(t).unwrap() == c.rank())
                        .collect();
                    for &src in &mine {
                        for i in 0..(20 + src * 30) {
                            assert_eq!(op.offer(src, (src, i, false)).unwrap(), Offer::Accepted);
                            op.progress().unwrap();
                        }
                        op.barrier(src, 7).unwrap();
                        for i in 0..(10 + src) {
                            assert_eq!(op.offer(src, (src, i, true)).unwrap(), Offer::Accepted);
                        }
                        op.finish(src).unwrap();
                    }
                    let mut events = Vec::new();
                    loop {
                        let moved = op.progress().unwrap();
                        while let Some(e) = op.poll(3) {
                            events.push(e);
                        }
                        if op.is_done() {
                            break;
                        }
                        if !moved {
                            op.wait().unwrap();
                        }
                    }
                    events
                        .into_iter()
                        .map(|e| match e {
                            Event::Data((_, r)) => Event::Data(r),
                            Event::Barrier(b) => Event::Barrier(b),
                            Event::End => Event::End,
                        })
                        .collect()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let events = &out[0];
    let at = events.iter().position(|e| *e == Event::Barrier(7)).expect("barrier delivered");
    assert_eq!(events.iter().filter(|e| matches!(e, Event::Barrier(_))).count(), 1);
    assert!(
        events[..at].iter().all(|e| matches!(e, Event::Data((_, _, false)))),
        "post-barrier data overtook the barrier"
    );
    assert!(events[at + 1..].iter().all(|e| matches!(e, Event::Data((_, _, true)) | Event::End)));
    let before = events[..at].len();
    assert_eq!(before, 20 + 50 + 80, "every pre-barrier record arrives before the barrier");
    assert_eq!(events.len() - at - 2, 10 + 11 + 12);
}

/// Runs barrier 5 between two phases of records through `make`'s operation on four
/// workers (two sources each) and checks every target sees all first-phase records, then
/// the barrier once, then only second-phase records. Operations that deliver results at
/// the end (`at_end`) must deliver the barrier once, before their results.
fn check_barrier_through<O>(
    edge: u32,
    at_end: bool,
    make: impl Fn(&Communicator, EdgeSpec) -> O + Sync,
    phase_of: impl Fn(&O::Out) -> bool + Sync,
) where
    O: Operation<In = (u32, u32, bool)>,
    O::Out: Send + std::fmt::Debug,
{
    let comms = local_world(4, CommConfig::default()).unwrap();
    let placement = Placement::round_robin(12, 4);
    let sources: Vec<TaskId> = (0..8).collect();
    let targets: Vec<TaskId> = (8..12).collect();
    std::thread::scope(|s| {
        for c in &comms {
            let (placement, sources, targets, make, phase_of) =
                (placement.clone(), sources.clone(), targets.clone(), &make, &phase_of);
            s.spawn(move || {
                let mut op = make(
                    c,
                    EdgeSpec::new(edge, sources.clone(), targets.clone(), placement.clone()),
                );
                let mine: Vec<TaskId> = sources
                    .iter()
                    .copied()
                    .filter(|&t| placement.worker(t).unwrap() == c.rank())
                    .collect();
                for &src in &mine {
                    for i in 0..(5 + src * 3) {
                        while let Offer::Full(_) = op.offer(src, (src, i, false)).unwrap() {
                            op.progress().unwrap();
                        }
                    }
                    op.barrier(src, 5).unwrap();
                    for i in 0..(2 + src) {
                        while let Offer::Full(_) = op.offer(src, (src, i, true)).unwrap() {
                            op.progress().unwrap();
                        }
                    }
                    op.finish(src).unwrap();
                }
                let local: Vec<TaskId> = op.local_targets();
                let mut events: BTreeMap<TaskId, Vec<Event<O::Out>>> =
                    local.iter().map(|&t| (t, Vec::new())).collect();
                loop {
                    let moved = op.progress().unwrap();
                    for (t, evs) in events.iter_mut() {
                        while let Some(e) = op.poll(*t) {
                            evs.push(e);
                        }
                    }
                    if op.is_done() {
                        break;
                    }
                    if !moved {
                        op.wait().unwrap();
                    }
                }
                for (t, evs) in events {
                    let at = evs
                        .iter()
                        .position(|e| matches!(e, Event::Barrier(5)))
                        .unwrap_or_else(|| panic!("target {t}: no barrier in {evs:?}"));
                    assert_eq!(evs.iter().filter(|e| matches!(e, Event::Barrier(_))).count(), 1);
                    if at_end {
                        assert_eq!(
                            at, 0,
                            "target {t}: the barrier must come before the end-of-input results"
                        );
                        assert_eq!(
                            evs.iter()
                                .filter(|e| matches!(e, Event::Data(d) if !phase_of(d)))
                                .count(),
                            (0..8).map(|s| 5 + s * 3).sum::<usize>()
                        );
                        continue;
                    }
                    assert!(
                        evs[..at].iter().all(|e| matches!(e, Event::Data(d) if !phase_of(d))),
                        "target {t}: second-phase data before the barrier"
                    );
                    assert!(
                        evs[at + 1..].iter().all(|e| matches!(e, Event::End)
                            || matches!(e, Event::Data(d) if phase_of(d))),
                        "target {t}: first-phase data after the barrier"
                    );
                }
            });
        }
    });
}

#[test]
fn barriers_pass_through_trees_and_every_mode() {
    type Rec = (u32, u32, bool);
    check_barrier_through(
        30,
        false,
        |c, spec| {
            Partition::broadcast_along(c, spec, Options::streaming(), BroadcastTree::Binomial)
                .unwrap()
        },
        |r: &Rec| r.2,
    );
    check_barrier_through(
        31,
        false,
        |c, spec| {
            Partition::broadcast_along(c, spec, Options::batch(), BroadcastTree::Ring).unwrap()
        },
        |r: &Rec| r.2,
    );
    check_barrier_through(
        32,
        true,
        |c, spec| Gather::new(c, spec, Options::batch()).unwrap(),
        |r: &(TaskId, Rec)| r.1 .2,
    );
    // Four source workers: a streaming gather climbs the worker tree.
    check_barrier_through(
        34,
        false,
        |c, spec| Gather::new(c, spec, Options::streaming()).unwrap(),
        |r: &(TaskId, Rec)| r.1 .2,
    );
    check_barrier_through(
        33,
        false,
        |c, spec| Partition::new(c, spec, Options::streaming(), |r: &Rec| r.1 as usize).unwrap(),
        |r: &Rec| r.2,
    );
}
