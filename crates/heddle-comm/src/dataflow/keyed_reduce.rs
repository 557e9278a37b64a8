//! Keyed reduce: records `(key, value)` are routed by a hash of the key, so each key has
//! one target, which folds its values. Batch mode combines on the sending worker first
//! (one record per key and target leaves the worker) and each target emits its keys,
//! sorted, at the end. Streaming mode emits the key's updated value on every record.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::Hash;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::codec::{decode_all, encode, encode_into, key_hash};
use super::core::{Core, Incoming};
use super::{EdgeSpec, Event, Mode, Offer, Operation, Options, TaskId};
use crate::{Communicator, Error, Result};

type Reducer<V> = Box<dyn Fn(V, V) -> V + Send>;

/// See the module docs.
pub struct KeyedReduce<K, V> {
    core: Core,
    reducer: Reducer<V>,
    /// Batch: this worker's combined values per target.
    combined: HashMap<TaskId, HashMap<K, V>>,
    unfinished_local: usize,
    totals: HashMap<TaskId, HashMap<K, V>>,
    out: HashMap<TaskId, VecDeque<Event<(K, V)>>>,
    error: Option<Error>,
}

impl<K, V> std::fmt::Debug for KeyedReduce<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedReduce").field("edge", &self.core.spec.edge).finish_non_exhaustive()
    }
}

impl<K, V> KeyedReduce<K, V>
where
    K: Serialize + DeserializeOwned + Hash + Eq + Ord + Clone,
    V: Serialize + DeserializeOwned + Clone,
{
    /// A keyed reduce with `reducer` (associative and commutative).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad edge specification.
    pub fn new(comm: &Communicator, spec: EdgeSpec, opts: Options, reducer: impl Fn(V, V) -> V + Send + 'static) -> Result<Self> {
        let core = Core::new(comm, spec, &opts)?;
        let rank = comm.world_rank(comm.rank());
        let unfinished_local = core.spec.sources.iter().filter(|&&s| core.spec.placement.worker(s).ok() == Some(rank)).count();
        let totals = core.local_targets.iter().map(|&t| (t, HashMap::new())).collect();
        let out = core.local_targets.iter().map(|&t| (t, VecDeque::new())).collect();
        Ok(KeyedReduce { core, reducer: Box::new(reducer), combined: HashMap::new(), unfinished_local, totals, out, error: None })
    }

    fn target_of(&self, key: &K) -> Result<TaskId> {
        let targets = &self.core.spec.targets;
        Ok(targets[(key_hash(&encode(key)?) % targets.len() as u64) as usize])
    }

    fn merge(reducer: &Reducer<V>, map: &mut HashMap<K, V>, key: K, value: V) -> V {
        let merged = match map.remove(&key) {
            Some(old) => reducer(old, value),
            None => value,
        };
        map.insert(key, merged.clone());
        merged
    }

    fn take(&mut self, target: TaskId, incoming: Incoming) -> Result<()> {
        let totals = self.totals.get_mut(&target).expect("local target");
        let out = self.out.get_mut(&target).expect("local target");
        match incoming {
            Incoming::Records { payload, .. } => {
                for (k, v) in decode_all::<(K, V)>(&payload)? {
                    let merged = Self::merge(&self.reducer, totals, k.clone(), v);
                    if self.core.mode == Mode::Streaming {
                        out.push_back(Event::Data((k, merged)));
                    }
                }
            }
            Incoming::SourceEnded(_) => {}
            Incoming::Barrier(id) => out.push_back(Event::Barrier(id)),
            Incoming::End => {
                if self.core.mode == Mode::Batch {
                    let sorted: BTreeMap<K, V> = std::mem::take(totals).into_iter().collect();
                    out.extend(sorted.into_iter().map(Event::Data));
                }
                out.push_back(Event::End);
            }
        }
        Ok(())
    }
}

impl<K, V> Operation for KeyedReduce<K, V>
where
    K: Serialize + DeserializeOwned + Hash + Eq + Ord + Clone,
    V: Serialize + DeserializeOwned + Clone,
{
    type In = (K, V);
    type Out = (K, V);

    fn offer(&mut self, source: TaskId, (key, value): (K, V)) -> Result<Offer<(K, V)>> {
        self.core.check_source(source)?;
        let target = self.target_of(&key)?;
        if self.core.mode == Mode::Batch {
            Self::merge(&self.reducer, self.combined.entry(target).or_default(), key, value);
            return Ok(Offer::Accepted);
        }
        if !self.core.has_room(&[target]) {
            return Ok(Offer::Full((key, value)));
        }
        self.core.push_with(source, target, |buf| encode_into(buf, &(key, value)))?;
        Ok(Offer::Accepted)
    }

    fn finish(&mut self, source: TaskId) -> Result<()> {
        self.core.check_source(source)?;
        self.unfinished_local -= 1;
        if self.core.mode == Mode::Batch && self.unfinished_local == 0 {
            // The last local source carries the worker's combined values.
            for (target, map) in std::mem::take(&mut self.combined) {
                for pair in map {
                    self.core.push_with(source, target, |buf| encode_into(buf, &pair))?;
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

    fn poll(&mut self, target: TaskId) -> Option<Event<(K, V)>> {
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
