//! Writes task states off the executor threads, so processing goes on while a
//! checkpoint is written (the asynchronous part of a snapshot). Each state is written as
//! it comes; once every task of the worker has handed in its snapshot of a checkpoint
//! ([`Writer::seal`]), the worker's files of it are synced and published together, so the
//! directory is synced once a checkpoint rather than once a task.

use std::collections::BTreeMap;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Instant;

use heddle_comm::Waker;
use heddle_dataflow::TaskId;

use super::store::{publish, Staged, Store, TaskFile};

/// A state written, or why not.
pub(crate) struct Written {
    pub(crate) checkpoint: u64,
    pub(crate) task: TaskId,
    pub(crate) result: Result<u64, String>,
}

enum Job {
    State(u64, TaskId, TaskFile),
    Seal(u64),
}

/// A state staged: its task, its size, and its file or why it could not be written.
type Pending = (TaskId, u64, Result<Staged, String>);

/// A thread writing states to the store, in order.
pub(crate) struct Writer {
    jobs: Option<Sender<Job>>,
    done: Receiver<Written>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    /// Starts the thread; `waker` wakes the worker's sleeping executors when states are
    /// written (their checkpoint coordination then acknowledges at once).
    pub(crate) fn start(store: Store, waker: Option<Waker>) -> std::io::Result<Writer> {
        let (jobs, inbox) = channel::<Job>();
        let (report, done) = channel();
        let thread = std::thread::Builder::new()
            .name("heddle-checkpoint".into())
            .spawn(move || write_states(&store, &inbox, &report, waker.as_ref()))?;
        Ok(Writer { jobs: Some(jobs), done, thread: Some(thread) })
    }

    /// Queues task `task`'s state (and records in flight) of `checkpoint`.
    pub(crate) fn write(&self, checkpoint: u64, task: TaskId, state: TaskFile) {
        self.send(Job::State(checkpoint, task, state));
    }

    /// Every state of `checkpoint` this worker keeps has been queued: sync and publish
    /// them, then report them written.
    pub(crate) fn seal(&self, checkpoint: u64) {
        self.send(Job::Seal(checkpoint));
    }

    fn send(&self, job: Job) {
        if let Some(jobs) = &self.jobs {
            // The thread only ends when `jobs` is dropped.
            let _ = jobs.send(job);
        }
    }

    /// The states written since the last call.
    pub(crate) fn written(&self) -> Vec<Written> {
        self.done.try_iter().collect()
    }
}

/// The writer thread: stages each state as it comes, publishes a checkpoint's on its seal.
/// States never sealed (an attempt aborted) leave no file behind.
fn write_states(
    store: &Store,
    inbox: &Receiver<Job>,
    report: &Sender<Written>,
    waker: Option<&Waker>,
) {
    let mut pending: BTreeMap<u64, Vec<Pending>> = BTreeMap::new();
    for job in inbox {
        match job {
            Job::State(checkpoint, task, (state, inflight)) => {
                let bytes =
                    state.as_ref().map_or(0, Vec::len) + inflight.as_ref().map_or(0, Vec::len);
                let started = Instant::now();
                let staged = store
                    .stage_state(checkpoint, task, state.as_deref(), inflight.as_deref())
                    .map_err(|e| e.to_string());
                tracing::debug!(
                    checkpoint,
                    task = %task,
                    bytes,
                    ms = started.elapsed().as_secs_f64() * 1e3,
                    "state staged"
                );
                pending.entry(checkpoint).or_default().push((task, bytes as u64, staged));
            }
            Job::Seal(checkpoint) => {
                let started = Instant::now();
                let (mut results, mut files) = (Vec::new(), Vec::new());
                for (task, bytes, staged) in pending.remove(&checkpoint).unwrap_or_default() {
                    match staged {
                        Ok(file) => {
                            files.push(file);
                            results.push((task, Ok(bytes)));
                        }
                        Err(e) => results.push((task, Err(e))),
                    }
                }
                if let Err(e) = publish(files) {
                    for (_, r) in &mut results {
                        if r.is_ok() {
                            *r = Err(e.to_string());
                        }
                    }
                }
                tracing::debug!(
                    checkpoint,
                    states = results.len(),
                    ms = started.elapsed().as_secs_f64() * 1e3,
                    "states published"
                );
                for (task, result) in results {
                    if report.send(Written { checkpoint, task, result }).is_err() {
                        return;
                    }
                }
                if let Some(w) = waker {
                    w.wake();
                }
            }
        }
    }
    for (_, _, staged) in pending.into_values().flatten() {
        if let Ok(s) = staged {
            s.discard();
        }
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
