//! Keyed gather (group by key): records `(key, value)` are routed by a hash of the key;
//! in batch mode each target emits every key once, in key order (or, faster, in no
//! particular order: [`KeyedGather::unsorted`]), with all its values
//! (in arrival order per source), holding at most the spill budget in memory and sorted
//! runs on disk beyond it; in streaming mode each record is delivered as it arrives, as
//! a group of one.

use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::arrivals::Incoming;
use super::codec::records;
use super::codec::{decode, decode_keyed, encode, encode_keyed_into, key_hash, split_keyed};
use super::edge_core::EdgeCore;
use super::semantics::{Dataflow, Semantics};
use super::{EdgeSpec, Event, Mode, Offer, Options, TaskId};
use crate::spill::{KeyOrder, SpillSorter};
use crate::Result;
use heddle_comm::Communicator;

/// The semantics of [`KeyedGather`].
pub struct Grouping<K, V> {
    sorters: HashMap<TaskId, SpillSorter>,
    spilled: u64,
    _kv: PhantomData<fn() -> (K, V)>,
}

impl<K, V> std::fmt::Debug for Grouping<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Grouping")
    }
}

/// See the module docs.
pub type KeyedGather<K, V> = Dataflow<Grouping<K, V>>;

impl<K: Serialize + DeserializeOwned + Ord + 'static, V: Serialize + DeserializeOwned>
    Dataflow<Grouping<K, V>>
{
    /// A keyed gather whose batch groups come in key order.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] for a bad edge specification or spill directory.
    pub fn new(comm: &Communicator, spec: EdgeSpec, opts: Options) -> Result<Self> {
        Self::with_order(comm, spec, opts, Some(key_order::<K>()))
    }

    /// A keyed gather whose batch groups come in no particular order (the order of the
    /// keys' encodings), which is faster: grouping compares encoded bytes and never
    /// decodes a key to compare it. Equal keys must encode equally (true of bincode for
    /// every type but maps and sets with an unstable iteration order).
    ///
    /// # Errors
    /// As [`KeyedGather::new`].
    pub fn unsorted(comm: &Communicator, spec: EdgeSpec, opts: Options) -> Result<Self> {
        Self::with_order(comm, spec, opts, None)
    }

    fn with_order(
        comm: &Communicator,
        spec: EdgeSpec,
        opts: Options,
        order: Option<KeyOrder>,
    ) -> Result<Self> {
        let core = EdgeCore::new(comm, spec, &opts)?;
        let sorters = sorters_for(&core, &opts, order)?;
        Ok(Dataflow::from_parts(core, Grouping { sorters, spilled: 0, _kv: PhantomData }))
    }

    /// Bytes this worker's targets have spilled to disk so far.
    pub fn spilled_bytes(&self) -> u64 {
        self.sem.spilled + self.sem.sorters.values().map(SpillSorter::spilled_bytes).sum::<u64>()
    }
}

/// One sorter per local target in batch mode (none when streaming).
pub(crate) fn sorters_for(
    core: &EdgeCore,
    opts: &Options,
    order: Option<KeyOrder>,
) -> Result<HashMap<TaskId, SpillSorter>> {
    let mut sorters = HashMap::new();
    if opts.mode == Mode::Batch {
        for &t in &core.local_targets {
            sorters.insert(t, SpillSorter::new(opts.spill.clone(), order.clone())?);
        }
    }
    Ok(sorters)
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

/// Routes a keyed record by the hash of its encoded key.
pub(crate) fn offer_keyed<K: Serialize, V: Serialize>(
    core: &mut EdgeCore,
    source: TaskId,
    target: TaskId,
    item: (K, V),
) -> Result<Offer<(K, V)>> {
    if !core.has_room(&[target]) {
        return Ok(Offer::Full(item));
    }
    core.push_with(source, target, |buf| encode_keyed_into(buf, &item.0, &item.1))?;
    Ok(Offer::Accepted)
}

/// The target of `key`: its hash modulo the targets.
pub(crate) fn hashed_target<K: Serialize>(core: &EdgeCore, key: &K) -> Result<TaskId> {
    let targets = &core.spec.targets;
    Ok(targets[(key_hash(&encode(key)?) % targets.len() as u64) as usize])
}

/// Pushes every keyed record of a message into `sorter`.
pub(crate) fn sort_in(sorter: &mut SpillSorter, payload: &[u8]) -> Result<()> {
    for rec in records(payload) {
        let (k, v) = split_keyed(rec?)?;
        sorter.push_slices(k, v)?;
    }
    Ok(())
}

impl<K: Serialize + DeserializeOwned + Ord + 'static, V: Serialize + DeserializeOwned> Semantics
    for Grouping<K, V>
{
    type In = (K, V);
    type Out = (K, Vec<V>);

    fn offer(
        &mut self,
        core: &mut EdgeCore,
        source: TaskId,
        item: (K, V),
    ) -> Result<Offer<(K, V)>> {
        let target = hashed_target(core, &item.0)?;
        offer_keyed(core, source, target, item)
    }

    fn take(
        &mut self,
        _core: &EdgeCore,
        target: TaskId,
        incoming: Incoming,
        out: &mut VecDeque<Event<(K, Vec<V>)>>,
    ) -> Result<()> {
        match incoming {
            Incoming::Records { payload, .. } => match self.sorters.get_mut(&target) {
                // Keep the encoded key and value: they are decoded once, when emitted.
                Some(sorter) => sort_in(sorter, &payload)?,
                None => {
                    for rec in records(&payload) {
                        let (k, v) = decode_keyed::<K, V>(rec?)?;
                        out.push_back(Event::Data((k, vec![v])));
                    }
                }
            },
            Incoming::SourceEnded(_) => {}
            Incoming::Barrier(id) => out.push_back(Event::Barrier(id)),
            Incoming::End => {
                if let Some(sorter) = self.sorters.remove(&target) {
                    self.spilled += sorter.spilled_bytes();
                    for group in sorter.finish()?.group_by_key() {
                        let (k, vs) = group?;
                        let values =
                            vs.iter().map(|v| decode::<V>(v)).collect::<Result<Vec<V>>>()?;
                        out.push_back(Event::Data((decode::<K>(&k)?, values)));
                    }
                }
                out.push_back(Event::End);
            }
        }
        Ok(())
    }
}
