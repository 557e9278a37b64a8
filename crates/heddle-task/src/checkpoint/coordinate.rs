//! Rank 0's part of a job's checkpoints: triggers at the interval, and completes (commits)
//! a checkpoint once every worker acknowledged it, or aborts it when one declined.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use super::super::protocol::Message;
use super::super::store::Commit;
use super::super::CheckpointStats;
use super::{Checkpoints, KEEP};
use crate::Result;
use heddle_dataflow::TaskId;

/// A checkpoint's progress at the coordinator.
#[derive(Debug)]
pub(super) struct InFlight {
    pub(super) id: u64,
    pub(super) last: bool,
    pub(super) started: Instant,
    pub(super) acks: HashSet<usize>,
    pub(super) bytes: u64,
    pub(super) states: Vec<TaskId>,
    pub(super) unaligned: usize,
    pub(super) declined: Option<String>,
}

/// What only rank 0 keeps.
#[derive(Debug)]
pub(super) struct Coordinator {
    pub(super) interval: Option<Duration>,
    pub(super) next_due: Instant,
    pub(super) next_id: u64,
    pub(super) in_flight: Option<InFlight>,
    pub(super) finished: HashSet<usize>,
    pub(super) last_triggered: bool,
    pub(super) stats: Vec<CheckpointStats>,
}

impl Checkpoints {
    /// Rank 0: completes the checkpoint in flight once every worker answered, and
    /// triggers the next one when due.
    pub(super) fn coordinate(&mut self) -> Result<bool> {
        let workers = self.world.len();
        let Some(c) = &mut self.coordinator else { return Ok(false) };
        let mut to_all = Vec::new();
        if c.in_flight.as_ref().is_some_and(|f| f.acks.len() >= workers) {
            let f = c.in_flight.take().expect("checked");
            let duration_ms = f.started.elapsed().as_secs_f64() * 1e3;
            let mut states = f.states;
            states.sort_unstable();
            let commit = Commit {
                job: self.job.clone(),
                graph: self.graph.clone(),
                checkpoint: f.id,
                last: f.last,
                states,
                bytes: f.bytes,
                duration_ms,
                unaligned_tasks: f.unaligned,
            };
            let outcome = match f.declined {
                Some(reason) => Err(reason),
                None => self.store.commit(&commit).map_err(|e| e.to_string()),
            };
            match outcome {
                Ok(()) => {
                    tracing::debug!(checkpoint = f.id, duration_ms, "checkpoint complete");
                    self.store.append_history(&commit);
                    self.store.prune(&[], &|_| false, Some(KEEP));
                    heddle_comm::metrics::checkpoint(f.started.elapsed(), f.bytes);
                    c.stats.push(CheckpointStats {
                        checkpoint: f.id,
                        duration_ms,
                        bytes: f.bytes,
                        last: f.last,
                        unaligned_tasks: f.unaligned,
                    });
                    to_all.push(Message::Complete { id: f.id });
                }
                Err(reason) => to_all.push(Message::Abort { id: f.id, reason }),
            }
        }
        if c.in_flight.is_none() {
            let now = Instant::now();
            let all_finished = c.finished.len() >= workers;
            // Workers whose tasks have ended still take part (their tasks snapshot their
            // final states at once), so checkpoints go on until every worker has ended.
            let due = c.interval.is_some() && now >= c.next_due && !c.last_triggered;
            if (all_finished && !c.last_triggered) || due {
                let id = c.next_id;
                c.next_id += 1;
                c.last_triggered |= all_finished;
                if let Some(i) = c.interval {
                    c.next_due = now + i;
                }
                c.in_flight = Some(InFlight {
                    id,
                    last: all_finished,
                    started: now,
                    acks: HashSet::new(),
                    bytes: 0,
                    states: Vec::new(),
                    unaligned: 0,
                    declined: None,
                });
                to_all.push(Message::Trigger { id, last: all_finished });
            }
        }
        let moved = !to_all.is_empty();
        for m in to_all {
            for r in 0..workers {
                self.send(r, m.clone());
            }
        }
        Ok(moved)
    }
}
