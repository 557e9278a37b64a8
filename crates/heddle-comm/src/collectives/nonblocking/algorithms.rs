//! The plans of the non-blocking collectives: which messages each rank sends and receives
//! in which round, and what it folds or copies after each. Ranks are communicator ranks;
//! lengths are elements.
//!
//! Buffers: [`DATA`] is the caller's buffer (the input, and the result where the call works
//! in place), [`TEMP`] holds incoming partial results, [`OUT`] a separate result.
//!
//! - barrier: dissemination, ⌈log₂p⌉ rounds of empty messages;
//! - bcast and reduce: binomial trees; allreduce: reduce then broadcast for small buffers,
//!   ring reduce-scatter then ring allgather for large ones (every rank folds each block in
//!   the same order, so all get the same bits);
//! - gather, scatter, allgather, alltoall and their v-forms: one round of direct messages;
//! - scan and exscan: recursive doubling (Hillis–Steele);
//! - reduce_scatter: the ring of allreduce, stopping after its reduce-scatter half.

use super::plan::{Local, Plan, Slot, Transfer};
use super::Blocks;

pub(crate) const DATA: usize = 0;
pub(crate) const TEMP: usize = 1;
pub(crate) const OUT: usize = 2;

/// Buffers from which allreduce takes the ring (bytes, and at least one element a rank).
pub(crate) const RING_MIN_BYTES: usize = 32 << 10;

/// ⌈log₂p⌉ rounds: send an empty message 2^k ranks on, receive one from 2^k ranks back.
pub(crate) fn barrier(rank: usize, size: usize) -> Plan {
    let mut plan = Plan::default();
    let empty = Slot::new(DATA, 0, 0);
    let mut d = 1;
    while d < size {
        let transfers = vec![
            Transfer::Send { to: (rank + d) % size, from: empty },
            Transfer::Recv { from: (rank + size - d) % size, into: empty },
        ];
        plan.round(transfers, Vec::new());
        d <<= 1;
    }
    plan
}

/// A rank's parent and children in the binomial tree rooted at `root`.
fn tree(rank: usize, size: usize, root: usize) -> (Option<usize>, Vec<usize>) {
    let rel = (rank + size - root) % size;
    let abs = |r: usize| (r + root) % size;
    let low = if rel == 0 { size.next_power_of_two() } else { rel & rel.wrapping_neg() };
    let parent = (rel != 0).then(|| abs(rel - low));
    let mut children = Vec::new();
    let mut mask = low >> 1;
    while mask > 0 {
        if rel + mask < size {
            children.push(abs(rel + mask));
        }
        mask >>= 1;
    }
    (parent, children)
}

/// Binomial tree from `root`: receive from the parent, then send to every child.
pub(crate) fn bcast(rank: usize, size: usize, root: usize, n: usize) -> Plan {
    let (parent, children) = tree(rank, size, root);
    let all = Slot::new(DATA, 0, n);
    let mut plan = Plan::default();
    if let Some(p) = parent {
        plan.round(vec![Transfer::Recv { from: p, into: all }], Vec::new());
    }
    let sends = children.iter().map(|&c| Transfer::Send { to: c, from: all }).collect();
    plan.round(sends, Vec::new());
    plan
}

/// Binomial tree to `root`: receive every child's partial result into [`TEMP`] and fold
/// them into [`DATA`], then send to the parent. Returns the plan and [`TEMP`]'s length.
pub(crate) fn reduce(rank: usize, size: usize, root: usize, n: usize) -> (Plan, usize) {
    let (parent, children) = tree(rank, size, root);
    let mut plan = Plan::default();
    gather_children(&mut plan, &children, n);
    if let Some(p) = parent {
        plan.round(vec![Transfer::Send { to: p, from: Slot::new(DATA, 0, n) }], Vec::new());
    }
    (plan, children.len() * n)
}

fn gather_children(plan: &mut Plan, children: &[usize], n: usize) {
    let temp = |i: usize| Slot::new(TEMP, i * n, n);
    let recvs =
        children.iter().enumerate().map(|(i, &c)| Transfer::Recv { from: c, into: temp(i) });
    let folds =
        (0..children.len()).map(|i| Local::Fold { into: Slot::new(DATA, 0, n), from: temp(i) });
    plan.round(recvs.collect(), folds.collect());
}

