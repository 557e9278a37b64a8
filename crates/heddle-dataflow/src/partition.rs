//! Partition (each record to one target chosen by a function), and its fixed-route
//! relatives: direct (source i to target i), union (the sources merged into the targets,
//! source i feeding target i mod the target count) and broadcast (every record to every
//! target, directly or relayed along a worker tree). Streaming and batch behave alike:
//! records are delivered as they arrive; batch mode adds the end of every source.

use std::collections::VecDeque;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::arrivals::Incoming;
use super::codec::{decode_all, encode, key_hash};
use super::edge_core::{EdgeCore, RELAY};
use super::semantics::{Dataflow, Semantics};
use super::tree::BroadcastTree;
use super::{EdgeSpec, Event, Mode, Offer, Options, TaskId};
use crate::{Error, Result};
use heddle_comm::Communicator;

type Partitioner<T> = Box<dyn Fn(&T) -> usize + Send>;

enum Route<T> {
    By(Partitioner<T>),
    Direct,
    Union,
    All,
    Tree,
}

/// The semantics of [`Partition`]: a route from sources to targets.
pub struct Routing<T> {
    route: Route<T>,
    _t: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Routing<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Routing")
    }
}

/// Records from sources to targets along a route; see the module docs.
pub type Partition<T> = Dataflow<Routing<T>>;

impl<T: Serialize + DeserializeOwned> Dataflow<Routing<T>> {
    /// Sends each record to `targets[partitioner(&record) % targets.len()]` (for hash
    /// partitioning return a hash; for range partitioning, the range's index).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad edge specification.
    pub fn new(
        comm: &Communicator,
        spec: EdgeSpec,
        opts: Options,
        partitioner: impl Fn(&T) -> usize + Send + 'static,
    ) -> Result<Self> {
        Self::with_route(comm, spec, opts, Route::By(Box::new(partitioner)))
    }

    /// Hash partitioning: each record goes to the target its encoded bytes hash to (the
    /// same record always reaches the same target, on every worker).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad edge specification.
    pub fn by_hash(comm: &Communicator, spec: EdgeSpec, opts: Options) -> Result<Self> {
        Self::new(comm, spec, opts, |item: &T| encode(item).map_or(0, |b| key_hash(&b) as usize))
    }

    /// Range partitioning: target i receives the records whose `key` lies between
    /// `splitters[i - 1]` (inclusive) and `splitters[i]` (exclusive).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless there is one splitter fewer than targets, in
    /// ascending order, or for a bad edge specification.
    pub fn by_range<K: PartialOrd + Send + 'static>(
        comm: &Communicator,
        spec: EdgeSpec,
        opts: Options,
        splitters: Vec<K>,
        key: impl Fn(&T) -> K + Send + 'static,
    ) -> Result<Self> {
        if splitters.len() + 1 != spec.targets.len() || splitters.windows(2).any(|w| w[0] > w[1]) {
            return Err(Error::InvalidArgument(format!(
                "range partitioning over {} targets needs {} ascending splitters, got {}",
                spec.targets.len(),
                spec.targets.len().saturating_sub(1),
                splitters.len()
            )));
        }
        Self::new(comm, spec, opts, move |item: &T| {
            let k = key(item);
            splitters.partition_point(|s| *s <= k)
        })
    }

    /// Direct: source i sends to target i (as many targets as sources).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the counts differ or the specification is bad.
    pub fn direct(comm: &Communicator, spec: EdgeSpec, opts: Options) -> Result<Self> {
        if spec.sources.len() != spec.targets.len() {
            return Err(Error::InvalidArgument(format!(
                "direct needs as many targets as sources ({} sources, {} targets)",
                spec.sources.len(),
                spec.targets.len()
            )));
        }
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
    /// are reached directly (flat); more along a binomial tree of workers, per host first
    /// when they span hosts ([`BroadcastTree::Hosts`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad edge specification.
    pub fn broadcast(comm: &Communicator, spec: EdgeSpec, opts: Options) -> Result<Self> {
        let mut workers: Vec<usize> =
            spec.targets.iter().filter_map(|&t| spec.placement.worker(t).ok()).collect();
        workers.sort_unstable();
        workers.dedup();
        let tree = BroadcastTree::for_workers(&workers, &comm.hosts(), 3);
        Self::broadcast_along(comm, spec, opts, tree)
    }

    /// Broadcast along a chosen worker tree: [`BroadcastTree::Flat`] sends every message
    /// from the source's worker to each worker with targets; the others relay it
    /// worker to worker, each worker handing it to its own targets.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad edge specification.
    pub fn broadcast_along(
        comm: &Communicator,
        spec: EdgeSpec,
        opts: Options,
        tree: BroadcastTree,
    ) -> Result<Self> {
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

    fn with_route(
        comm: &Communicator,
        spec: EdgeSpec,
        opts: Options,
        route: Route<T>,
    ) -> Result<Self> {
        Ok(Dataflow::from_parts(
            EdgeCore::new(comm, spec, &opts)?,
            Routing { route, _t: PhantomData },
        ))
    }
}

impl<T: Serialize + DeserializeOwned> Semantics for Routing<T> {
    type In = T;
    type Out = T;

    fn offer(&mut self, core: &mut EdgeCore, source: TaskId, item: T) -> Result<Offer<T>> {
        let targets = &core.spec.targets;
        let to = match &self.route {
            Route::By(f) => vec![targets[f(&item) % targets.len()]],
            Route::Direct | Route::Union => {
                let i = core.spec.sources.iter().position(|&s| s == source).unwrap_or(0);
                vec![targets[i % targets.len()]]
            }
            Route::All => targets.clone(),
            Route::Tree => vec![RELAY],
        };
        if !core.has_room(&to) {
            return Ok(Offer::Full(item));
        }
        core.push_encoded(source, &to, &item)?;
        Ok(Offer::Accepted)
    }

    fn take(
        &mut self,
        _core: &EdgeCore,
        _target: TaskId,
        incoming: Incoming,
        out: &mut VecDeque<Event<T>>,
    ) -> Result<()> {
        match incoming {
            Incoming::Records { payload, .. } => {
                out.extend(decode_all::<T>(&payload)?.into_iter().map(Event::Data))
            }
            Incoming::SourceEnded(_) => {}
            Incoming::Barrier(id) => out.push_back(Event::Barrier(id)),
            Incoming::End => out.push_back(Event::End),
        }
        Ok(())
    }

    /// Records are handed out one by one, so a slow target keeps them on the edge.
    fn folds(&self, _mode: Mode) -> bool {
        false
    }
}
