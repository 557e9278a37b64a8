//! Sort: records `(key, value)` are range-partitioned by splitters (target i receives the
//! keys between splitter i − 1 and splitter i) and, in batch mode, each target emits its
//! records sorted by key (equal keys in arrival order), spilling sorted runs to disk
//! beyond the budget; concatenating the targets in order gives a total order. Streaming
//! mode only range-partitions (an unbounded stream has no sorted order).

use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::arrivals::Incoming;
use super::codec::records;
use super::codec::{decode, decode_keyed};
use super::edge_core::EdgeCore;
use super::keyed_gather::{key_order, offer_keyed, sort_in, sorters_for};
use super::semantics::REFILL;
use super::semantics::{Dataflow, Semantics};
use super::{EdgeSpec, Event, Offer, Options, TaskId};
use crate::spill::{KeyOrder, SortedRecords, SpillSorter};
use crate::{Error, Result};
use heddle_comm::Communicator;

/// The semantics of [`Sort`].
pub struct Sorting<K, V> {
    splitters: Vec<K>,
    sorters: HashMap<TaskId, SpillSorter>,
    /// Targets whose sorted records are being handed out.
    draining: HashMap<TaskId, SortedRecords>,
    spilled: u64,
    _v: PhantomData<fn() -> V>,
}

impl<K, V> std::fmt::Debug for Sorting<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sorting")
    }
}

/// See the module docs.
pub type Sort<K, V> = Dataflow<Sorting<K, V>>;

impl<K: Serialize + DeserializeOwned + Ord + 'static, V: Serialize + DeserializeOwned>
    Dataflow<Sorting<K, V>>
{
    /// A sort over `splitters` (ascending; one fewer than the targets, or fewer still:
    /// then the last targets receive nothing).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the splitters do not fit the targets or are not
    /// ascending, or for a bad edge specification or spill directory.
    pub fn new(
        comm: &Communicator,
        spec: EdgeSpec,
        opts: Options,
        splitters: Vec<K>,
    ) -> Result<Self> {
        Self::build(comm, spec, opts, splitters, Some(key_order::<K>()))
    }

    /// A sort that compares encoded keys byte by byte instead of decoding them: much
    /// faster, and correct only for keys whose bincode encoding sorts like the key —
    /// byte arrays such as `[u8; 10]` (no length prefix), or big-endian integers stored as
    /// byte arrays.
    ///
    /// # Errors
    /// As [`Sort::new`].
    pub fn new_bytewise(
        comm: &Communicator,
        spec: EdgeSpec,
        opts: Options,
        splitters: Vec<K>,
    ) -> Result<Self> {
        Self::build(comm, spec, opts, splitters, None)
    }

    fn build(
        comm: &Communicator,
        spec: EdgeSpec,
        opts: Options,
        splitters: Vec<K>,
        order: Option<KeyOrder>,
    ) -> Result<Self> {
        // Fewer splitters leave the last targets without records (a sample of few keys).
        if splitters.len() + 1 > spec.targets.len().max(1) {
            return Err(Error::InvalidArgument(format!(
                "sort over {} targets takes at most {} splitters, got {}",
                spec.targets.len(),
                spec.targets.len().saturating_sub(1),
                splitters.len()
            )));
        }
        if splitters.windows(2).any(|w| w[0] > w[1]) {
            return Err(Error::InvalidArgument("sort splitters must be ascending".into()));
        }
        let core = EdgeCore::new(comm, spec, &opts)?;
        let sorters = sorters_for(&core, &opts, order)?;
        Ok(Dataflow::from_parts(
            core,
            Sorting { splitters, sorters, draining: HashMap::new(), spilled: 0, _v: PhantomData },
        ))
    }

    /// Splitters that cut `sample` (any sample of the keys) into `parts` ranges of about
    /// equal size.
    pub fn splitters_from_sample(mut sample: Vec<K>, parts: usize) -> Vec<K> {
        sample.sort();
        let n = sample.len();
        let picks: Vec<usize> =
            (1..parts.max(1)).map(|i| i * n / parts).filter(|&i| i < n).collect();
        let mut out = Vec::with_capacity(picks.len());
        let mut it = sample.into_iter().enumerate();
        for p in picks {
            for (i, k) in it.by_ref() {
                if i == p {
                    out.push(k);
                    break;
                }
            }
        }
        out
    }

    /// Bytes this worker's targets have spilled to disk so far.
    pub fn spilled_bytes(&self) -> u64 {
        self.sem.spilled + self.sem.sorters.values().map(SpillSorter::spilled_bytes).sum::<u64>()
    }
}

impl<K: Serialize + DeserializeOwned + Ord + 'static, V: Serialize + DeserializeOwned> Semantics
    for Sorting<K, V>
{
    type In = (K, V);
    type Out = (K, V);

    fn offer(
        &mut self,
        core: &mut EdgeCore,
        source: TaskId,
        item: (K, V),
    ) -> Result<Offer<(K, V)>> {
        let target = core.spec.targets[self.splitters.partition_point(|s| *s <= item.0)];
        offer_keyed(core, source, target, item)
    }

    fn take(
        &mut self,
        _core: &EdgeCore,
        target: TaskId,
        incoming: Incoming,
        out: &mut VecDeque<Event<(K, V)>>,
    ) -> Result<()> {
        match incoming {
            Incoming::Records { payload, .. } => match self.sorters.get_mut(&target) {
                Some(sorter) => sort_in(sorter, &payload)?,
                None => {
                    for rec in records(&payload) {
                        out.push_back(Event::Data(decode_keyed::<K, V>(rec?)?));
                    }
                }
            },
            Incoming::SourceEnded(_) => {}
            Incoming::Barrier(id) => out.push_back(Event::Barrier(id)),
            Incoming::End => match self.sorters.remove(&target) {
                Some(sorter) => {
                    self.spilled += sorter.spilled_bytes();
                    self.draining.insert(target, sorter.finish()?);
                }
                None => out.push_back(Event::End),
            },
        }
        Ok(())
    }

    fn refill(&mut self, target: TaskId, out: &mut VecDeque<Event<(K, V)>>) -> Result<()> {
        let Some(records) = self.draining.get_mut(&target) else { return Ok(()) };
        for rec in records.by_ref().take(REFILL) {
            let (k, v) = rec?;
            out.push_back(Event::Data((decode::<K>(&k)?, decode::<V>(&v)?)));
        }
        if out.is_empty() {
            self.draining.remove(&target);
            out.push_back(Event::End);
        }
        Ok(())
    }

    fn has_results(&self) -> bool {
        !self.draining.is_empty()
    }
}
