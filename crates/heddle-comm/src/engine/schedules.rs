//! Non-blocking collectives in progress. Each is a schedule of rounds of requests (built
//! in `collectives::nonblocking`); every pass of the engine advances them, whichever call
//! drives it: their own `wait`/`test`, a blocking collective, a point-to-point call, or the
//! dataflow channels.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;

use super::Engine;
use crate::Result;

/// What a finished schedule hands back (its result buffer, typed by its starter).
pub(crate) type Output = Box<dyn Any + Send>;

/// How far [`Schedule::advance`] got.
pub(crate) enum Advance {
    /// The round under way still waits for requests.
    Waiting,
    /// At least one round finished and the next was posted.
    Moved,
    /// The last round finished: the output.
    Done(Output),
}

/// A collective running as rounds of requests.
pub(crate) trait Schedule: Send {
    /// Moves on as far as finished requests allow: when every request of the current
    /// round has finished, runs the round's local steps (folds, copies) and posts the next
    /// round.
    ///
    /// # Errors
    /// A message of another length than the round expected, or a failed post.
    fn advance(&mut self, engine: &mut Engine) -> Result<Advance>;

    /// The requests of the round under way (for a wait's peer checks and timeout message).
    fn pending(&self) -> Vec<u64>;

    /// The call, e.g. `iallreduce`.
    fn name(&self) -> &'static str;
}

struct Entry {
    id: u64,
    schedule: Box<dyn Schedule>,
    /// Its request was dropped: it runs on (the peers need its messages), its output is
    /// discarded.
    detached: bool,
}

/// The schedules of one engine.
#[derive(Default)]
pub(crate) struct Schedules {
    next: u64,
    running: Vec<Entry>,
    finished: HashMap<u64, Result<Output>>,
}

impl fmt::Debug for Schedules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schedules")
            .field("running", &self.running.len())
            .field("finished", &self.finished.len())
            .finish()
    }
}

impl Engine {
    /// Starts `schedule`: posts its first round and makes one pass. Returns its id.
    ///
    /// # Errors
    /// A failure of the pass.
    pub(crate) fn start_schedule(&mut self, schedule: Box<dyn Schedule>) -> Result<u64> {
        self.schedules.next += 1;
        let id = self.schedules.next;
        self.schedules.running.push(Entry { id, schedule, detached: false });
        self.pass()?;
        Ok(id)
    }

    /// Advances every running schedule (see [`Schedule::advance`]); returns whether one
    /// moved. A schedule's error is kept for its request (and aborts the job when this
    /// rank can no longer keep in step).
    pub(super) fn advance_schedules(&mut self) -> bool {
        if self.schedules.running.is_empty() {
            return false;
        }
        let mut running = std::mem::take(&mut self.schedules.running);
        let mut moved = false;
        let mut i = 0;
        while i < running.len() {
            // A panicking reduction must not unwind through the engine with the other
            // schedules taken out of it: it ends its own schedule only.
            let schedule = &mut running[i].schedule;
            let step =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| schedule.advance(self)));
            let step = step.unwrap_or_else(|_| {
                for id in running[i].schedule.pending() {
                    self.detach(id);
                }
                Err(crate::Error::InvalidArgument(format!(
                    "{}: the reduction operation panicked",
                    running[i].schedule.name()
                )))
            });
            let outcome = match step {
                Ok(Advance::Waiting) => {
                    i += 1;
                    continue;
                }
                Ok(Advance::Moved) => {
                    moved = true;
                    i += 1;
                    continue;
                }
                Ok(Advance::Done(out)) => Ok(out),
                Err(e) => Err(self.failed(e)),
            };
            let entry = running.remove(i);
            if !entry.detached {
                self.schedules.finished.insert(entry.id, outcome);
            }
            moved = true;
        }
        running.append(&mut self.schedules.running);
        self.schedules.running = running;
        moved
    }

    /// Takes the output of schedule `id` if it has finished.
    pub(crate) fn take_schedule(&mut self, id: u64) -> Option<Result<Output>> {
        self.schedules.finished.remove(&id)
    }

    /// Lets go of schedule `id`: it runs on, and its output is dropped.
    pub(crate) fn detach_schedule(&mut self, id: u64) {
        if self.schedules.finished.remove(&id).is_some() {
            return;
        }
        if let Some(e) = self.schedules.running.iter_mut().find(|e| e.id == id) {
            e.detached = true;
        }
    }

    /// The call and the pending requests of running schedule `id`.
    pub(crate) fn schedule_state(&self, id: u64) -> Option<(&'static str, Vec<u64>)> {
        let e = self.schedules.running.iter().find(|e| e.id == id)?;
        Some((e.schedule.name(), e.schedule.pending()))
    }
}
