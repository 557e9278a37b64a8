//! A job's checkpoints: restoring its tasks before the first pass, and the last
//! checkpoint after it ([`crate::checkpoint`]).

use std::sync::Arc;

use heddle_dataflow::Mode;

use super::barriers::Barriers;
use super::job::{Job, BLOCK_IDS};
use crate::checkpoint::{agree_latest, Checkpointing, Checkpoints, Commit, Store};
use crate::{Error, Result};

impl Job<'_> {
    /// Checks the job can checkpoint, and finds the checkpoint to resume from
    /// (collective): every worker gets the same answer, or the same error.
    pub(crate) fn agree_checkpoints(
        &self,
        config: &Checkpointing,
    ) -> Result<(Store, Option<Commit>)> {
        if self.opts.mode != Mode::Streaming || self.passes > 0 {
            return Err(Error::Graph(
                "checkpoints are taken of streaming jobs run once (Job::run)".into(),
            ));
        }
        if let Some(edge) = self.stateful_edges.first() {
            return Err(Error::Graph(format!(
                "checkpoints cannot cover edge {edge}: its operation keeps state of its own \
                 in streaming mode; keep that state in a task instead (keyed state, windows)"
            )));
        }
        agree_latest(self.comm, &config.dir, &config.job, &self.graph, "stream")
    }

    /// Opens the job's checkpoints and restores every local task from `restored`, the
    /// newest complete checkpoint (before the tasks are prepared).
    pub(crate) fn start_checkpoints(
        &mut self,
        config: &Checkpointing,
        store: Store,
        restored: Option<&Commit>,
    ) -> Result<()> {
        let barriers = Arc::new(Barriers::new(config.alignment_timeout));
        let ck = Checkpoints::start(
            self.comm,
            config,
            self.graph.clone(),
            self.edge_block + BLOCK_IDS - 1,
            self.task_ids.clone(),
            barriers.clone(),
            store,
            restored,
        )?;
        let from = restored.map_or(0, |c| c.checkpoint);
        for (t, &id) in self.tasks.iter_mut().zip(&self.task_ids) {
            if let Some((state, inflight)) =
                restored.map(|c| ck.state(c, id)).transpose()?.flatten()
            {
                t.restore(state.as_deref(), inflight.as_deref())?;
            }
            t.checkpoints(barriers.clone(), from);
        }
        for edge in &mut self.edges {
            edge.checkpoints(barriers.clone());
        }
        if from > 0 {
            tracing::info!("resumed from checkpoint {from} in {}", config.dir.display());
        }
        self.checkpoints = Some(ck);
        Ok(())
    }

    /// After the pass: the last checkpoint, once every worker's tasks have ended, and its
    /// completion told to every task (two-phase sinks commit the rest of their output).
    pub(crate) fn finish_checkpoints(&mut self) -> Result<()> {
        let Some(ck) = self.checkpoints.as_mut() else { return Ok(()) };
        ck.finished();
        let job_abort = self.comm.abort_handle();
        loop {
            self.abort.check()?;
            job_abort.check()?;
            let mut moved = false;
            for t in &mut self.tasks {
                moved |= t.checkpoint_ended(&[])?;
            }
            moved |= ck.poll()?;
            if ck.all_done() {
                for t in &mut self.tasks {
                    t.checkpoint_ended(&[])?;
                }
                // No worker leaves (closing its links) before every worker has heard.
                ck.drain()?;
                self.comm.barrier()?;
                return Ok(());
            }
            if !moved {
                ck.wait();
            }
        }
    }
}
