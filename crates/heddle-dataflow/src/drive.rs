//! Running an operation to its end on one worker when all local input is at hand.

use std::collections::BTreeMap;

use super::{Event, Offer, Operation, TaskId};
use crate::Result;

/// Offers every local source's records (retrying under back-pressure), finishes the
/// sources, and collects every local target's events until all targets have ended.
/// Every worker of the operation calls it with its own sources' input.
///
/// # Errors
/// Whatever the operation's calls return.
pub fn drive<O: Operation>(
    op: &mut O,
    inputs: Vec<(TaskId, Vec<O::In>)>,
) -> Result<BTreeMap<TaskId, Vec<Event<O::Out>>>> {
    let mut out: BTreeMap<TaskId, Vec<Event<O::Out>>> =
        op.local_targets().into_iter().map(|t| (t, Vec::new())).collect();
    let mut queues: Vec<(TaskId, std::collections::VecDeque<O::In>, bool)> =
        inputs.into_iter().map(|(s, v)| (s, v.into(), false)).collect();
    loop {
        let mut moved = false;
        for (source, queue, finished) in queues.iter_mut() {
            while let Some(item) = queue.pop_front() {
                match op.offer(*source, item)? {
                    Offer::Accepted => moved = true,
                    Offer::Full(item) => {
                        queue.push_front(item);
                        break;
                    }
                }
            }
            if queue.is_empty() && !*finished {
                op.finish(*source)?;
                *finished = true;
                moved = true;
            }
        }
        moved |= op.progress()?;
        for (&t, events) in out.iter_mut() {
            while let Some(e) = op.poll(t) {
                events.push(e);
                moved = true;
            }
        }
        if op.is_done() && queues.iter().all(|(_, q, f)| q.is_empty() && *f) {
            return Ok(out);
        }
        if !moved {
            op.wait()?;
        }
    }
}
