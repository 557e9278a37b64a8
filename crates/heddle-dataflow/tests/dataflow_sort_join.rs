//! Sort, join and the operations that spill: checked against naive references over
//! 1–4 workers and both modes, with tiny budgets forcing spills to disk.

mod common;

use std::collections::BTreeMap;

use common::*;
use heddle_comm::{local_world, CommConfig};
use heddle_dataflow::{
    drive, EdgeSpec, Event, Join, JoinAlgorithm, JoinKind, JoinOn, Joined, KeyedGather,
    KeyedReduce, Mode, Options, Placement, Side, Sort, TaskId,
};

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
