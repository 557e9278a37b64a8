//! Partition (each record to one target chosen by a function), and its fixed-route
//! relatives: direct (source i to target i), union (the sources merged into the targets,
//! source i feeding target i mod the target count) and broadcast (every record to every
//! target).
//! Streaming and batch behave alike: records are delivered as they arrive; batch mode
//! adds the end of every source.

use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::codec::{decode_all, encode};
use super::core::{BroadcastTree, Core, Incoming, RELAY};
use super::{EdgeSpec, Event, Offer, Operation, Options, TaskId};
use crate::{Communicator, Error, Result};

type Partitioner<T> = Box<dyn Fn(&T) -> usize + Send>;

enum Route<T> {
    By(Partitioner<T>),
    Direct,
    Union,
    All,
    Tree,
}

/// Records from sources to targets along a route; see the module docs.
pub struct Partition<T> {
    core: Core,
    route: Route<T>,
    out: HashMap<TaskId, VecDeque<Event<T>>>,
    error: Option<Error>,
    _t: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Partition<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partition").field("edge", &self.core.spec.edge).finish_non_exhaustive()
    }
}

impl<T: Serialize + DeserializeOwned> Partition<T> {
    /// Sends each record to `targets[partitioner(&record) % targets.len()]` (for hash
    /// partitioning return a hash; for range partitioning, the range's index).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad edge specification.
    pub fn new(comm: &Communicator, spec: EdgeSpec, opts: Options, partitioner: impl Fn(&T) -> usize + Send + 'static) -> Result<Self> {
        Self::with_route(comm, spec, opts, Route::By(Box::new(partitioner)))
    }

    /// Direct: source i sends to target i (as many targets as sources).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the counts differ or the specification is bad.
    pub fn direct(comm: &Communicator, spec: EdgeSpec, opts: Options) -> Result<Self> {
        Self::with_route(comm, spec, opts, Route::Direct)
    }

    /// Union: the records of all sources merged into the targets; source i feeds
    /// target i mod the number of targets (one target: a single merged stream).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad edge specification.
    pub fn union(comm: &Communicator, spec: EdgeSpec, opts: Options) -> Result<Self> {
        Self::with_route(comm, spec, opts, Route::Union)
    }

    /// Broadcast: every record goes to every target. Up to three workers with targets
    /// are reached directly (flat); more along a binomial tree of workers.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad edge specification.
    pub fn broadcast(comm: &Communicator, spec: EdgeSpec, opts: Options) -> Result<Self> {
        let mut workers: Vec<usize> = spec.targets.iter().filter_map(|&t| spec.placement.worker(t).ok()).collect();
        workers.sort_unstable();
        workers.dedup();
        let tree = if workers.len() <= 3 { BroadcastTree::Flat } else { BroadcastTree::Binomial };
        Self::broadcast_along(comm, spec, opts, tree)
    }

    /// Broadcast along a chosen worker tree: [`BroadcastTree::Flat`] sends every message
    /// from the source's worker to each worker with targets; the others relay it
    /// worker to worker, each worker handing it to its own targets.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad edge specification.
    pub fn broadcast_along(comm: &Communicator, spec: EdgeSpec, opts: Options, tree: BroadcastTree) -> Result<Self> {
        let mut p = Self::with_route(comm, spec, opts, Route::Tree)?;
        p.core.set_relay(tree);
        Ok(p)
    }

    /// Broadcast that sends a copy of every record to each target directly (no relays,
    /// one message per target).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad edge specification.
    pub fn broadcast_direct(comm: &Communicator, spec: EdgeSpec, opts: Options) -> Result<Self> {
        Self::with_route(comm, spec, opts, Route::All)
    }

    fn with_route(comm: &Communicator, spec: EdgeSpec, opts: Options, route: Route<T>) -> Result<Self> {
        if matches!(route, Route::Direct) && spec.sources.len() != spec.targets.len() {
            return Err(Error::InvalidArgument(format!(
                "direct needs as many targets as sources ({} sources, {} targets)",
                spec.sources.len(),
                spec.targets.len()
            )));
        }
        let core = Core::new(comm, spec, &opts)?;
        let out = core.local_targets.iter().map(|&t| (t, VecDeque::new())).collect();
        Ok(Partition { core, route, out, error: None, _t: PhantomData })
    }

    fn targets_of(&self, source: TaskId, item: &T) -> Vec<TaskId> {
        let targets = &self.core.spec.targets;
        match &self.route {
            Route::By(f) => vec![targets[f(item) % targets.len()]],
            Route::Direct | Route::Union => {
                let i = self.core.spec.sources.iter().position(|&s| s == source).unwrap_or(0);
                vec![targets[i % targets.len()]]
            }
            Route::All => targets.clone(),
            Route::Tree => vec![RELAY],
        }
    }
}

impl<T: Serialize + DeserializeOwned> Operation for Partition<T> {
    type In = T;
    type Out = T;

    fn offer(&mut self, source: TaskId, item: T) -> Result<Offer<T>> {
        self.core.check_source(source)?;
        let targets = self.targets_of(source, &item);
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
        self.core.finish(source)
    }

    fn barrier(&mut self, source: TaskId, id: u64) -> Result<()> {
        self.core.barrier(source, id)
    }

    fn progress(&mut self) -> Result<bool> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let moved = self.core.progress(false)?;
        if moved {
            self.core.moved();
        }
        Ok(moved)
    }

    fn poll(&mut self, target: TaskId) -> Option<Event<T>> {
        if let Some(e) = self.out.get_mut(&target)?.pop_front() {
            return Some(e);
        }
        let event = match self.core.next(target)? {
            Incoming::Records { payload, .. } => {
                match decode_all::<T>(&payload) {
                    Ok(items) => self.out.get_mut(&target)?.extend(items.into_iter().map(Event::Data)),
                    Err(e) => self.error = Some(e),
                }
                return self.out.get_mut(&target)?.pop_front().or_else(|| self.poll(target));
            }
            Incoming::SourceEnded(_) => return self.poll(target),
            Incoming::Barrier(id) => Event::Barrier(id),
            Incoming::End => Event::End,
        };
        Some(event)
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

impl<T> Partition<T> {
    /// Bytes held in this worker's receive buffer for the edge, now and at most so far.
    pub fn buffered_bytes(&self) -> (u64, u64) {
        self.core.buffered()
    }
}
