//! Broadcast batches through the workers' shared slots (`transport/edge_slots.rs`), as an
//! edge's handle offers them: a batch written once by its sender and copied out by each
//! same-host reader, its reference sent through the edge in its stead.

use crate::channels::{EdgeLink, DATAFLOW_EDGE};
use crate::transport::edge_slots::SharedRef;
use crate::{Error, Result};

impl EdgeLink {
    /// Whether `worker` (world rank) maps this worker's shared slots: same host, shared
    /// memory (or a world inside one process).
    pub fn shares_with(&self, worker: usize) -> bool {
        worker != self.rank
            && self.shared.areas.get(worker).is_some()
            && self.shared.areas.get(self.rank).is_some()
    }

    /// Writes `data` once into this worker's shared slots for `readers` same-host workers
    /// to copy out ([`EdgeLink::take_shared`]); send each of them the reference
    /// ([`SharedRef::to_bytes`]) instead of the data. `None` when the data is larger than
    /// a slot, every slot is held, or this worker has no shared slots: send it the
    /// ordinary way.
    pub fn share(&self, data: &[u8], readers: u32) -> Option<SharedRef> {
        self.shared.areas.get(self.rank)?.edge_slots().share(data, readers)
    }

    /// The message `worker` shared as `r`, copied out of its slot (dropping this worker's
    /// hold on it).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the slot no longer holds that message or `worker`'s
    /// slots are not mapped here.
    pub fn take_shared(&self, worker: usize, r: SharedRef) -> Result<Vec<u8>> {
        self.shared.areas.get(worker).and_then(|a| a.edge_slots().take(r)).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "edge {}: worker {worker}'s shared slot {r:?} is not there to read",
                self.edge & !DATAFLOW_EDGE
            ))
        })
    }

    /// Drops a hold on what this worker shared as `r` that will not be sent to its reader.
    pub fn release_shared(&self, r: SharedRef) {
        if let Some(a) = self.shared.areas.get(self.rank) {
            a.edge_slots().release(r);
        }
    }

    /// This worker's shared slots held now.
    pub fn shared_held(&self) -> usize {
        self.shared.areas.get(self.rank).map_or(0, |a| a.edge_slots().held())
    }
}
