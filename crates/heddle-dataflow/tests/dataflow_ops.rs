//! Every dataflow operation × both modes × 1–4 workers × 1–3 tasks per worker, with
//! skewed keys, empty inputs, a source that sends nothing and values larger than a
//! buffer, checked against naive references computed from all inputs at once.

use std::collections::{BTreeMap, HashMap, HashSet};

use heddle_comm::{local_world, local_world_on_hosts, CommConfig, Communicator};
use heddle_dataflow::{
    drive, BroadcastTree, EdgeSpec, Event, Gather, Join, JoinAlgorithm, JoinKind, JoinOn, Joined,
    KeyedGather, KeyedReduce, Mode, Offer, Operation, Options, Partition, Placement, Reduce, Side,
    Sort, TaskId,
};

/// A task layout: `per` sources per worker and as many targets, disjoint or the same tasks.
#[derive(Debug, Clone)]
struct Layout {
    workers: usize,
    sources: Vec<TaskId>,
    targets: Vec<TaskId>,
    placement: Placement,
}

fn layouts() -> Vec<Layout> {
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
fn run<O: Operation>(
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

fn data<T>(events: &[Event<T>]) -> Vec<&T> {
    assert!(matches!(events.last(), Some(Event::End)), "a target did not end");
    assert_eq!(
        events.iter().filter(|e| matches!(e, Event::End)).count(),
        1,
        "End must come exactly once"
    );
    events.iter().filter_map(|e| if let Event::Data(d) = e { Some(d) } else { None }).collect()
}

/// Source 0 sends nothing; source s sends `5 * s + (s % 3) * 40` records.
fn count(s: TaskId) -> u64 {
    if s == 0 {
        0
    } else {
        u64::from(5 * s + (s % 3) * 40)
    }
}

fn numbers(s: TaskId) -> Vec<u64> {
    (0..count(s)).map(|i| u64::from(s) * 100_000 + i).collect()
}

/// Skewed: most records carry key 0.
fn pairs(s: TaskId) -> Vec<(u32, i64)> {
    (0..count(s))
        .map(|i| (if i % 4 == 0 { (i % 13) as u32 } else { 0 }, i as i64 - i64::from(s)))
        .collect()
}

/// Both modes; a stuck operation fails the test within seconds instead of hanging.
fn modes() -> [Options; 2] {
    let t = Some(std::time::Duration::from_secs(10));
    [Options { timeout: t, ..Options::batch() }, Options { timeout: t, ..Options::streaming() }]
}

#[test]
fn partition_direct_union_broadcast() {
    for layout in layouts() {
        for opts in modes() {
            let n_t = layout.targets.len();
            let got = run(
                &layout,
                1,
                |c, spec| {
                    Partition::new(c, spec, opts.clone(), |x: &u64| (*x % 7) as usize).unwrap()
                },
                numbers,
            );
            for (i, &t) in layout.targets.iter().enumerate() {
                let mut have: Vec<u64> = data(&got[&t]).into_iter().copied().collect();
                let mut want: Vec<u64> = layout
                    .sources
                    .iter()
                    .flat_map(|&s| numbers(s))
                    .filter(|x| (*x % 7) as usize % n_t == i)
                    .collect();
                // Records of one source keep their order.
                for s in &layout.sources {
                    let from_s: Vec<u64> =
                        have.iter().copied().filter(|x| x / 100_000 == u64::from(*s)).collect();
                    assert!(from_s.windows(2).all(|w| w[0] < w[1]), "order from source {s} lost");
                }
                have.sort_unstable();
                want.sort_unstable();
                assert_eq!(have, want, "partition {layout:?} {:?}", opts.mode);
            }
            let got = run(
                &layout,
                2,
                |c, spec| Partition::direct(c, spec, opts.clone()).unwrap(),
                numbers,
            );
            for (i, &t) in layout.targets.iter().enumerate() {
                let have: Vec<u64> = data(&got[&t]).into_iter().copied().collect();
                assert_eq!(have, numbers(layout.sources[i]), "direct {layout:?}");
            }
            let got = run(
                &layout,
                15,
                |c, spec| Partition::by_hash(c, spec, opts.clone()).unwrap(),
                numbers,
            );
            let mut seen: Vec<u64> =
                got.values().flat_map(|evs| data(evs).into_iter().copied()).collect();
            let mut all: Vec<u64> = layout.sources.iter().flat_map(|&s| numbers(s)).collect();
            seen.sort_unstable();
            all.sort_unstable();
            assert_eq!(seen, all, "hash partition {layout:?}");
            // Range: splitters cut the value space into n_t ranges.
            let splitters: Vec<u64> = (1..n_t as u64).map(|i| i * 1_200_000 / n_t as u64).collect();
            let got = run(
                &layout,
                16,
                |c, spec| {
                    Partition::by_range(c, spec, opts.clone(), splitters.clone(), |x: &u64| *x)
                        .unwrap()
                },
                numbers,
            );
            for (i, &t) in layout.targets.iter().enumerate() {
                let lo = if i == 0 { 0 } else { splitters[i - 1] };
                let hi = splitters.get(i).copied().unwrap_or(u64::MAX);
                let mut have: Vec<u64> = data(&got[&t]).into_iter().copied().collect();
                let mut want: Vec<u64> =
                    all.iter().copied().filter(|x| *x >= lo && *x < hi).collect();
                have.sort_unstable();
                want.sort_unstable();
                assert_eq!(have, want, "range partition {layout:?}");
            }
            let got = run(
                &layout,
                14,
                |c, spec| Partition::union(c, spec, opts.clone()).unwrap(),
                numbers,
            );
            for (i, &t) in layout.targets.iter().enumerate() {
                let mut have: Vec<u64> = data(&got[&t]).into_iter().copied().collect();
                let mut want: Vec<u64> = layout
                    .sources
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| j % n_t == i)
                    .flat_map(|(_, &s)| numbers(s))
                    .collect();
                have.sort_unstable();
                want.sort_unstable();
                assert_eq!(have, want, "union {layout:?}");
            }
            let mut want: Vec<u64> = layout.sources.iter().flat_map(|&s| numbers(s)).collect();
            want.sort_unstable();
            let trees = [
                None,
                Some(BroadcastTree::Flat),
                Some(BroadcastTree::Binomial),
                Some(BroadcastTree::Binary),
                Some(BroadcastTree::Ring),
                Some(BroadcastTree::Hosts),
            ];
            for (i, tree) in trees.into_iter().enumerate() {
                let got = run(
                    &layout,
                    20 + i as u32,
                    |c, spec| match tree {
                        None => Partition::broadcast_direct(c, spec, opts.clone()).unwrap(),
                        Some(t) => Partition::broadcast_along(c, spec, opts.clone(), t).unwrap(),
                    },
                    numbers,
                );
                for t in &layout.targets {
                    let have: Vec<u64> = data(&got[t]).into_iter().copied().collect();
                    for s in &layout.sources {
                        let from_s: Vec<u64> =
                            have.iter().copied().filter(|x| x / 100_000 == u64::from(*s)).collect();
                        assert_eq!(
                            from_s,
                            numbers(*s),
                            "broadcast {tree:?} lost or reordered source {s}'s records"
                        );
                    }
                    let mut have = have;
                    have.sort_unstable();
                    assert_eq!(have, want, "broadcast {tree:?} {layout:?}");
                }
            }
        }
    }
}

#[test]
fn gather_and_allgather() {
    for layout in layouts() {
        for opts in modes() {
            // A tiny spill budget in batch mode: gathered records go through disk.
            let opts = opts.clone().spill(16 << 10, vec![std::env::temp_dir()]);
            let got =
                run(&layout, 4, |c, spec| Gather::new(c, spec, opts.clone()).unwrap(), numbers);
            let mut want: Vec<(TaskId, u64)> = layout
                .sources
                .iter()
                .flat_map(|&s| numbers(s).into_iter().map(move |x| (s, x)))
                .collect();
            want.sort_unstable();
            for t in &layout.targets {
                let have: Vec<(TaskId, u64)> = data(&got[t]).into_iter().copied().collect();
                if opts.mode == Mode::Batch {
                    assert_eq!(have, want, "batch gather is grouped by source in order {layout:?}");
                } else {
                    let mut sorted = have.clone();
                    sorted.sort_unstable();
                    assert_eq!(sorted, want, "gather {layout:?}");
                }
            }
        }
    }
}

#[test]
fn reduce_and_allreduce() {
    for layout in layouts() {
        for opts in modes() {
            let got = run(
                &layout,
                5,
                |c, spec| Reduce::new(c, spec, opts.clone(), |a: u64, b: u64| a + b).unwrap(),
                numbers,
            );
            let total: u64 = layout.sources.iter().flat_map(|&s| numbers(s)).sum();
            let any = layout.sources.iter().any(|&s| count(s) > 0);
            for t in &layout.targets {
                let have = data(&got[t]);
                match opts.mode {
                    Mode::Batch => assert_eq!(
                        have,
                        if any { vec![&total] } else { vec![] },
                        "batch reduce {layout:?}"
                    ),
                    // Streaming: the i-th outputs combine the i-th records; together they are
                    // the total.
                    Mode::Streaming => assert_eq!(
                        have.into_iter().sum::<u64>(),
                        total,
                        "streaming reduce {layout:?}"
                    ),
                }
            }
        }
    }
}

#[test]
fn keyed_reduce_with_skew() {
    for layout in layouts() {
        for opts in modes() {
            let got = run(
                &layout,
                6,
                |c, spec| KeyedReduce::new(c, spec, opts.clone(), |a: i64, b: i64| a + b).unwrap(),
                pairs,
            );
            let mut want: BTreeMap<u32, i64> = BTreeMap::new();
            for s in &layout.sources {
                for (k, v) in pairs(*s) {
                    *want.entry(k).or_default() += v;
                }
            }
            let mut have: BTreeMap<u32, i64> = BTreeMap::new();
            let mut owner: HashMap<u32, TaskId> = HashMap::new();
            for (t, events) in &got {
                for &(k, v) in data(events) {
                    // Each key lives on one target; streaming emits running totals, the last
                    // is final.
                    assert_eq!(*owner.entry(k).or_insert(*t), *t, "key {k} reached two targets");
                    have.insert(k, v);
                }
            }
            assert_eq!(have, want, "keyed_reduce {layout:?} {:?}", opts.mode);
        }
    }
}

#[test]
fn keyed_gather_groups_every_value() {
    for (layout, sorted) in layouts().into_iter().flat_map(|l| [(l.clone(), true), (l, false)]) {
        for opts in modes() {
            let make = |c: &Communicator, spec| match sorted {
                true => KeyedGather::new(c, spec, opts.clone()).unwrap(),
                false => KeyedGather::unsorted(c, spec, opts.clone()).unwrap(),
            };
            let got = run(&layout, 7, make, pairs);
            let mut want: BTreeMap<u32, Vec<i64>> = BTreeMap::new();
            for s in &layout.sources {
                for (k, v) in pairs(*s) {
                    want.entry(k).or_default().push(v);
                }
            }
            let mut have: BTreeMap<u32, Vec<i64>> = BTreeMap::new();
            for events in got.values() {
                let groups = data(events);
                if opts.mode == Mode::Batch && sorted {
                    assert!(
                        groups.windows(2).all(|w| w[0].0 < w[1].0),
                        "batch groups come once each, in key order"
                    );
                }
                if opts.mode == Mode::Batch {
                    let keys: HashSet<u32> = groups.iter().map(|g| g.0).collect();
                    assert_eq!(keys.len(), groups.len(), "batch groups come once each");
                }
                for (k, vs) in groups {
                    have.entry(*k).or_default().extend(vs);
                }
            }
            for vs in have.values_mut().chain(want.values_mut()) {
                vs.sort_unstable();
            }
            assert_eq!(have, want, "keyed_gather {layout:?} {:?}", opts.mode);
        }
    }
}

#[test]
fn values_larger_than_a_buffer() {
    let layout = Layout {
        workers: 3,
        sources: vec![0, 1, 2],
        targets: vec![3, 4],
        placement: Placement::round_robin(5, 3),
    };
    let blob = |s: TaskId| -> Vec<Vec<u8>> {
        (0..4).map(|i| vec![(s * 10 + i) as u8; 100_000 + i as usize]).collect()
    };
    for opts in modes() {
        let got = run(
            &layout,
            8,
            |c, spec| Partition::broadcast(c, spec, opts.clone().batch_size(16 << 10)).unwrap(),
            blob,
        );
        let mut want: Vec<Vec<u8>> = layout.sources.iter().flat_map(|&s| blob(s)).collect();
        want.sort();
        for t in &layout.targets {
            let mut have: Vec<Vec<u8>> = data(&got[t]).into_iter().cloned().collect();
            have.sort();
            assert_eq!(have, want);
        }
    }
}

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

#[test]
fn keyed_gather_spills_to_disk_with_a_tiny_budget() {
    let dir = std::env::temp_dir().join(format!("heddle-df-spill-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let layout = Layout {
        workers: 3,
        sources: vec![0, 1, 2, 3, 4, 5],
        targets: vec![6, 7],
        placement: Placement::round_robin(8, 3),
    };
    let big = |s: TaskId| -> Vec<(u32, String)> {
        (0..400u32)
            .map(|i| ((i * 7 + s) % 37, format!("{s}-{i}-{}", "x".repeat((i % 50) as usize))))
            .collect()
    };
    let spilled = std::sync::atomic::AtomicU64::new(0);
    let comms = local_world(layout.workers, CommConfig::default()).unwrap();
    type Groups = BTreeMap<TaskId, Vec<Event<(u32, Vec<String>)>>>;
    let got: Groups = std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .iter()
            .map(|c| {
                let (layout, dir, spilled) = (&layout, &dir, &spilled);
                s.spawn(move || {
                    let spec = EdgeSpec::new(
                        11,
                        layout.sources.clone(),
                        layout.targets.clone(),
                        layout.placement.clone(),
                    );
                    let opts = Options::batch().spill(1024, vec![dir.clone()]);
                    let mut op = KeyedGather::new(c, spec, opts).unwrap();
                    let mine = layout
                        .sources
                        .iter()
                        .filter(|&&t| layout.placement.worker(t).unwrap() == c.rank())
                        .map(|&t| (t, big(t)))
                        .collect();
                    let out = drive(&mut op, mine).unwrap();
                    spilled.fetch_add(op.spilled_bytes(), std::sync::atomic::Ordering::SeqCst);
                    out
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert!(spilled.into_inner() > 0, "a 1 KiB budget must spill");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "spill files left behind");
    let mut want: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for s in &layout.sources {
        for (k, v) in big(*s) {
            want.entry(k).or_default().push(v);
        }
    }
    let mut have: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for events in got.values() {
        let groups = data(events);
        assert!(groups.windows(2).all(|w| w[0].0 < w[1].0), "groups in key order");
        for (k, vs) in groups {
            have.entry(*k).or_default().extend(vs.iter().cloned());
        }
    }
    for vs in have.values_mut().chain(want.values_mut()) {
        vs.sort();
    }
    assert_eq!(have, want);
    std::fs::remove_dir_all(&dir).unwrap();
}

fn keyed(s: TaskId) -> Vec<(u64, u32)> {
    (0..count(s) as u32)
        .map(|i| ((u64::from(i) * 2_654_435_761 + u64::from(s) * 97) % 1000, s * 1000 + i))
        .collect()
}

#[test]
fn sort_orders_each_range_and_all_of_them() {
    for layout in layouts() {
        let sample: Vec<u64> =
            layout.sources.iter().flat_map(|&s| keyed(s)).map(|(k, _)| k).step_by(3).collect();
        let splitters = Sort::<u64, u32>::splitters_from_sample(sample, layout.targets.len());
        let splitters: Vec<u64> = (0..layout.targets.len() - 1)
            .map(|i| splitters.get(i).copied().unwrap_or(u64::MAX))
            .collect();
        for budget in [64 << 20, 4096] {
            let opts = Options::batch().spill(budget, vec![std::env::temp_dir()]);
            let got = run(
                &layout,
                12,
                |c, spec| Sort::new(c, spec, opts.clone(), splitters.clone()).unwrap(),
                keyed,
            );
            let mut all = Vec::new();
            for t in &layout.targets {
                let part: Vec<(u64, u32)> = data(&got[t]).into_iter().copied().collect();
                assert!(
                    part.windows(2).all(|w| w[0].0 <= w[1].0),
                    "a target's output is not sorted {layout:?}"
                );
                if let (Some(last), Some(first)) = (all.last(), part.first()) {
                    let (prev, _): &(u64, u32) = last;
                    assert!(*prev <= first.0, "ranges overlap between targets");
                }
                all.extend(part);
            }
            let mut want: Vec<(u64, u32)> = layout.sources.iter().flat_map(|&s| keyed(s)).collect();
            want.sort_unstable();
            all.sort_unstable();
            assert_eq!(all, want, "sort {layout:?} budget {budget}");
        }
    }
}

fn join_reference(
    left: &[(u64, u32)],
    right: &[(u64, u32)],
    kind: JoinKind,
) -> Vec<Joined<u64, u32, u32>> {
    let mut rows = Vec::new();
    for &(k, l) in left {
        for &(k2, r) in right {
            if k == k2 {
                rows.push((k, Some(l), Some(r)));
            }
        }
    }
    if matches!(kind, JoinKind::Left | JoinKind::Full) {
        rows.extend(
            left.iter()
                .filter(|(k, _)| !right.iter().any(|(k2, _)| k2 == k))
                .map(|&(k, l)| (k, Some(l), None)),
        );
    }
    if matches!(kind, JoinKind::Right | JoinKind::Full) {
        rows.extend(
            right
                .iter()
                .filter(|(k, _)| !left.iter().any(|(k2, _)| k2 == k))
                .map(|&(k, r)| (k, None, Some(r))),
        );
    }
    rows.sort_unstable();
    rows
}

#[test]
fn join_every_kind_algorithm_and_mode() {
    let side = |s: TaskId| -> Vec<(u64, u32)> {
        (0..count(s) as u32).map(|i| (u64::from((i * 7 + s) % 23), s * 1000 + i)).collect()
    };
    for layout in layouts().into_iter().filter(|l| l.sources.len() >= 2) {
        let half = layout.sources.len() / 2;
        let left_sources: Vec<TaskId> = layout.sources[..half].to_vec();
        let left: Vec<(u64, u32)> = left_sources.iter().flat_map(|&s| side(s)).collect();
        let right: Vec<(u64, u32)> = layout.sources[half..].iter().flat_map(|&s| side(s)).collect();
        for kind in [JoinKind::Inner, JoinKind::Left, JoinKind::Right, JoinKind::Full] {
            let want = join_reference(&left, &right, kind);
            for (algorithm, opts) in [
                (JoinAlgorithm::Hash, Options::batch()),
                (JoinAlgorithm::Hash, Options::streaming()),
                (
                    JoinAlgorithm::SortMerge,
                    Options::batch().spill(4096, vec![std::env::temp_dir()]),
                ),
            ] {
                let input = |s: TaskId| -> Vec<(u64, Side<u32, u32>)> {
                    side(s)
                        .into_iter()
                        .map(|(k, v)| {
                            (
                                k,
                                if left_sources.contains(&s) {
                                    Side::Left(v)
                                } else {
                                    Side::Right(v)
                                },
                            )
                        })
                        .collect()
                };
                let got = run(
                    &layout,
                    13,
                    |c, spec| {
                        Join::new(
                            c,
                            spec,
                            opts.clone(),
                            JoinOn::new(kind, left_sources.clone()).algorithm(algorithm),
                        )
                        .unwrap()
                    },
                    input,
                );
                let mut have: Vec<Joined<u64, u32, u32>> = Vec::new();
                for events in got.values() {
                    let rows = data(events);
                    if opts.mode == Mode::Batch {
                        assert!(
                            rows.windows(2).all(|w| w[0].0 <= w[1].0),
                            "batch join rows come in key order"
                        );
                    }
                    have.extend(rows.into_iter().copied());
                }
                have.sort_unstable();
                assert_eq!(have, want, "{kind:?} {algorithm:?} {:?} {layout:?}", opts.mode);
            }
        }
    }
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

#[test]
fn keyed_reduce_spills_its_tables_with_a_tiny_budget() {
    let layout = Layout {
        workers: 3,
        sources: vec![0, 1, 2, 3, 4, 5],
        targets: vec![6, 7],
        placement: Placement::round_robin(8, 3),
    };
    let input = |s: TaskId| -> Vec<(u64, u64)> {
        (0..3000u64).map(|i| ((i * 7919 + u64::from(s)) % 1500, i)).collect()
    };
    let spilled = std::sync::atomic::AtomicU64::new(0);
    let comms = local_world(layout.workers, CommConfig::default()).unwrap();
    let got: BTreeMap<TaskId, Vec<Event<(u64, u64)>>> = std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .iter()
            .map(|c| {
                let (layout, spilled) = (&layout, &spilled);
                s.spawn(move || {
                    let spec = EdgeSpec::new(
                        17,
                        layout.sources.clone(),
                        layout.targets.clone(),
                        layout.placement.clone(),
                    );
                    let opts = Options::batch().spill(2048, vec![std::env::temp_dir()]);
                    let mut op = KeyedReduce::new(c, spec, opts, |a: u64, b: u64| a + b).unwrap();
                    let mine = layout
                        .sources
                        .iter()
                        .filter(|&&t| layout.placement.worker(t).unwrap() == c.rank())
                        .map(|&t| (t, input(t)))
                        .collect();
                    let out = drive(&mut op, mine).unwrap();
                    spilled.fetch_add(op.spilled_bytes(), std::sync::atomic::Ordering::SeqCst);
                    out
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert!(spilled.into_inner() > 0, "a 2 KiB budget must spill");
    let mut want: BTreeMap<u64, u64> = BTreeMap::new();
    for s in &layout.sources {
        for (k, v) in input(*s) {
            *want.entry(k).or_default() += v;
        }
    }
    let mut have = BTreeMap::new();
    for events in got.values() {
        let rows = data(events);
        assert!(rows.windows(2).all(|w| w[0].0 < w[1].0), "each key once, in key order");
        have.extend(rows.into_iter().copied());
    }
    assert_eq!(have, want);
}
