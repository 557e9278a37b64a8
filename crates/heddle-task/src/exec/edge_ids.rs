//! The dataflow edge ids of task jobs.

use std::sync::atomic::{AtomicU32, Ordering};

use heddle_comm::Communicator;

use crate::Result;

/// Dataflow edge ids the task system uses, away from the small ids programs pick for
/// operations of their own: each job takes a block of them (chosen by rank 0 and
/// broadcast, so workers agree even when they share a process), and its passes cycle
/// through the block but its last id, the control edge of its checkpoints.
static NEXT_BLOCK: AtomicU32 = AtomicU32::new(0);
const EDGE_IDS_START: u32 = 0x2000_0000;
pub(crate) const BLOCK_IDS: u32 = 1 << 20;
const BLOCKS: u32 = (0x3fff_0000 - EDGE_IDS_START) / BLOCK_IDS;

/// The first edge id of a new job's block (collective).
pub(crate) fn job_block(comm: &Communicator) -> Result<u32> {
    let mut block = [0u32];
    if comm.rank() == 0 {
        block[0] = NEXT_BLOCK.fetch_add(1, Ordering::Relaxed) % BLOCKS;
    }
    comm.broadcast(&mut block, 0)?;
    Ok(EDGE_IDS_START + block[0] * BLOCK_IDS)
}
