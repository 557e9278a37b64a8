//! Reduce: the records of all sources combined into one value per target (one target:
//! reduce; all of them: allreduce). Batch mode combines every source of a worker first
//! (partial reduction before the network), and each target receives one partial per
//! worker and emits the total at the end. Streaming mode combines the i-th record of
//! every live source into the target's i-th output (a source that has finished
//! takes part until its records are used up).

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::codec::{decode_all, encode};
use super::core::{Core, Incoming};
use super::{EdgeSpec, Event, Mode, Offer, Operation, Options, TaskId};
use crate::{Communicator, Error, Result};

type Reducer<T> = Box<dyn Fn(T, T) -> T + Send>;

#[derive(Debug)]
struct TargetFold<T> {
    /// Batch: the running total.
    total: Option<T>,
    /// Streaming: records waiting for the other sources' i-th record.
    queued: BTreeMap<TaskId, VecDeque<T>>,
    ended: Vec<TaskId>,
}

/// See the module docs.
pub struct Reduce<T> {
    core: Core,
    reducer: Reducer<T>,
    local: Option<T>,
    unfinished_local: usize,
    folds: HashMap<TaskId, TargetFold<T>>,
    out: HashMap<TaskId, VecDeque<Event<T>>>,
    error: Option<Error>,
}

impl<T> std::fmt::Debug for Reduce<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reduce").field("edge", &self.core.spec.edge).finish_non_exhaustive()
    }
}

impl<T: Serialize + DeserializeOwned> Reduce<T> {
    /// A reduce (or allreduce) with `reducer`, which must be associative and commutative.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad edge specification.
    pub fn new(comm: &Communicator, spec: EdgeSpec, opts: Options, reducer: impl Fn(T, T) -> T + Send + 'static) -> Result<Self> {
        let core = Core::new(comm, spec, &opts)?;
        let rank = comm.world_rank(comm.rank());
        let unfinished_local = core.spec.sources.iter().filter(|&&s| core.spec.placement.worker(s).ok() == Some(rank)).count();
        let folds = core.local_targets.iter().map(|&t| (t, TargetFold { total: None, queued: BTreeMap::new(), ended: Vec::new() })).collect();
        let out = core.local_targets.iter().map(|&t| (t, VecDeque::new())).collect();
        Ok(Reduce { core, reducer: Box::new(reducer), local: None, unfinished_local, folds, out, error: None })
    }

    fn fold(reducer: &Reducer<T>, acc: Option<T>, item: T) -> T {
        match acc {
            Some(a) => reducer(a, item),
            None => item,
        }
    }

    fn take(&mut self, target: TaskId, incoming: Incoming) -> Result<()> {
        let sources = self.core.spec.sources.clone();
        let fold = self.folds.get_mut(&target).expect("local target");
        let out = self.out.get_mut(&target).expect("local target");
        match incoming {
            Incoming::Records { source, payload } => {
                for item in decode_all::<T>(&payload)? {
                    if self.core.mode == Mode::Batch {
                        fold.total = Some(Self::fold(&self.reducer, fold.total.take(), item));
                    } else {
                        fold.queued.entry(source).or_default().push_back(item);
                    }
                }
            }
            Incoming::SourceEnded(s) => fold.ended.push(s),
            Incoming::Barrier(id) => out.push_back(Event::Barrier(id)),
            Incoming::End => {
                if let Some(t) = fold.total.take() {
                    out.push_back(Event::Data(t));
                }
                out.push_back(Event::End);
                return Ok(());
            }
        }
        if self.core.mode == Mode::Batch {
            return Ok(());
        }
        // Streaming: emit while every source that can still send has a record waiting.
        loop {
            // A source takes part while it may still send or has records waiting.
            let live: Vec<TaskId> = sources
                .iter()
                .copied()
                .filter(|s| !fold.ended.contains(s) || fold.queued.get(s).is_some_and(|q| !q.is_empty()))
                .collect();
            if live.is_empty() || !live.iter().all(|s| fold.queued.get(s).is_some_and(|q| !q.is_empty())) {
                break;
            }
            let mut acc = None;
            for s in live {
                let item = fold.queued.get_mut(&s).and_then(VecDeque::pop_front).expect("checked");
                acc = Some(Self::fold(&self.reducer, acc, item));
            }
            out.push_back(Event::Data(acc.expect("at least one live source")));
        }
        Ok(())
    }
}

impl<T: Serialize + DeserializeOwned> Operation for Reduce<T> {
    type In = T;
    type Out = T;

    fn offer(&mut self, source: TaskId, item: T) -> Result<Offer<T>> {
        self.core.check_source(source)?;
        if self.core.mode == Mode::Batch {
            self.local = Some(Self::fold(&self.reducer, self.local.take(), item));
            return Ok(Offer::Accepted);
        }
        let targets = self.core.spec.targets.clone();
        if !self.core.has_room(&targets) {
            return Ok(Offer::Full(item));
        }
        let bytes = encode(&item)?;
        for t in targets {
            self.core.push_record(source, t, &bytes);
        }
        Ok(Offer::Accepted)
    }

    fn finish(&mut self, source: TaskId) -> Result<()> {
        self.core.check_source(source)?;
        self.unfinished_local -= 1;
        if self.core.mode == Mode::Batch && self.unfinished_local == 0 {
            // The last local source carries this worker's partial result.
            if let Some(partial) = self.local.take() {
                let bytes = encode(&partial)?;
                for t in self.core.spec.targets.clone() {
                    self.core.push_record(source, t, &bytes);
                }
            }
        }
        self.core.finish(source)
    }

    fn barrier(&mut self, source: TaskId, id: u64) -> Result<()> {
        self.core.barrier(source, id)
    }

    fn progress(&mut self) -> Result<bool> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let moved = self.core.progress(self.core.mode == Mode::Batch)?;
        if moved {
            self.core.moved();
        }
        Ok(moved)
    }

    fn poll(&mut self, target: TaskId) -> Option<Event<T>> {
        loop {
            if let Some(e) = self.out.get_mut(&target)?.pop_front() {
                return Some(e);
            }
            let incoming = self.core.next(target)?;
            if let Err(e) = self.take(target, incoming) {
                self.error = Some(e);
                return None;
            }
        }
    }

    fn is_done(&self) -> bool {
        self.core.is_done() && self.out.values().all(VecDeque::is_empty)
    }

    fn local_targets(&self) -> Vec<TaskId> {
        self.core.local_targets.clone()
    }

    fn wait(&mut self) -> Result<()> {
        self.core.wait()
    }
}
