//! Keyed reduce: records `(key, value)` are routed by a hash of the key, so each key has
//! one target, which folds its values. Batch mode combines on the sending worker first
//! (one record per key and target leaves the worker; a combiner that outgrows the memory
//! budget is sent early) and each target emits its keys, sorted, at the end; a target's
//! table that outgrows the budget is spilled as sorted runs and merged, key by key, at
//! the end. Streaming mode emits the key's updated value on every record.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::Hash;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::arrivals::Incoming;
use super::codec::{decode, decode_all, encode, encode_into, key_hash};
use super::edge_core::EdgeCore;
use super::keyed_gather::key_order;
use super::semantics::{Dataflow, Semantics};
use super::{EdgeSpec, Event, Mode, Offer, Options, TaskId};
use crate::spill::{SpillConfig, SpillSorter};
use crate::Result;
use heddle_comm::Communicator;

type Reducer<V> = Box<dyn Fn(V, V) -> V + Send>;

/// The semantics of [`KeyedReduce`].
pub struct KeyedReduction<K, V> {
    reducer: Reducer<V>,
    /// Batch: this worker's combined values per target.
    combined: HashMap<TaskId, HashMap<K, V>>,
    combined_entries: usize,
    unfinished_local: usize,
    totals: HashMap<TaskId, HashMap<K, V>>,
    /// Batch: tables spilled by each target, merged at the end.
    spills: HashMap<TaskId, SpillSorter>,
    spill: SpillConfig,
    /// Entries a table may hold before it is sent (combiner) or spilled (target).
    max_entries: usize,
    spilled: u64,
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
    K: Serialize + DeserializeOwned + Hash + Eq + Ord + Clone + 'static,
    V: Serialize + DeserializeOwned + Clone,
{
    /// A keyed reduce with `reducer` (associative and commutative).
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] for a bad edge specification.
    pub fn new(
        comm: &Communicator,
        spec: EdgeSpec,
        opts: Options,
        reducer: impl Fn(V, V) -> V + Send + 'static,
    ) -> Result<Self> {
        let core = EdgeCore::new(comm, spec, &opts)?;
        let unfinished_local = core.local_sources();
        let totals = core.local_targets.iter().map(|&t| (t, HashMap::new())).collect();
        // An estimate: an entry's inline size plus the table's own overhead.
        let entry = std::mem::size_of::<K>() + std::mem::size_of::<V>() + 32;
        let max_entries = (opts.spill.budget_bytes / entry).max(1);
        Ok(Dataflow::from_parts(
            core,
            KeyedReduction {
                reducer: Box::new(reducer),
                combined: HashMap::new(),
                combined_entries: 0,
                unfinished_local,
                totals,
                spills: HashMap::new(),
                spill: opts.spill,
                max_entries,
                spilled: 0,
            },
        ))
    }

    /// Bytes this worker's targets have spilled to disk so far.
    pub fn spilled_bytes(&self) -> u64 {
        self.sem.spilled + self.sem.spills.values().map(SpillSorter::spilled_bytes).sum::<u64>()
    }
}

impl<K, V> KeyedReduction<K, V>
where
    K: Serialize + DeserializeOwned + Hash + Eq + Ord + Clone + 'static,
    V: Serialize + DeserializeOwned + Clone,
{
    /// Sends every combined value (the combiner is full, or the last local source ended).
    fn send_combined(&mut self, core: &mut EdgeCore, source: TaskId) -> Result<()> {
        for (target, map) in std::mem::take(&mut self.combined) {
            for pair in map {
                core.push_with(source, target, |buf| encode_into(buf, &pair))?;
            }
        }
        self.combined_entries = 0;
        Ok(())
    }

    /// Moves a target's table into its spill sorter.
    fn spill_table(&mut self, target: TaskId) -> Result<()> {
        let table = std::mem::take(self.totals.get_mut(&target).expect("local target"));
        let sorter = match self.spills.entry(target) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(SpillSorter::new(self.spill.clone(), Some(key_order::<K>()))?)
            }
        };
        for (k, v) in table {
            sorter.push(encode(&k)?, encode(&v)?)?;
        }
        Ok(())
    }
}

