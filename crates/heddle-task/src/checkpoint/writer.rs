//! Writes task states off the executor threads, so processing goes on while a
//! checkpoint is written (the asynchronous part of a snapshot).

use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

use heddle_dataflow::TaskId;

use super::store::{Store, TaskFile};

/// A state written, or why not.
pub(crate) struct Written {
    pub(crate) checkpoint: u64,
    pub(crate) task: TaskId,
    pub(crate) result: Result<u64, String>,
}

/// A thread writing states to the store, in order.
pub(crate) struct Writer {
    jobs: Option<Sender<(u64, TaskId, TaskFile)>>,
    done: Receiver<Written>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    pub(crate) fn start(store: Store) -> std::io::Result<Writer> {
        let (jobs, inbox) = channel::<(u64, TaskId, TaskFile)>();
        let (report, done) = channel();
        let thread =
            std::thread::Builder::new().name("heddle-checkpoint".into()).spawn(move || {
                for (checkpoint, task, (state, inflight)) in inbox {
                    let bytes =
                        state.as_ref().map_or(0, Vec::len) + inflight.as_ref().map_or(0, Vec::len);
                    let started = std::time::Instant::now();
                    let result = store
                        .write_state(checkpoint, task, state.as_deref(), inflight.as_deref())
                        .map(|()| bytes as u64)
                        .map_err(|e| e.to_string());
                    tracing::debug!(
                        checkpoint,
                        task = %task,
                        bytes,
                        ms = started.elapsed().as_secs_f64() * 1e3,
                        "state written"
                    );
                    if report.send(Written { checkpoint, task, result }).is_err() {
                        return;
                    }
                }
            })?;
        Ok(Writer { jobs: Some(jobs), done, thread: Some(thread) })
    }

    /// Queues task `task`'s state (and records in flight) of `checkpoint`.
    pub(crate) fn write(&self, checkpoint: u64, task: TaskId, state: TaskFile) {
        if let Some(jobs) = &self.jobs {
            // The thread only ends when `jobs` is dropped.
            let _ = jobs.send((checkpoint, task, state));
        }
    }

    /// The states written since the last call.
    pub(crate) fn written(&self) -> Vec<Written> {
        self.done.try_iter().collect()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
