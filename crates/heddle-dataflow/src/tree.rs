//! Worker-level trees: broadcasts relay down them from the source's worker; reduce and
//! gather climb them toward the target's worker, inner workers combining what passes
//! through (partial reduction at inner nodes; each worker's own sources are combined
//! first, node-local).

use std::collections::{HashMap, HashSet, VecDeque};

use heddle_wire::Kind;

use super::spec::{EdgeSpec, TaskId};
use crate::Result;
use heddle_comm::Envelope;

/// The worker-level tree a broadcast travels along (rooted at the source's worker).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BroadcastTree {
    /// The source's worker sends to every worker with targets: one hop, most sends at the root.
    Flat,
    /// Binomial tree: ⌈log₂ w⌉ hops, each worker forwards to a few others.
    Binomial,
    /// Binary tree: each worker forwards to at most two.
    Binary,
    /// Pipelined chain: each worker forwards to the next as messages arrive; best for long
    /// streams of large messages.
    Ring,
    /// Binomial tree over the workers grouped by host (the root's host first): the first
    /// hops cross hosts, the last ones stay inside a host (with two workers per host, one
    /// message per host crosses the network). Chosen when the workers span hosts.
    Hosts,
}

impl BroadcastTree {
    /// The tree for `workers` on `hosts` (the host of each world rank): per host first
    /// when they span several hosts with several workers on some host, else `flat` (few
    /// workers) or binomial.
    pub(crate) fn for_workers(workers: &[usize], hosts: &[u32], flat_up_to: usize) -> Self {
        let mut on: Vec<u32> =
            workers.iter().map(|&w| hosts.get(w).copied().unwrap_or(0)).collect();
        on.sort_unstable();
        on.dedup();
        if on.len() > 1 && on.len() < workers.len() {
            BroadcastTree::Hosts
        } else if workers.len() <= flat_up_to {
            BroadcastTree::Flat
        } else {
            BroadcastTree::Binomial
        }
    }

    /// The workers `me` forwards to, for a broadcast rooted at `root` over `workers`
    /// (`hosts[w]`: the host of worker `w`).
    pub(crate) fn children(
        self,
        root: usize,
        workers: &[usize],
        me: usize,
        hosts: &[u32],
    ) -> Vec<usize> {
        let mut order = vec![root];
        order.extend(workers.iter().copied().filter(|&w| w != root));
        if self == BroadcastTree::Hosts {
            let host = |w: usize| hosts.get(w).copied().unwrap_or(0);
            let home = host(root);
            order[1..].sort_by_key(|&w| (host(w) != home, host(w), w));
        }
        let Some(i) = order.iter().position(|&w| w == me) else { return Vec::new() };
        let n = order.len();
        let idx: Vec<usize> = match self {
            BroadcastTree::Flat => {
                if i == 0 {
                    (1..n).collect()
                } else {
                    Vec::new()
                }
            }
            BroadcastTree::Binary => {
                [2 * i + 1, 2 * i + 2].into_iter().filter(|&c| c < n).collect()
            }
            BroadcastTree::Ring => [i + 1].into_iter().filter(|&c| c < n).collect(),
            BroadcastTree::Binomial | BroadcastTree::Hosts => {
                let low = if i == 0 { n.next_power_of_two() } else { 1 << i.trailing_zeros() };
                let mut c = Vec::new();
                let mut m = low >> 1;
                while m > 0 {
                    if i + m < n {
                        c.push(i + m);
                    }
                    m >>= 1;
                }
                c
            }
        };
        idx.into_iter().map(|k| order[k]).collect()
    }
}

impl BroadcastTree {
    /// The worker `me` sends to on the way to `root`, in the tree over `workers`.
    pub(crate) fn parent(
        self,
        root: usize,
        workers: &[usize],
        me: usize,
        hosts: &[u32],
    ) -> Option<usize> {
        std::iter::once(root)
            .chain(workers.iter().copied())
            .find(|&w| w != me && self.children(root, workers, w, hosts).contains(&me))
    }

    /// `me` and every worker below it.
    fn subtree(self, root: usize, workers: &[usize], me: usize, hosts: &[u32]) -> HashSet<usize> {
        let mut seen = HashSet::from([me]);
        let mut stack = vec![me];
        while let Some(w) = stack.pop() {
            for c in self.children(root, workers, w, hosts) {
                if seen.insert(c) {
                    stack.push(c);
                }
            }
        }
        seen
    }
}

/// Streams from more source workers than this climb a tree instead of going direct.
pub(crate) const TREE_FROM_WORKERS: usize = 3;

/// Combines the data payloads a worker holds for one target into one payload.
pub(crate) type MergeUp<'a> = &'a mut dyn FnMut(Vec<Vec<u8>>) -> Result<Vec<u8>>;

#[derive(Debug, Default)]
struct Held {
    data: Vec<Vec<u8>>,
    ends: Vec<Envelope>,
    /// A barrier passed: stop combining for this target, forward in order.
    passthrough: bool,
}