/// Allreduce in [`DATA`]; returns the plan and [`TEMP`]'s length.
pub(crate) fn allreduce(rank: usize, size: usize, n: usize, ring: bool) -> (Plan, usize) {
    if ring && n >= size {
        return ring_allreduce(rank, size, n);
    }
    let (parent, children) = tree(rank, size, 0);
    let all = Slot::new(DATA, 0, n);
    let mut plan = Plan::default();
    gather_children(&mut plan, &children, n);
    if let Some(p) = parent {
        plan.round(vec![Transfer::Send { to: p, from: all }], Vec::new());
        plan.round(vec![Transfer::Recv { from: p, into: all }], Vec::new());
    }
    let sends = children.iter().map(|&c| Transfer::Send { to: c, from: all }).collect();
    plan.round(sends, Vec::new());
    (plan, children.len() * n)
}

fn ring_allreduce(rank: usize, size: usize, n: usize) -> (Plan, usize) {
    let blocks = Blocks::even(n, size);
    let (mut plan, temp) = ring_reduce_scatter(rank, size, &blocks);
    let (right, left) = ((rank + 1) % size, (rank + size - 1) % size);
    for s in 0..size - 1 {
        let out = blocks.slot(DATA, (rank + size - s) % size);
        let inc = blocks.slot(DATA, (rank + 2 * size - s - 1) % size);
        let transfers =
            vec![Transfer::Send { to: right, from: out }, Transfer::Recv { from: left, into: inc }];
        plan.round(transfers, Vec::new());
    }
    (plan, temp)
}

/// p−1 ring steps after which rank r holds block r of [`DATA`] folded over every rank.
/// Returns the plan and [`TEMP`]'s length (the largest block).
pub(crate) fn ring_reduce_scatter(rank: usize, size: usize, blocks: &Blocks) -> (Plan, usize) {
    let (right, left) = ((rank + 1) % size, (rank + size - 1) % size);
    let temp = (0..size).map(|i| blocks.counts()[i]).max().unwrap_or(0);
    let mut plan = Plan::default();
    for s in 0..size - 1 {
        let out = blocks.slot(DATA, (rank + 2 * size - s - 1) % size);
        let inc = blocks.slot(DATA, (rank + 2 * size - s - 2) % size);
        let into_temp = Slot::new(TEMP, 0, inc.len);
        let transfers = vec![
            Transfer::Send { to: right, from: out },
            Transfer::Recv { from: left, into: into_temp },
        ];
        plan.round(transfers, vec![Local::Fold { into: inc, from: into_temp }]);
    }
    (plan, temp)
}

/// Reduce-scatter: the ring's first half, then this rank's block copied to [`OUT`].
pub(crate) fn reduce_scatter(rank: usize, size: usize, blocks: &Blocks) -> (Plan, usize) {
    let (mut plan, temp) = ring_reduce_scatter(rank, size, blocks);
    let mine = blocks.slot(DATA, rank);
    plan.round(Vec::new(), vec![Local::Copy { to: Slot::new(OUT, 0, mine.len), from: mine }]);
    (plan, temp)
}

/// Gather into [`OUT`] at `root` (laid out by `blocks`, which only the root needs) from
/// [`DATA`] (`n` elements) everywhere.
pub(crate) fn gather(rank: usize, size: usize, root: usize, n: usize, blocks: &Blocks) -> Plan {
    let mut plan = Plan::default();
    let own = Slot::new(DATA, 0, n);
    if rank != root {
        plan.round(vec![Transfer::Send { to: root, from: own }], Vec::new());
        return plan;
    }
    let recvs = others(rank, size).map(|i| Transfer::Recv { from: i, into: blocks.slot(OUT, i) });
    plan.round(recvs.collect(), vec![Local::Copy { to: blocks.slot(OUT, rank), from: own }]);
    plan
}

/// Scatter from [`DATA`] at `root` (laid out by `blocks`) into [`OUT`] (`n` elements).
pub(crate) fn scatter(rank: usize, size: usize, root: usize, n: usize, blocks: &Blocks) -> Plan {
    let mut plan = Plan::default();
    let own = Slot::new(OUT, 0, n);
    if rank != root {
        plan.round(vec![Transfer::Recv { from: root, into: own }], Vec::new());
        return plan;
    }
    let sends = others(rank, size).map(|i| Transfer::Send { to: i, from: blocks.slot(DATA, i) });
    plan.round(sends.collect(), vec![Local::Copy { to: own, from: blocks.slot(DATA, rank) }]);
    plan
}