fn merge<K: Hash + Eq, V: Clone>(
    reducer: &Reducer<V>,
    map: &mut HashMap<K, V>,
    key: K,
    value: V,
) -> V {
    let merged = match map.remove(&key) {
        Some(old) => reducer(old, value),
        None => value,
    };
    map.insert(key, merged.clone());
    merged
}

impl<K, V> Semantics for KeyedReduction<K, V>
where
    K: Serialize + DeserializeOwned + Hash + Eq + Ord + Clone + 'static,
    V: Serialize + DeserializeOwned + Clone,
{
    type In = (K, V);
    type Out = (K, V);

    fn offer(
        &mut self,
        core: &mut EdgeCore,
        source: TaskId,
        (key, value): (K, V),
    ) -> Result<Offer<(K, V)>> {
        let targets = &core.spec.targets;
        let target = targets[(key_hash(&encode(&key)?) % targets.len() as u64) as usize];
        if core.mode == Mode::Batch {
            let map = self.combined.entry(target).or_default();
            let before = map.len();
            merge(&self.reducer, map, key, value);
            self.combined_entries += map.len() - before;
            if self.combined_entries > self.max_entries {
                self.send_combined(core, source)?;
            }
            return Ok(Offer::Accepted);
        }
        if !core.has_room(&[target]) {
            return Ok(Offer::Full((key, value)));
        }
        core.push_with(source, target, |buf| encode_into(buf, &(key, value)))?;
        Ok(Offer::Accepted)
    }

    fn finish(&mut self, core: &mut EdgeCore, source: TaskId) -> Result<()> {
        self.unfinished_local -= 1;
        if core.mode == Mode::Batch && self.unfinished_local == 0 {
            // The last local source carries the worker's combined values.
            self.send_combined(core, source)?;
        }
        core.finish(source)
    }

    fn take(
        &mut self,
        core: &EdgeCore,
        target: TaskId,
        incoming: Incoming,
        out: &mut VecDeque<Event<(K, V)>>,
    ) -> Result<()> {
        match incoming {
            Incoming::Records { payload, .. } => {
                for (k, v) in decode_all::<(K, V)>(&payload)? {
                    let totals = self.totals.get_mut(&target).expect("local target");
                    let merged = merge(&self.reducer, totals, k.clone(), v);
                    if core.mode == Mode::Streaming {
                        out.push_back(Event::Data((k, merged)));
                    } else if totals.len() > self.max_entries {
                        self.spill_table(target)?;
                    }
                }
            }
            Incoming::SourceEnded(_) => {}
            Incoming::Barrier(id) => out.push_back(Event::Barrier(id)),
            Incoming::End => {
                if core.mode == Mode::Batch {
                    if self.spills.contains_key(&target) {
                        self.spill_table(target)?;
                        let sorter = self.spills.remove(&target).expect("just spilled");
                        self.spilled += sorter.spilled_bytes();
                        for group in sorter.finish()?.group_by_key() {
                            let (k, vs) = group?;
                            let mut acc: Option<V> = None;
                            for v in vs {
                                let v = decode::<V>(&v)?;
                                acc = Some(match acc {
                                    Some(a) => (self.reducer)(a, v),
                                    None => v,
                                });
                            }
                            if let Some(v) = acc {
                                out.push_back(Event::Data((decode::<K>(&k)?, v)));
                            }
                        }
                    } else {
                        let totals = self.totals.get_mut(&target).expect("local target");
                        let sorted: BTreeMap<K, V> = std::mem::take(totals).into_iter().collect();
                        out.extend(sorted.into_iter().map(Event::Data));
                    }
                }
                out.push_back(Event::End);
            }
        }
        Ok(())
    }
}
