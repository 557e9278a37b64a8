//! Reduce: the records of all sources combined into one value per target (one target:
//! reduce; all of them: allreduce). Batch mode combines every source of a worker first
//! (node-local partial reduction), then partials climb a binomial tree of workers toward
//! each target's worker, merged again at every inner worker; the target emits the total
//! at the end. Streams from more than three workers climb the same tree, uncombined.
//! Streaming mode combines the i-th record of every live source into the target's i-th
//! output (a source that has finished takes part until its records are used up).

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::arrivals::Incoming;
use super::codec::{decode_all, encode};
use super::edge_core::EdgeCore;
use super::gather::offer_to_all;
use super::semantics::{Dataflow, Semantics};
use super::tree::{BroadcastTree, TREE_FROM_WORKERS};
use super::{EdgeSpec, Event, Mode, Offer, Options, TaskId};
use crate::Result;
use heddle_comm::Communicator;

type Reducer<T> = Box<dyn Fn(T, T) -> T + Send>;

#[derive(Debug)]
struct TargetFold<T> {
    /// Batch: the running total.
    total: Option<T>,
    /// Streaming: records waiting for the other sources' i-th record.
    queued: BTreeMap<TaskId, VecDeque<T>>,
    ended: Vec<TaskId>,
}

/// The semantics of [`Reduce`].
pub struct Reduction<T> {
    reducer: Reducer<T>,
    local: Option<T>,
    unfinished_local: usize,
    folds: HashMap<TaskId, TargetFold<T>>,
}

impl<T> std::fmt::Debug for Reduction<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reduction")
    }
}

/// See the module docs.
pub type Reduce<T> = Dataflow<Reduction<T>>;

impl<T: Serialize + DeserializeOwned> Dataflow<Reduction<T>> {
    /// A reduce (or allreduce) with `reducer`, which must be associative and commutative.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] for a bad edge specification.
    pub fn new(
        comm: &Communicator,
        spec: EdgeSpec,
        opts: Options,
        reducer: impl Fn(T, T) -> T + Send + 'static,
    ) -> Result<Self> {
        let mut core = EdgeCore::new(comm, spec, &opts)?;
        if opts.mode == Mode::Batch {
            // Partials climb a binomial tree of workers and merge at every inner worker.
            core.set_up_tree(
                BroadcastTree::for_workers(&core.source_workers, &core.hosts, 0),
                true,
            )?;
        } else if core.source_worker_count() > TREE_FROM_WORKERS {
            // Streams climb it too (the target aligns the i-th records), cutting its fan-in.
            core.set_up_tree(
                BroadcastTree::for_workers(&core.source_workers, &core.hosts, 0),
                false,
            )?;
        }
        let unfinished_local = core.local_sources();
        let folds = core
            .local_targets
            .iter()
            .map(|&t| (t, TargetFold { total: None, queued: BTreeMap::new(), ended: Vec::new() }))
            .collect();
        Ok(Dataflow::from_parts(
            core,
            Reduction { reducer: Box::new(reducer), local: None, unfinished_local, folds },
        ))
    }
}

fn fold<T>(reducer: &Reducer<T>, acc: Option<T>, item: T) -> T {
    match acc {
        Some(a) => reducer(a, item),
        None => item,
    }
}

impl<T: Serialize + DeserializeOwned> Semantics for Reduction<T> {
    type In = T;
    type Out = T;

    fn offer(&mut self, core: &mut EdgeCore, source: TaskId, item: T) -> Result<Offer<T>> {
        if core.mode == Mode::Batch {
            self.local = Some(fold(&self.reducer, self.local.take(), item));
            return Ok(Offer::Accepted);
        }
        offer_to_all(core, source, item)
    }

    fn finish(&mut self, core: &mut EdgeCore, source: TaskId) -> Result<()> {
        self.unfinished_local -= 1;
        if core.mode == Mode::Batch && self.unfinished_local == 0 {
            // The last local source carries this worker's partial result.
            if let Some(partial) = self.local.take() {
                let bytes = encode(&partial)?;
                for t in core.spec.targets.clone() {
                    core.push_record(source, t, &bytes);
                }
            }
        }
        core.finish(source)
    }

    fn combine(&mut self, payloads: Vec<Vec<u8>>) -> Result<Vec<u8>> {
        let mut acc = None;
        for p in payloads {
            for item in decode_all::<T>(&p)? {
                acc = Some(fold(&self.reducer, acc, item));
            }
        }
        let mut out = Vec::new();
        if let Some(total) = acc {
            let bytes = encode(&total)?;
            out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            out.extend_from_slice(&bytes);
        }
        Ok(out)
    }

    fn take(
        &mut self,
        core: &EdgeCore,
        target: TaskId,
        incoming: Incoming,
        out: &mut VecDeque<Event<T>>,
    ) -> Result<()> {
        let fold_state = self.folds.get_mut(&target).expect("local target");
        match incoming {
            Incoming::Records { source, payload } => {
                for item in decode_all::<T>(&payload)? {
                    if core.mode == Mode::Batch {
                        fold_state.total = Some(fold(&self.reducer, fold_state.total.take(), item));
                    } else {
                        fold_state.queued.entry(source).or_default().push_back(item);
                    }
                }
            }
            Incoming::SourceEnded(s) => fold_state.ended.push(s),
            Incoming::Barrier(id) => out.push_back(Event::Barrier(id)),
            Incoming::End => {
                if let Some(t) = fold_state.total.take() {
                    out.push_back(Event::Data(t));
                }
                out.push_back(Event::End);
                return Ok(());
            }
        }
        if core.mode == Mode::Batch {
            return Ok(());
        }
        // Streaming: emit while every source that can still send has a record waiting.
        loop {
            let live: Vec<TaskId> = core
                .spec
                .sources
                .iter()
                .copied()
                .filter(|s| {
                    !fold_state.ended.contains(s)
                        || fold_state.queued.get(s).is_some_and(|q| !q.is_empty())
                })
                .collect();
            if live.is_empty()
                || !live.iter().all(|s| fold_state.queued.get(s).is_some_and(|q| !q.is_empty()))
            {
                return Ok(());
            }
            let mut acc = None;
            for s in live {
                let item =
                    fold_state.queued.get_mut(&s).and_then(VecDeque::pop_front).expect("checked");
                acc = Some(fold(&self.reducer, acc, item));
            }
            out.push_back(Event::Data(acc.expect("at least one live source")));
        }
    }
}