/// Allgather of [`DATA`] into [`OUT`] laid out by `blocks`.
pub(crate) fn allgather(rank: usize, size: usize, blocks: &Blocks) -> Plan {
    let own = Slot::new(DATA, 0, blocks.counts()[rank]);
    let mut transfers: Vec<Transfer> =
        others(rank, size).map(|i| Transfer::Recv { from: i, into: blocks.slot(OUT, i) }).collect();
    transfers.extend(others(rank, size).map(|i| Transfer::Send { to: i, from: own }));
    let mut plan = Plan::default();
    plan.round(transfers, vec![Local::Copy { to: blocks.slot(OUT, rank), from: own }]);
    plan
}

/// All-to-all from [`DATA`] laid out by `send` into [`OUT`] laid out by `recv`.
pub(crate) fn alltoall(rank: usize, size: usize, send: &Blocks, recv: &Blocks) -> Plan {
    let mut transfers: Vec<Transfer> =
        others(rank, size).map(|i| Transfer::Recv { from: i, into: recv.slot(OUT, i) }).collect();
    transfers
        .extend(others(rank, size).map(|i| Transfer::Send { to: i, from: send.slot(DATA, i) }));
    let mut plan = Plan::default();
    let own = Local::Copy { to: recv.slot(OUT, rank), from: send.slot(DATA, rank) };
    plan.round(transfers, vec![own]);
    plan
}

/// Inclusive prefix in [`DATA`] (and, if `exclusive`, the exclusive one in [`OUT`]) by
/// recursive doubling: ⌈log₂p⌉ rounds, receiving from 2^k ranks back. Folds keep rank
/// order (the lower ranks' part on the left), so an operation need not commute.
/// [`TEMP`] holds `2n` elements.
pub(crate) fn scan(rank: usize, size: usize, n: usize, exclusive: bool) -> Plan {
    let (incl, excl) = (Slot::new(DATA, 0, n), Slot::new(OUT, 0, n));
    let (got, spare) = (Slot::new(TEMP, 0, n), Slot::new(TEMP, n, n));
    let mut plan = Plan::default();
    let mut have_excl = false;
    let mut d = 1;
    while d < size {
        let mut transfers = Vec::new();
        let mut local = Vec::new();
        if rank + d < size {
            transfers.push(Transfer::Send { to: rank + d, from: incl });
        }
        if rank >= d {
            transfers.push(Transfer::Recv { from: rank - d, into: got });
            if exclusive {
                // excl = got ∘ excl
                local.push(Local::Copy { to: spare, from: got });
                if have_excl {
                    local.push(Local::Fold { into: spare, from: excl });
                }
                local.push(Local::Copy { to: excl, from: spare });
                have_excl = true;
            }
            // incl = got ∘ incl
            local.push(Local::Fold { into: got, from: incl });
            local.push(Local::Copy { to: incl, from: got });
        }
        plan.round(transfers, local);
        d <<= 1;
    }
    plan
}

