//! Broadcast edges through the workers' shared slots: on one host, a relayed batch of at
//! least 16 KiB is written once and copied out by each same-host child. Every target gets
//! every source's records, in order, for every tree, both modes, 3–5 workers, small and
//! large records (some larger than a slot); the shared path is taken; every slot is free
//! again once the edge is done; on two hosts only same-host children share.

use std::sync::Barrier;

use heddle_comm::{local_world_on_hosts, CommConfig};

/// Each source's records.
type Input<'a> = &'a (dyn Fn(TaskId) -> Vec<Vec<u8>> + Sync);
use heddle_dataflow::{
    drive, BroadcastTree, EdgeSpec, Event, Options, Partition, Placement, TaskId,
};

/// Records of source `s`: `n` of them, record `i` of `size(i)` bytes, tagged.
fn records(s: TaskId, n: usize, size: impl Fn(usize) -> usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut r = vec![(s as usize * 7 + i) as u8; size(i).max(8)];
            r[..4].copy_from_slice(&s.to_le_bytes());
            r[4..8].copy_from_slice(&(i as u32).to_le_bytes());
            r
        })
        .collect()
}

struct Run {
    /// Every target's records, per worker.
    got: Vec<Vec<(TaskId, Vec<Vec<u8>>)>>,
    shared: u64,
    held_after: usize,
}

fn run(hosts: &[u32], tree: BroadcastTree, opts: &Options, input: Input<'_>) -> Run {
    let workers = hosts.len();
    let sources: Vec<TaskId> = (0..workers as u32).collect();
    let targets: Vec<TaskId> = (workers as u32..2 * workers as u32).collect();
    let placement = Placement::round_robin(2 * workers as u32, workers);
    let config =
        CommConfig { timeout: std::time::Duration::from_secs(20), ..CommConfig::default() };
    let comms = local_world_on_hosts(hosts, config).unwrap();
    let done = Barrier::new(workers);
    let per_worker: Vec<(Vec<(TaskId, Vec<Vec<u8>>)>, u64, usize)> = std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .iter()
            .map(|c| {
                let spec = EdgeSpec::new(3, sources.clone(), targets.clone(), placement.clone());
                let (placement, done) = (&placement, &done);
                let sources = &sources;
                s.spawn(move || {
                    let mut op = Partition::broadcast_along(c, spec, opts.clone(), tree).unwrap();
                    let mine: Vec<(TaskId, Vec<Vec<u8>>)> = sources
                        .iter()
                        .filter(|&&t| placement.worker(t).unwrap() == c.rank())
                        .map(|&t| (t, input(t)))
                        .collect();
                    let events = drive(&mut op, mine).unwrap();
                    let shared = op.shared_messages();
                    drop(op);
                    done.wait();
                    let held = c.open_edge(77, 1 << 20).unwrap().link().shared_held();
                    let got = events
                        .into_iter()
                        .map(|(t, evs)| {
                            let recs = evs
                                .into_iter()
                                .filter_map(|e| match e {
                                    Event::Data(r) => Some(r),
                                    _ => None,
                                })
                                .collect();
                            (t, recs)
                        })
                        .collect();
                    (got, shared, held)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("worker panicked")).collect()
    });
    Run {
        shared: per_worker.iter().map(|w| w.1).sum(),
        held_after: per_worker.iter().map(|w| w.2).sum(),
        got: per_worker.into_iter().map(|w| w.0).collect(),
    }
}

fn check(run: &Run, workers: usize, input: Input<'_>, what: &str) {
    let mut targets = 0;
    for (t, recs) in run.got.iter().flatten() {
        targets += 1;
        for s in 0..workers as u32 {
            let from_s: Vec<&Vec<u8>> = recs.iter().filter(|r| r[..4] == s.to_le_bytes()).collect();
            let want = input(s);
            assert_eq!(from_s.len(), want.len(), "{what}: target {t} from source {s}");
            assert!(
                from_s.iter().zip(&want).all(|(a, b)| *a == b),
                "{what}: target {t}, source {s}"
            );
        }
        assert_eq!(recs.len(), workers * input(0).len(), "{what}: target {t}");
    }
    assert_eq!(targets, workers, "{what}");
    assert_eq!(run.held_after, 0, "{what}: shared slots still held");
}

#[test]
fn one_host_shares_relayed_batches_and_delivers_everything_in_order() {
    let small = |s| records(s, 3000, |i| 20 + i % 50);
    let large = |s| records(s, 12, |i| [1000, 70_000, 3 << 20][i % 3]);
    for workers in [3usize, 4, 5] {
        let hosts = vec![0u32; workers];
        for tree in [BroadcastTree::Flat, BroadcastTree::Binomial, BroadcastTree::Hosts] {
            for opts in [Options::batch(), Options::streaming()] {
                for (name, input) in [("small", &small as Input<'_>), ("large", &large)] {
                    let what = format!("{workers} workers, {tree:?}, {:?}, {name}", opts.mode);
                    eprintln!("{what}");
                    let r = run(&hosts, tree, &opts, input);
                    check(&r, workers, input, &what);
                    assert!(r.shared > 0, "{what}: nothing went through the shared slots");
                }
            }
        }
    }
}

#[test]
fn across_hosts_only_same_host_children_share() {
    let input = |s| records(s, 400, |i| 100 + i % 900);
    // Worker 0 alone on host 0: its children are on host 1 and read its batches from rings.
    let r = run(&[0, 1, 1, 1], BroadcastTree::Flat, &Options::batch(), &input);
    check(&r, 4, &input, "two hosts");
    let r = run(&[0, 1, 2, 3], BroadcastTree::Flat, &Options::batch(), &input);
    check(&r, 4, &input, "four hosts");
    assert_eq!(r.shared, 0, "no two workers share a host");
}
