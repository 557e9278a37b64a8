//! Gather: every record of every source reaches every target (one target: gather; all
//! of them: allgather), tagged with its source. Streaming delivers records as they come;
//! batch delivers them at the end, grouped by source in task-id order.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::codec::{decode_all, encode};
use super::core::{Core, Incoming};
use super::{EdgeSpec, Event, Mode, Offer, Operation, Options, TaskId};
use crate::{Communicator, Error, Result};

/// See the module docs.
pub struct Gather<T> {
    core: Core,
    out: HashMap<TaskId, VecDeque<Event<(TaskId, T)>>>,
    collected: HashMap<TaskId, BTreeMap<TaskId, Vec<T>>>,
    error: Option<Error>,
    _t: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Gather<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gather").field("edge", &self.core.spec.edge).finish_non_exhaustive()
    }
}

impl<T: Serialize + DeserializeOwned> Gather<T> {
    /// A gather (or allgather) operation.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad edge specification.
    pub fn new(comm: &Communicator, spec: EdgeSpec, opts: Options) -> Result<Self> {
        let core = Core::new(comm, spec, &opts)?;
        let out = core.local_targets.iter().map(|&t| (t, VecDeque::new())).collect();
        let collected = core.local_targets.iter().map(|&t| (t, BTreeMap::new())).collect();
        Ok(Gather { core, out, collected, error: None, _t: PhantomData })
    }

    fn take(&mut self, target: TaskId, incoming: Incoming) -> Result<()> {
        let batch = self.core.mode == Mode::Batch;
        let out = self.out.get_mut(&target).expect("local target");
        match incoming {
            Incoming::Records { source, payload } => {
                let items = decode_all::<T>(&payload)?;
                if batch {
                    self.collected.get_mut(&target).expect("local target").entry(source).or_default().extend(items);
                } else {
                    out.extend(items.into_iter().map(|i| Event::Data((source, i))));
                }
            }
            Incoming::SourceEnded(_) => {}
            Incoming::Barrier(id) => out.push_back(Event::Barrier(id)),
            Incoming::End => {
                let all = std::mem::take(self.collected.get_mut(&target).expect("local target"));
                out.extend(all.into_iter().flat_map(|(s, items)| items.into_iter().map(move |i| Event::Data((s, i)))));
                out.push_back(Event::End);
            }
        }
        Ok(())
    }
}

impl<T: Serialize + DeserializeOwned> Operation for Gather<T> {
    type In = T;
    type Out = (TaskId, T);

    fn offer(&mut self, source: TaskId, item: T) -> Result<Offer<T>> {
        self.core.check_source(source)?;
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

    fn poll(&mut self, target: TaskId) -> Option<Event<(TaskId, T)>> {
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