/// Upward routing of one operation on this worker.
#[derive(Debug)]
pub(crate) struct UpTree {
    /// This worker's next hop toward each target it does not run.
    next_hop: HashMap<TaskId, usize>,
    /// The sources whose messages to each target pass through here (this worker's own
    /// and those below it): it must stay until their ends have gone on.
    through: HashMap<TaskId, HashSet<TaskId>>,
    /// Ends forwarded so far, per target.
    forwarded_ends: HashMap<TaskId, HashSet<TaskId>>,
    combine: bool,
    held: HashMap<TaskId, Held>,
    /// Messages waiting to climb (from local sources or passing through).
    inbox: VecDeque<(Envelope, Vec<u8>)>,
}

impl UpTree {
    /// Routes for every target of `spec` from worker `rank`, over the source workers.
    pub(crate) fn new(
        tree: BroadcastTree,
        rank: usize,
        spec: &EdgeSpec,
        combine: bool,
        hosts: &[u32],
    ) -> Result<UpTree> {
        let mut source_workers = Vec::new();
        for &s in &spec.sources {
            source_workers.push(spec.placement.worker(s)?);
        }
        source_workers.sort_unstable();
        source_workers.dedup();
        let mut next_hop = HashMap::new();
        let mut through = HashMap::new();
        for &t in &spec.targets {
            let root = spec.placement.worker(t)?;
            if root == rank {
                continue;
            }
            if let Some(parent) = tree.parent(root, &source_workers, rank, hosts) {
                next_hop.insert(t, parent);
                let below = tree.subtree(root, &source_workers, rank, hosts);
                let mut srcs = HashSet::new();
                for &s in &spec.sources {
                    if below.contains(&spec.placement.worker(s)?) {
                        srcs.insert(s);
                    }
                }
                through.insert(t, srcs);
            }
        }
        Ok(UpTree {
            next_hop,
            through,
            forwarded_ends: HashMap::new(),
            combine,
            held: HashMap::new(),
            inbox: VecDeque::new(),
        })
    }

    /// The next hop toward `target`, if messages to it climb the tree from here.
    pub(crate) fn hop(&self, target: TaskId) -> Option<usize> {
        self.next_hop.get(&target).copied()
    }

    /// Queues a message that climbs from here.
    pub(crate) fn push(&mut self, env: Envelope, data: Vec<u8>) {
        self.inbox.push_back((env, data));
    }

    /// Whether messages are waiting or held here, or sources below have not yet ended
    /// (their messages will still pass through).
    pub(crate) fn busy(&self) -> bool {
        !self.inbox.is_empty()
            || self.held.values().any(|h| !h.data.is_empty() || !h.ends.is_empty())
            || self
                .through
                .iter()
                .any(|(t, srcs)| self.forwarded_ends.get(t).map_or(0, HashSet::len) < srcs.len())
    }

