//! Keyed gather (group by key): records `(key, value)` are routed by a hash of the key;
//! in batch mode each target emits every key once, in key order, with all its values
//! (in arrival order per source); in streaming mode each record is delivered as it
//! arrives, as a group of one.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::codec::{decode_all, encode, key_hash};
use super::core::{Core, Incoming};
use super::{EdgeSpec, Event, Mode, Offer, Operation, Options, TaskId};
use crate::{Communicator, Error, Result};

type Groups<K, V> = VecDeque<Event<(K, Vec<V>)>>;

/// See the module docs.
pub struct KeyedGather<K, V> {
    core: Core,
    groups: HashMap<TaskId, BTreeMap<K, Vec<V>>>,
    out: HashMap<TaskId, Groups<K, V>>,
    error: Option<Error>,
}

impl<K, V> std::fmt::Debug for KeyedGather<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedGather").field("edge", &self.core.spec.edge).finish_non_exhaustive()
    }
}

impl<K: Serialize + DeserializeOwned + Ord, V: Serialize + DeserializeOwned> KeyedGather<K, V> {
    /// A keyed gather.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad edge specification.
    pub fn new(comm: &Communicator, spec: EdgeSpec, opts: Options) -> Result<Self> {
        let core = Core::new(comm, spec, &opts)?;
        let groups = core.local_targets.iter().map(|&t| (t, BTreeMap::new())).collect();
        let out = core.local_targets.iter().map(|&t| (t, VecDeque::new())).collect();
        Ok(KeyedGather { core, groups, out, error: None })
    }

    fn take(&mut self, target: TaskId, incoming: Incoming) -> Result<()> {
        let groups = self.groups.get_mut(&target).expect("local target");
        let out = self.out.get_mut(&target).expect("local target");
        match incoming {
            Incoming::Records { payload, .. } => {
                for (k, v) in decode_all::<(K, V)>(&payload)? {
                    if self.core.mode == Mode::Batch {
                        groups.entry(k).or_default().push(v);
                    } else {
                        out.push_back(Event::Data((k, vec![v])));
                    }
                }
            }
            Incoming::SourceEnded(_) => {}
            Incoming::Barrier(id) => out.push_back(Event::Barrier(id)),
            Incoming::End => {
                out.extend(std::mem::take(groups).into_iter().map(Event::Data));
                out.push_back(Event::End);
            }
        }
        Ok(())
    }
}

impl<K: Serialize + DeserializeOwned + Ord, V: Serialize + DeserializeOwned> Operation for KeyedGather<K, V> {
    type In = (K, V);
    type Out = (K, Vec<V>);

    fn offer(&mut self, source: TaskId, item: (K, V)) -> Result<Offer<(K, V)>> {
        self.core.check_source(source)?;
        let bytes = encode(&item)?;
        let key_len = bincode::serialized_size(&item.0)? as usize;
        let targets = &self.core.spec.targets;
        let target = targets[(key_hash(&bytes[..key_len]) % targets.len() as u64) as usize];
        if !self.core.has_room(&[target]) {
            return Ok(Offer::Full(item));
        }
        self.core.push_record(source, target, &bytes);
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

    fn poll(&mut self, target: TaskId) -> Option<Event<(K, Vec<V>)>> {
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
