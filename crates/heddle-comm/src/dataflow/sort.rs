//! Sort: records `(key, value)` are range-partitioned by splitters (target i receives the
//! keys between splitter i − 1 and splitter i) and, in batch mode, each target emits its
//! records sorted by key (equal keys in arrival order), spilling sorted runs to disk
//! beyond the budget; concatenating the targets in order gives a total order. Streaming
//! mode only range-partitions (an unbounded stream has no sorted order).

use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::codec::{decode, decode_keyed, encode_keyed_into, split_keyed};
use super::core::{records, Core, Incoming};
use super::keyed_gather::key_order;
use super::{EdgeSpec, Event, Mode, Offer, Operation, Options, TaskId};
use crate::spill::SpillSorter;
use crate::{Communicator, Error, Result};

/// See the module docs.
pub struct Sort<K, V> {
    core: Core,
    splitters: Vec<K>,
    sorters: HashMap<TaskId, SpillSorter>,
    spilled: u64,
    out: HashMap<TaskId, VecDeque<Event<(K, V)>>>,
    error: Option<Error>,
    _v: PhantomData<fn() -> V>,
}

impl<K, V> std::fmt::Debug for Sort<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sort").field("edge", &self.core.spec.edge).finish_non_exhaustive()
    }
}

impl<K: Serialize + DeserializeOwned + Ord + 'static, V: Serialize + DeserializeOwned> Sort<K, V> {
    /// A sort over `splitters` (ascending, one fewer than the targets).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the splitters do not fit the targets or are not
    /// ascending, or for a bad edge specification or spill directory.
    pub fn new(comm: &Communicator, spec: EdgeSpec, opts: Options, splitters: Vec<K>) -> Result<Self> {
        Self::build(comm, spec, opts, splitters, Some(key_order::<K>()))
    }

    /// A sort that compares encoded keys byte by byte instead of decoding them: much
    /// faster, and correct only for keys whose bincode encoding sorts like the key —
    /// byte arrays such as `[u8; 10]` (no length prefix), or big-endian integers stored as
    /// byte arrays.
    ///
    /// # Errors
    /// As [`Sort::new`].
    pub fn new_bytewise(comm: &Communicator, spec: EdgeSpec, opts: Options, splitters: Vec<K>) -> Result<Self> {
        Self::build(comm, spec, opts, splitters, None)
    }

    fn build(comm: &Communicator, spec: EdgeSpec, opts: Options, splitters: Vec<K>, order: Option<crate::spill::KeyOrder>) -> Result<Self> {
        if splitters.len() + 1 != spec.targets.len() {
            return Err(Error::InvalidArgument(format!(
                "sort over {} targets needs {} splitters, got {}",
                spec.targets.len(),
                spec.targets.len() - 1,
                splitters.len()
            )));
        }
        if splitters.windows(2).any(|w| w[0] > w[1]) {
            return Err(Error::InvalidArgument("sort splitters must be ascending".into()));
        }
        let core = Core::new(comm, spec, &opts)?;
        let mut sorters = HashMap::new();
        if opts.mode == Mode::Batch {
            for &t in &core.local_targets {
                sorters.insert(t, SpillSorter::new(opts.spill.clone(), order.clone())?);
            }
        }
        let out = core.local_targets.iter().map(|&t| (t, VecDeque::new())).collect();
        Ok(Sort { core, splitters, sorters, spilled: 0, out, error: None, _v: PhantomData })
    }

    /// Splitters that cut `sample` (any sample of the keys) into `parts` ranges of about
    /// equal size.
    pub fn splitters_from_sample(mut sample: Vec<K>, parts: usize) -> Vec<K> {
        sample.sort();
        let n = sample.len();
        let picks: Vec<usize> = (1..parts.max(1)).map(|i| i * n / parts).filter(|&i| i < n).collect();
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
        self.spilled + self.sorters.values().map(SpillSorter::spilled_bytes).sum::<u64>()
    }

    fn take(&mut self, target: TaskId, incoming: Incoming) -> Result<()> {
        let out = self.out.get_mut(&target).expect("local target");
        match incoming {
            Incoming::Records { payload, .. } => {
                for rec in records(&payload) {
                    let rec = rec?;
                    match self.sorters.get_mut(&target) {
                        Some(sorter) => {
                            let (k, v) = split_keyed(rec)?;
                            sorter.push(k.to_vec(), v.to_vec())?;
                        }
                        None => out.push_back(Event::Data(decode_keyed::<K, V>(rec)?)),
                    }
                }
            }
            Incoming::SourceEnded(_) => {}
            Incoming::Barrier(id) => out.push_back(Event::Barrier(id)),
            Incoming::End => {
                if let Some(sorter) = self.sorters.remove(&target) {
                    self.spilled += sorter.spilled_bytes();
                    for rec in sorter.finish()? {
                        let (k, v) = rec?;
                        out.push_back(Event::Data((decode::<K>(&k)?, decode::<V>(&v)?)));
                    }
                }
                out.push_back(Event::End);
            }
        }
        Ok(())
    }
}

impl<K: Serialize + DeserializeOwned + Ord + 'static, V: Serialize + DeserializeOwned> Operation for Sort<K, V> {
    type In = (K, V);
    type Out = (K, V);

    fn offer(&mut self, source: TaskId, item: (K, V)) -> Result<Offer<(K, V)>> {
        self.core.check_source(source)?;
        let target = self.core.spec.targets[self.splitters.partition_point(|s| *s <= item.0)];
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
