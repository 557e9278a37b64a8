//! Broadcast through the root's shared-memory area (Squirrel's channel): the root copies
//! each chunk of the buffer into a slot of its area once and tells every rank which slot
//! holds it; each rank copies it out and acknowledges, which frees the slot for the chunk
//! `AREA_SLOTS` later. A tree copies the whole buffer into and out of a ring at every hop;
//! here each rank's copy is its only one, and the root's is shared by all.
//!
//! The messages are small (a slot number, an acknowledgement) and go through the ordinary
//! links, so the engine's matching, timeouts and failure detection apply, and their ring
//! atomics order the copies. Every member must map the root's area: the caller checks
//! (`Areas::cover`), and all members see the same answer.
//!
//! Cost = α·(2 + ⌈n / slot⌉) + n·β (the root's copy) + n·β (each rank's, in parallel)

use crate::collectives::Step;
use crate::engine::Sink;
use crate::transport::bcast_area::{AREA_SLOTS, AREA_SLOT_BYTES};
use crate::{Error, Result};

pub(crate) fn run(s: &mut Step<'_>, buf: &mut [u8], root: usize) -> Result<()> {
    let Some(area) = s.areas.get(s.members[root]).cloned() else {
        return Err(Error::Config(format!(
            "the shm_channel broadcast needs rank {root}'s shared memory, which this rank \
             does not map: force another algorithm (HEDDLE_ALGORITHMS)"
        )));
    };
    let chunks = buf.len().div_ceil(AREA_SLOT_BYTES);
    let depth = AREA_SLOTS.min(chunks);
    if s.rank == root {
        let readers: Vec<usize> = (0..s.size()).filter(|&r| r != root).collect();
        for (k, part) in buf.chunks(AREA_SLOT_BYTES).enumerate() {
            if k >= depth {
                acknowledged(s, &readers)?;
            }
            let slot = k % depth;
            area.write(slot, part);
            let said = (slot as u32).to_le_bytes();
            let sends: Vec<(usize, &[u8])> = readers.iter().map(|&r| (r, &said[..])).collect();
            s.exchange(&sends, Vec::new())?;
        }
        for _ in 0..depth {
            acknowledged(s, &readers)?;
        }
        return Ok(());
    }
    for (k, part) in buf.chunks_mut(AREA_SLOT_BYTES).enumerate() {
        let mut said = [0u8; 4];
        s.recv(root, Sink::Copy(&mut said))?;
        let slot = u32::from_le_bytes(said) as usize;
        if slot != k % depth {
            return Err(Error::Config(format!(
                "shm_channel broadcast: rank {root} named slot {slot} for chunk {k} of \
                 {chunks}, expected {}: do all ranks run the same Heddle?",
                k % depth
            )));
        }
        area.read(slot, part);
        s.send(root, &[1])?;
    }
    Ok(())
}

/// Waits for every reader's acknowledgement of the oldest chunk not yet acknowledged.
fn acknowledged(s: &mut Step<'_>, readers: &[usize]) -> Result<()> {
    let mut acks = vec![[0u8; 1]; readers.len()];
    let recvs = readers.iter().zip(acks.iter_mut()).map(|(&r, a)| (r, Sink::Copy(a))).collect();
    s.exchange(&[], recvs)
}
