//! Gather: every record of every source reaches every target (one target: gather; all
//! of them: allgather), tagged with its source. Streaming delivers records as they come
//! (directly, or up the tree from more than three workers); batch routes them up a
//! binomial tree of workers and delivers them at the
//! end, grouped by source in task-id order, holding them in a spill sorter (sorted runs on
//! disk beyond the budget).

use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::arrivals::Incoming;
use super::codec::records;
use super::codec::{decode, decode_all, encode};
use super::edge_core::EdgeCore;
use super::keyed_gather::sorters_for;
use super::semantics::{Dataflow, Semantics};
use super::tree::{BroadcastTree, TREE_FROM_WORKERS};
use super::{EdgeSpec, Event, Mode, Offer, Options, TaskId};
use crate::spill::SpillSorter;
use crate::Result;
use heddle_comm::Communicator;

/// The semantics of [`Gather`].
pub struct Gathering<T> {
    /// Batch: each target's records keyed by source (big-endian id: byte order is id
    /// order), spilled to disk beyond the budget.
    collected: HashMap<TaskId, SpillSorter>,
    spilled: u64,
    _t: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Gathering<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Gathering")
    }
}

/// See the module docs.
pub type Gather<T> = Dataflow<Gathering<T>>;

impl<T: Serialize + DeserializeOwned> Dataflow<Gathering<T>> {
    /// A gather (or allgather) operation.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] for a bad edge specification.
    pub fn new(comm: &Communicator, spec: EdgeSpec, opts: Options) -> Result<Self> {
        let mut core = EdgeCore::new(comm, spec, &opts)?;
        if opts.mode == Mode::Batch || core.source_worker_count() > TREE_FROM_WORKERS {
            // Records climb a binomial tree of workers: each worker sends to one parent,
            // so a target's worker hears from log(w) workers instead of all of them.
            core.set_up_tree(
                BroadcastTree::for_workers(&core.source_workers, &core.hosts, 0),
                false,
            )?;
        }
        let collected = sorters_for(&core, &opts, None)?;
        Ok(Dataflow::from_parts(core, Gathering { collected, spilled: 0, _t: PhantomData }))
    }

    /// Bytes this worker's targets have spilled to disk so far.
    pub fn spilled_bytes(&self) -> u64 {
        self.sem.spilled + self.sem.collected.values().map(SpillSorter::spilled_bytes).sum::<u64>()
    }
}

/// Sends one record of `source` to every target (handed back when any is full).
pub(crate) fn offer_to_all<T: Serialize>(
    core: &mut EdgeCore,
    source: TaskId,
    item: T,
) -> Result<Offer<T>> {
    let targets = core.spec.targets.clone();
    if !core.has_room(&targets) {
        return Ok(Offer::Full(item));
    }
    let bytes = encode(&item)?;
    for t in targets {
        core.push_record(source, t, &bytes);
    }
    Ok(Offer::Accepted)
}

impl<T: Serialize + DeserializeOwned> Semantics for Gathering<T> {
    type In = T;
    type Out = (TaskId, T);

    fn offer(&mut self, core: &mut EdgeCore, source: TaskId, item: T) -> Result<Offer<T>> {
        offer_to_all(core, source, item)
    }

    fn take(
        &mut self,
        _core: &EdgeCore,
        target: TaskId,
        incoming: Incoming,
        out: &mut VecDeque<Event<(TaskId, T)>>,
    ) -> Result<()> {
        match incoming {
            Incoming::Records { source, payload } => match self.collected.get_mut(&target) {
                Some(sorter) => {
                    for rec in records(&payload) {
                        sorter.push_slices(&source.to_be_bytes(), rec?)?;
                    }
                }
                None => out.extend(
                    decode_all::<T>(&payload)?.into_iter().map(|i| Event::Data((source, i))),
                ),
            },
            Incoming::SourceEnded(_) => {}
            Incoming::Barrier(id) => out.push_back(Event::Barrier(id)),
            Incoming::End => {
                if let Some(sorter) = self.collected.remove(&target) {
                    self.spilled += sorter.spilled_bytes();
                    for rec in sorter.finish()? {
                        let (k, v) = rec?;
                        let source =
                            <[u8; 4]>::try_from(k.as_slice()).map(u32::from_be_bytes).map_err(
                                |_| crate::Error::InvalidArgument("a bad source key".into()),
                            )?;
                        out.push_back(Event::Data((source, decode::<T>(&v)?)));
                    }
                }
                out.push_back(Event::End);
            }
        }
        Ok(())
    }
}
