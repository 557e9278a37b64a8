//! Task-graph iterations that checkpoint: every k passes each worker writes its tasks'
//! states (between passes the graph is quiet, so the states form a consistent cut), and
//! rank 0 commits once every worker has written; a job started again resumes after the
//! newest complete checkpoint.

use heddle_comm::Op;

use super::job::Job;
use crate::checkpoint::{agree_latest, Commit, LoopCheckpointing, Store};
use crate::{Error, Result};

/// Complete loop checkpoints kept.
const KEEP: usize = 2;

/// The loop counters (outermost first) of the pass with index `pass` of `counts`.
fn counters_of(mut pass: u64, counts: &[u64]) -> Vec<u64> {
    let mut at = vec![0u64; counts.len()];
    for (a, &c) in at.iter_mut().zip(counts).rev() {
        *a = pass % c;
        pass /= c;
    }
    at
}

impl Job<'_> {
    /// As [`Job::iterate`], checkpointing every task's state ([`crate::Compute::snapshot`])
    /// every `config.every` passes, and resuming after the newest complete checkpoint in
    /// `config.dir` if there is one (collective; before any pass). Returns the passes the
    /// job resumed after (0: it started from the beginning).
    ///
    /// # Errors
    /// As [`Job::iterate`]; [`Error::Checkpoint`] for a checkpoint that cannot be resumed
    /// from (damaged, of another job or graph); [`Error::Graph`] after a pass ran or for
    /// `every` 0. A checkpoint that cannot be written is reported and skipped.
    pub fn iterate_checkpointed(
        &mut self,
        counts: &[u64],
        config: &LoopCheckpointing,
    ) -> Result<u64> {
        if self.prepared || self.passes > 0 || config.every == 0 {
            return Err(Error::Graph(
                "iterate_checkpointed needs a job that has run no pass, and every >= 1".into(),
            ));
        }
        // Every worker gets rank 0's answer (or its error) alike: nothing to abort yet.
        let (store, restored) =
            agree_latest(self.comm, &config.dir, &config.job, &self.graph, "loop")?;
        let started = self.resume_loops(&store, restored.as_ref());
        if let Err(e) = &started {
            self.abort_job(e);
        }
        let from = started?;
        let total: u64 = counts.iter().product();
        for pass in from..total {
            self.pass(&counters_of(pass, counts))?;
            let done = pass + 1;
            if done % config.every == 0 && done < total {
                let taken = self.loop_checkpoint(&store, done);
                if let Err(e) = &taken {
                    self.abort_job(e);
                }
                taken?;
            }
        }
        Ok(from)
    }

    /// Restores every local task from loop checkpoint `restored`, if any; returns the
    /// passes it was taken after.
    fn resume_loops(&mut self, store: &Store, restored: Option<&Commit>) -> Result<u64> {
        let from = restored.map_or(0, |c| c.checkpoint);
        if let Some(commit) = restored {
            for (t, &id) in self.tasks.iter_mut().zip(&self.task_ids) {
                if commit.states.contains(&id) {
                    let (state, inflight) = store.read_state(commit.checkpoint, id)?;
                    t.restore(state.as_deref(), inflight.as_deref())?;
                }
            }
        }
        // States of checkpoints after it never completed: an earlier attempt's.
        store.prune(&self.task_ids, &|id| id > from, None);
        Ok(from)
    }

    /// Every worker writes its tasks' states after `passes` passes; rank 0 commits once
    /// all have (collective).
    fn loop_checkpoint(&mut self, store: &Store, passes: u64) -> Result<()> {
        let started = std::time::Instant::now();
        let (mut states, mut bytes, mut error) = (Vec::new(), 0u64, None);
        for (t, &id) in self.tasks.iter_mut().zip(&self.task_ids) {
            let Some(state) = t.snapshot_state(passes)? else { continue };
            match store.write_state(passes, id, Some(&state), None) {
                Ok(()) => {
                    states.push(id);
                    bytes += state.len() as u64;
                }
                Err(e) => {
                    error.get_or_insert(e.to_string());
                }
            }
        }
        let mut ok = [u8::from(error.is_none())];
        self.comm.allreduce(&mut ok, Op::Min)?;
        let mut totals = [bytes];
        self.comm.allreduce(&mut totals, Op::Sum)?;
        let all = self.comm.gather_object(&states, 0)?;
        let mut committed = ok[0] == 1;
        let mut oldest = 0;
        if let (true, Some(all)) = (committed, all) {
            let mut states: Vec<_> = all.into_iter().flatten().collect();
            states.sort_unstable();
            let (job, graph) = store.names();
            let commit = Commit {
                job,
                graph,
                checkpoint: passes,
                last: false,
                states,
                bytes: totals[0],
                duration_ms: started.elapsed().as_secs_f64() * 1e3,
                unaligned_tasks: 0,
            };
            let written = store.commit(&commit);
            if let Err(e) = &written {
                error.get_or_insert(e.to_string());
            }
            committed = written.is_ok();
            if committed {
                store.append_history(&commit);
                store.prune(&[], &|_| false, Some(KEEP));
                oldest = store.oldest_commit();
            }
        }
        // Every worker learns whether rank 0 committed, and the oldest checkpoint kept.
        let mut done = [u64::from(committed), oldest];
        self.comm.broadcast(&mut done, 0)?;
        if done[0] == 1 {
            store.prune(&self.task_ids, &|id| id < done[1], None);
        } else {
            store.prune(&self.task_ids, &|id| id == passes, None);
            if let Some(e) = error {
                eprintln!("heddle: warning: the checkpoint after pass {passes} failed: {e}");
            }
        }
        Ok(())
    }
}
