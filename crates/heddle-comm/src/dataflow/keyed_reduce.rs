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
use super::stage::{Dataflow, Semantics};
use super::{EdgeSpec, Event, Mode, Offer, Options, TaskId};
use crate::{Communicator, Result};

type Reducer<V> = Box<dyn Fn(V, V) -> V + Send>;

/// The semantics of [`KeyedReduce`].
pub struct KeyedReduction<K, V> {
    reducer: Reducer<V>,
    /// Batch: this worker's combined values per target.
    combined: HashMap<TaskId, HashMap<K, V>>,
    unfinished_local: usize,
    totals: HashMap<TaskId, HashMap<K, V>>,
}

impl<K, V> std::fmt::Debug for KeyedReduction<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyedReduction")
    }
}

/// See the module docs.
pub type KeyedReduce<K, V> = Dataflow<KeyedReduction<K, V>>;

impl<K, V> Dataflow<KeyedReduction<K, V>>
where
    K: Serialize + DeserializeOwned + Hash + Eq + Ord + Clone,
    V: Serialize + DeserializeOwned + Clone,
{
    /// A keyed reduce with `reducer` (associative and commutative).
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] for a bad edge specification.
    pub fn new(comm: &Communicator, spec: EdgeSpec, opts: Options, reducer: impl Fn(V, V) -> V + Send + 'static) -> Result<Self> {
        let core = Core::new(comm, spec, &opts)?;
        let unfinished_local = core.local_sources();
        let totals = core.local_targets.iter().map(|&t| (t, HashMap::new())).collect();
        Ok(Dataflow::from_parts(core, KeyedReduction { reducer: Box::new(reducer), combined: HashMap::new(), unfinished_local, totals }))
    }
}

fn merge<K: Hash + Eq, V: Clone>(reducer: &Reducer<V>, map: &mut HashMap<K, V>, key: K, value: V) -> V {
    let merged = match map.remove(&key) {
        Some(old) => reducer(old, value),
        None => value,
    };
    map.insert(key, merged.clone());
    merged
}

impl<K, V> Semantics for KeyedReduction<K, V>
where
    K: Serialize + DeserializeOwned + Hash + Eq + Ord + Clone,
    V: Serialize + DeserializeOwned + Clone,
{
    type In = (K, V);
    type Out = (K, V);

    fn offer(&mut self, core: &mut Core, source: TaskId, (key, value): (K, V)) -> Result<Offer<(K, V)>> {
        let targets = &core.spec.targets;
        let target = targets[(key_hash(&encode(&key)?) % targets.len() as u64) as usize];
        if core.mode == Mode::Batch {
            merge(&self.reducer, self.combined.entry(target).or_default(), key, value);
            return Ok(Offer::Accepted);
        }
        if !core.has_room(&[target]) {
            return Ok(Offer::Full((key, value)));
        }
        core.push_with(source, target, |buf| encode_into(buf, &(key, value)))?;
        Ok(Offer::Accepted)
    }

    fn finish(&mut self, core: &mut Core, source: TaskId) -> Result<()> {
        self.unfinished_local -= 1;
        if core.mode == Mode::Batch && self.unfinished_local == 0 {
            // The last local source carries the worker's combined values.
            for (target, map) in std::mem::take(&mut self.combined) {
                for pair in map {
                    core.push_with(source, target, |buf| encode_into(buf, &pair))?;
                }
            }
        }
        core.finish(source)
    }

    fn take(&mut self, core: &Core, target: TaskId, incoming: Incoming, out: &mut VecDeque<Event<(K, V)>>) -> Result<()> {
        let totals = self.totals.get_mut(&target).expect("local target");
        match incoming {
            Incoming::Records { payload, .. } => {
                for (k, v) in decode_all::<(K, V)>(&payload)? {
                    let merged = merge(&self.reducer, totals, k.clone(), v);
                    if core.mode == Mode::Streaming {
                        out.push_back(Event::Data((k, merged)));
                    }
                }
            }
            Incoming::SourceEnded(_) => {}
            Incoming::Barrier(id) => out.push_back(Event::Barrier(id)),
            Incoming::End => {
                if core.mode == Mode::Batch {
                    let sorted: BTreeMap<K, V> = std::mem::take(totals).into_iter().collect();
                    out.extend(sorted.into_iter().map(Event::Data));
                }
                out.push_back(Event::End);
            }
        }
        Ok(())
    }
}
