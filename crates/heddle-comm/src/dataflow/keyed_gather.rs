//! Keyed gather (group by key): records `(key, value)` are routed by a hash of the key;
//! in batch mode each target emits every key once, in key order, with all its values
//! (in arrival order per source), holding at most the spill budget in memory and sorted
//! runs on disk beyond it; in streaming mode each record is delivered as it arrives, as
//! a group of one.

use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::codec::{decode, decode_keyed, encode, encode_keyed_into, key_hash, split_keyed};
use super::core::{records, Core, Incoming};
use crate::spill::{KeyOrder, SpillSorter};
use super::{EdgeSpec, Event, Mode, Offer, Operation, Options, TaskId};
use crate::{Communicator, Error, Result};

type Groups<K, V> = VecDeque<Event<(K, Vec<V>)>>;

/// See the module docs.
pub struct KeyedGather<K, V> {
    core: Core,
    sorters: HashMap<TaskId, SpillSorter>,
    spilled: u64,
    out: HashMap<TaskId, Groups<K, V>>,
    error: Option<Error>,
    _kv: PhantomData<fn() -> (K, V)>,
}

impl<K, V> std::fmt::Debug for KeyedGather<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedGather").field("edge", &self.core.spec.edge).finish_non_exhaustive()
    }
}

impl<K: Serialize + DeserializeOwned + Ord + 'static, V: Serialize + DeserializeOwned> KeyedGather<K, V> {
    /// A keyed gather.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad edge specification or spill directory.
    pub fn new(comm: &Communicator, spec: EdgeSpec, opts: Options) -> Result<Self> {
        let core = Core::new(comm, spec, &opts)?;
        let mut sorters = HashMap::new();
        if opts.mode == Mode::Batch {
            for &t in &core.local_targets {
                sorters.insert(t, SpillSorter::new(opts.spill.clone(), Some(key_order::<K>()))?);
            }
        }
        let out = core.local_targets.iter().map(|&t| (t, VecDeque::new())).collect();
        Ok(KeyedGather { core, sorters, spilled: 0, out, error: None, _kv: PhantomData })
    }

    /// Bytes this worker's targets have spilled to disk so far.
    pub fn spilled_bytes(&self) -> u64 {
        self.spilled + self.sorters.values().map(SpillSorter::spilled_bytes).sum::<u64>()
    }

    fn take(&mut self, target: TaskId, incoming: Incoming) -> Result<()> {
        let out = self.out.get_mut(&target).expect("local target");
        match incoming {
            Incoming::Records { payload, .. } => {
                for rec in records(&payload) {
                    let rec = rec?;
                    match self.sorters.get_mut(&target) {
                        // Keep the encoded key and value: they are decoded once, when emitted.
                        Some(sorter) => {
                            let (k, v) = split_keyed(rec)?;
                            sorter.push(k.to_vec(), v.to_vec())?;
                        }
                        None => {
                            let (k, v) = decode_keyed::<K, V>(rec)?;
                            out.push_back(Event::Data((k, vec![v])));
                        }
                    }
                }
            }
            Incoming::SourceEnded(_) => {}
            Incoming::Barrier(id) => out.push_back(Event::Barrier(id)),
            Incoming::End => {
                if let Some(sorter) = self.sorters.remove(&target) {
                    self.spilled += sorter.spilled_bytes();
                    for group in sorter.finish()?.group_by_key() {
                        let (k, vs) = group?;
                        let values = vs.iter().map(|v| decode::<V>(v)).collect::<Result<Vec<V>>>()?;
                        out.push_back(Event::Data((decode::<K>(&k)?, values)));
                    }
                }
                out.push_back(Event::End);
            }
        }
        Ok(())
    }
}

/// Orders encoded keys by decoding them (`Ord` of `K`); undecodable keys sort last.
pub(crate) fn key_order<K: DeserializeOwned + Ord + 'static>() -> KeyOrder {
    std::sync::Arc::new(|a: &[u8], b: &[u8]| match (decode::<K>(a), decode::<K>(b)) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        (Ok(_), Err(_)) => std::cmp::Ordering::Less,
        (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
        (Err(_), Err(_)) => a.cmp(b),
    })
}

impl<K: Serialize + DeserializeOwned + Ord + 'static, V: Serialize + DeserializeOwned> Operation for KeyedGather<K, V> {
    type In = (K, V);
    type Out = (K, Vec<V>);

    fn offer(&mut self, source: TaskId, item: (K, V)) -> Result<Offer<(K, V)>> {
        self.core.check_source(source)?;
        let targets = &self.core.spec.targets;
        let target = targets[(key_hash(&encode(&item.0)?) % targets.len() as u64) as usize];
        if !self.core.has_room(&[target]) {
            return Ok(Offer::Full(item));
        }
        self.core.push_with(source, target, |buf| encode_keyed_into(buf, &item.0, &item.1))?;
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
