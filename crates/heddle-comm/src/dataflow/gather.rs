//! Gather: every record of every source reaches every target (one target: gather; all
//! of them: allgather), tagged with its source. Streaming delivers records as they come,
//! directly; batch routes them up a binomial tree of workers and delivers them at the
//! end, grouped by source in task-id order.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::codec::{decode_all, encode};
use super::core::{Core, Incoming};
use super::stage::{Dataflow, Semantics};
use super::tree::BroadcastTree;
use super::{EdgeSpec, Event, Mode, Offer, Options, TaskId};
use crate::{Communicator, Result};

/// The semantics of [`Gather`].
pub struct Gathering<T> {
    collected: HashMap<TaskId, BTreeMap<TaskId, Vec<T>>>,
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
        let mut core = Core::new(comm, spec, &opts)?;
        if opts.mode == Mode::Batch {
            // Records climb a binomial tree of workers: each worker sends to one parent,
            // so a target's worker hears from log(w) workers instead of all of them.
            core.set_up_tree(BroadcastTree::Binomial, false)?;
        }
        let collected = core.local_targets.iter().map(|&t| (t, BTreeMap::new())).collect();
        Ok(Dataflow::from_parts(core, Gathering { collected, _t: PhantomData }))
    }
}

/// Sends one record of `source` to every target (handed back when any is full).
pub(crate) fn offer_to_all<T: Serialize>(core: &mut Core, source: TaskId, item: T) -> Result<Offer<T>> {
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

    fn offer(&mut self, core: &mut Core, source: TaskId, item: T) -> Result<Offer<T>> {
        offer_to_all(core, source, item)
    }

    fn take(&mut self, core: &Core, target: TaskId, incoming: Incoming, out: &mut VecDeque<Event<(TaskId, T)>>) -> Result<()> {
        let collected = self.collected.get_mut(&target).expect("local target");
        match incoming {
            Incoming::Records { source, payload } => {
                let items = decode_all::<T>(&payload)?;
                if core.mode == Mode::Batch {
                    collected.entry(source).or_default().extend(items);
                } else {
                    out.extend(items.into_iter().map(|i| Event::Data((source, i))));
                }
            }
            Incoming::SourceEnded(_) => {}
            Incoming::Barrier(id) => out.push_back(Event::Barrier(id)),
            Incoming::End => {
                let all = std::mem::take(collected);
                out.extend(all.into_iter().flat_map(|(s, items)| items.into_iter().map(move |i| Event::Data((s, i)))));
                out.push_back(Event::End);
            }
        }
        Ok(())
    }
}