    /// Moves queued messages on: straight to the next hop, or (combining) held until
    /// every source below has ended, then one combined message and the ends.
    pub(crate) fn drain(
        &mut self,
        combiner: MergeUp<'_>,
        mut send: impl FnMut(usize, Envelope, Vec<u8>),
    ) -> Result<()> {
        let forwarded = &mut self.forwarded_ends;
        let mut send = |w: usize, env: Envelope, data: Vec<u8>| {
            if env.kind == Kind::EndOfStream {
                forwarded.entry(env.target).or_default().insert(env.source);
            }
            send(w, env, data);
        };
        while let Some((env, data)) = self.inbox.pop_front() {
            let Some(&hop) = self.next_hop.get(&env.target) else { continue };
            let held = self.held.entry(env.target).or_default();
            if !self.combine || held.passthrough {
                send(hop, env, data);
                continue;
            }
            match env.kind {
                Kind::Data => held.data.push(data),
                Kind::EndOfStream => {
                    held.ends.push(env);
                    let all = &self.through[&env.target];
                    if held.ends.len() >= all.len() {
                        let held = std::mem::take(held);
                        if !held.data.is_empty() {
                            let first = held.ends[0];
                            send(
                                hop,
                                Envelope { kind: Kind::Data, sequence: 0, ..first },
                                combiner(held.data)?,
                            );
                        }
                        for e in held.ends {
                            send(hop, e, Vec::new());
                        }
                    }
                }
                _ => {
                    // A barrier: forward what is held, in order, and stop combining.
                    held.passthrough = true;
                    let held =
                        std::mem::replace(held, Held { passthrough: true, ..Held::default() });
                    let first = held.ends.first().copied().unwrap_or(env);
                    for d in held.data {
                        send(hop, Envelope { kind: Kind::Data, sequence: 0, ..first }, d);
                    }
                    for e in held.ends {
                        send(hop, e, Vec::new());
                    }
                    send(hop, env, data);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Placement;

    #[test]
    fn a_host_first_tree_crosses_each_host_once() {
        // Three hosts of two workers, interleaved: 0 3 | 1 4 | 2 5.
        let hosts = [0u32, 1, 2, 0, 1, 2];
        let workers: Vec<usize> = (0..6).collect();
        assert_eq!(BroadcastTree::for_workers(&workers, &hosts, 3), BroadcastTree::Hosts);
        for root in 0..6 {
            let mut crossings = 0;
            for w in 0..6 {
                for c in BroadcastTree::Hosts.children(root, &workers, w, &hosts) {
                    crossings += usize::from(hosts[c] != hosts[w]);
                }
            }
            assert_eq!(crossings, 2, "root {root}: one message into each other host");
        }
        assert_eq!(BroadcastTree::for_workers(&workers, &[0; 6], 3), BroadcastTree::Binomial);
        assert_eq!(BroadcastTree::for_workers(&workers[..3], &[0; 6], 3), BroadcastTree::Flat);
    }

    #[test]
    fn parent_inverts_children() {
        for tree in [
            BroadcastTree::Flat,
            BroadcastTree::Binomial,
            BroadcastTree::Binary,
            BroadcastTree::Ring,
            BroadcastTree::Hosts,
        ] {
            for n in 1..=9usize {
                let workers: Vec<usize> = (0..n).collect();
                // Hosts interleaved: worker w on host w % 3.
                let hosts: Vec<u32> = (0..n as u32).map(|w| w % 3).collect();
                for root in 0..n {
                    for w in 0..n {
                        for c in tree.children(root, &workers, w, &hosts) {
                            assert_eq!(
                                tree.parent(root, &workers, c, &hosts),
                                Some(w),
                                "{tree:?} n={n}"
                            );
                        }
                    }
                    assert_eq!(tree.parent(root, &workers, root, &hosts), None);
                }
            }
        }
    }

    #[test]
    fn every_tree_reaches_every_worker_once() {
        for tree in [
            BroadcastTree::Flat,
            BroadcastTree::Binomial,
            BroadcastTree::Binary,
            BroadcastTree::Ring,
            BroadcastTree::Hosts,
        ] {
            for n in 1..=9usize {
                let workers: Vec<usize> = (0..n).map(|w| w * 3 % 11).collect();
                let hosts: Vec<u32> = (0..50u32).map(|w| w / 4).collect();
                for root in [workers[0], workers[n - 1], 42] {
                    let mut reached = vec![root];
                    let mut frontier = vec![root];
                    while let Some(w) = frontier.pop() {
                        for c in tree.children(root, &workers, w, &hosts) {
                            assert!(
                                !reached.contains(&c),
                                "{tree:?} n={n}: worker {c} reached twice"
                            );
                            reached.push(c);
                            frontier.push(c);
                        }
                    }
                    for w in &workers {
                        assert!(
                            reached.contains(w),
                            "{tree:?} n={n} root={root}: worker {w} not reached"
                        );
                    }
                }
            }
        }
    }

    fn env(kind: Kind, source: TaskId) -> Envelope {
        Envelope { kind, source, target: 8, sequence: 0 }
    }

    #[test]
    fn an_inner_worker_combines_its_subtree_then_forwards_the_ends() {
        // Sources 0..8 on workers 0..3 (source s on worker s % 4); target 8 on worker 0.
        // Binomial over [0, 1, 2, 3]: 0 -> {2, 1}, 2 -> {3}. Worker 2 relays for 2 and 3.
        let placement = Placement::from_pairs((0..8).map(|s| (s, s as usize % 4)).chain([(8, 0)]));
        let spec = EdgeSpec::new(1, (0..8).collect(), vec![8], placement);
        let mut up = UpTree::new(BroadcastTree::Binomial, 2, &spec, true, &[]).unwrap();
        assert_eq!(up.hop(8), Some(0));
        let mut sent = Vec::new();
        let mut calls = 0;
        let mut combiner = |p: Vec<Vec<u8>>| {
            calls += 1;
            Ok(p.concat())
        };
        for s in [2, 3, 6, 7] {
            up.push(env(Kind::Data, s), vec![s as u8]);
        }
        for s in [2, 3, 6] {
            up.push(env(Kind::EndOfStream, s), Vec::new());
        }
        up.drain(&mut combiner, |w, e, d| sent.push((w, e.kind, d))).unwrap();
        assert!(sent.is_empty(), "nothing leaves before every source below has ended");
        assert!(up.busy());
        up.push(env(Kind::EndOfStream, 7), Vec::new());
        up.drain(&mut combiner, |w, e, d| sent.push((w, e.kind, d))).unwrap();
        assert_eq!(sent[0], (0, Kind::Data, vec![2, 3, 6, 7]), "one combined message first");
        assert_eq!(
            sent[1..].iter().filter(|(w, k, _)| *w == 0 && *k == Kind::EndOfStream).count(),
            4
        );
        assert!(!up.busy());
        assert_eq!(calls, 1);
    }
}
