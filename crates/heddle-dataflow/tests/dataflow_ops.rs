//! Every dataflow operation × both modes × 1–4 workers × 1–3 tasks per worker, with
//! skewed keys, empty inputs, a source that sends nothing and values larger than a
//! buffer, checked against naive references computed from all inputs at once
//! (partition, direct, union, broadcast, gather, reduce, keyed operations).

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};

use common::*;
use heddle_comm::Communicator;
use heddle_dataflow::{
    BroadcastTree, Gather, KeyedGather, KeyedReduce, Mode, Partition, Placement, Reduce, TaskId,
};

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