/// The other ranks, starting after `rank` (so that not every rank sends to rank 0 first).
fn others(rank: usize, size: usize) -> impl Iterator<Item = usize> {
    (1..size).map(move |k| (rank + k) % size)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs every rank's plan over integer "sets of contributions" (sum of distinct
    /// powers of two) with message matching per (from, to) in order, as the engine does.
    fn simulate(plans: &[Plan], bufs: &mut [Vec<Vec<u64>>]) {
        use std::collections::{HashMap, VecDeque};
        let size = plans.len();
        let mut round = vec![0usize; size];
        let mut wires: HashMap<(usize, usize), VecDeque<Vec<u64>>> = HashMap::new();
        let mut posted = vec![false; size];
        let mut guard = 0;
        while (0..size).any(|r| round[r] < plans[r].rounds.len()) {
            guard += 1;
            assert!(guard < 10_000, "the plans deadlock");
            for r in 0..size {
                let Some(rd) = plans[r].rounds.get(round[r]) else { continue };
                if !posted[r] {
                    for t in &rd.transfers {
                        if let Transfer::Send { to, from } = *t {
                            let data =
                                bufs[r][from.buf][from.start..from.start + from.len].to_vec();
                            wires.entry((r, to)).or_default().push_back(data);
                        }
                    }
                    posted[r] = true;
                }
                let ready = rd.transfers.iter().all(|t| match *t {
                    Transfer::Recv { from, .. } => {
                        wires.get(&(from, r)).is_some_and(|q| !q.is_empty())
                    }
                    Transfer::Send { .. } => true,
                });
                if !ready {
                    continue;
                }
                for t in &rd.transfers {
                    if let Transfer::Recv { from, into } = *t {
                        let data = wires.get_mut(&(from, r)).unwrap().pop_front().unwrap();
                        assert_eq!(data.len(), into.len, "rank {r} round {}", round[r]);
                        bufs[r][into.buf][into.start..into.start + into.len].copy_from_slice(&data);
                    }
                }
                for l in &rd.local {
                    let (to, from, fold) = match *l {
                        Local::Fold { into, from } => (into, from, true),
                        Local::Copy { to, from } => (to, from, false),
                    };
                    let src = bufs[r][from.buf][from.start..from.start + from.len].to_vec();
                    let dst = &mut bufs[r][to.buf][to.start..to.start + to.len];
                    for (d, s) in dst.iter_mut().zip(src) {
                        *d = if fold { *d + s } else { s };
                    }
                }
                round[r] += 1;
                posted[r] = false;
            }
        }
        assert!(wires.values().all(VecDeque::is_empty), "a message was never received");
    }

    fn start(size: usize, n: usize, temp: usize, out: usize) -> Vec<Vec<Vec<u64>>> {
        (0..size).map(|r| vec![vec![1u64 << r; n], vec![0; temp], vec![0; out]]).collect()
    }

    #[test]
    fn every_plan_computes_its_collective_at_every_size() {
        for size in 1..=9 {
            let all = (1u64 << size) - 1;
            for ring in [false, true] {
                let n = 2 * size + 1;
                let plans: Vec<(Plan, usize)> =
                    (0..size).map(|r| allreduce(r, size, n, ring)).collect();
                let temp = plans.iter().map(|p| p.1).max().unwrap();
                let mut bufs = start(size, n, temp, 0);
                simulate(&plans.into_iter().map(|p| p.0).collect::<Vec<_>>(), &mut bufs);
                assert!(bufs.iter().all(|b| b[DATA] == vec![all; n]), "allreduce {size} {ring}");
            }
            for root in 0..size {
                let plans: Vec<(Plan, usize)> =
                    (0..size).map(|r| reduce(r, size, root, 3)).collect();
                let temp = plans.iter().map(|p| p.1).max().unwrap();
                let mut bufs = start(size, 3, temp, 0);
                simulate(&plans.into_iter().map(|p| p.0).collect::<Vec<_>>(), &mut bufs);
                assert_eq!(bufs[root][DATA], vec![all; 3], "reduce {size} root {root}");
                let plans: Vec<Plan> = (0..size).map(|r| bcast(r, size, root, 2)).collect();
                let mut bufs = start(size, 2, 0, 0);
                simulate(&plans, &mut bufs);
                assert!(bufs.iter().all(|b| b[DATA] == vec![1 << root; 2]), "bcast {size}");
            }
            for exclusive in [false, true] {
                let plans: Vec<Plan> = (0..size).map(|r| scan(r, size, 2, exclusive)).collect();
                let mut bufs = start(size, 2, 4, 2);
                simulate(&plans, &mut bufs);
                for (r, b) in bufs.iter().enumerate() {
                    assert_eq!(b[DATA], vec![(2u64 << r) - 1; 2], "scan {size} rank {r}");
                    if exclusive && r > 0 {
                        assert_eq!(b[OUT], vec![(1u64 << r) - 1; 2], "exscan {size} rank {r}");
                    }
                }
            }
            let counts: Vec<usize> = (0..size).map(|r| r % 3).collect();
            let blocks = Blocks::packed(&counts);
            let plans: Vec<(Plan, usize)> =
                (0..size).map(|r| reduce_scatter(r, size, &blocks)).collect();
            let total = counts.iter().sum();
            let mut bufs = start(size, total, size, 2);
            simulate(&plans.into_iter().map(|p| p.0).collect::<Vec<_>>(), &mut bufs);
            for (r, b) in bufs.iter().enumerate() {
                assert_eq!(b[OUT][..counts[r]], vec![all; counts[r]], "reduce_scatter {size}");
            }
            let plans: Vec<Plan> = (0..size).map(|r| barrier(r, size)).collect();
            simulate(&plans, &mut start(size, 0, 0, 0));
        }
    }
}
