//! The root's side: an [`Executor`] that queues submissions, hands them to the least
//! loaded workers (up to [`IN_FLIGHT`] each, or their share of a long queue, so small tasks
//! travel hundreds to a message), and completes [`Future`]s as results arrive. It moves
//! only when the root calls it (`submit`, `wait`, `map`): no thread of its own.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::worker::{self, wait_long, Job, Outcome, RESULT, STOP, TASK};
use super::{Error, Registry, TaskFn};
use crate::comm::Request;
use crate::Communicator;

/// Tasks a worker may hold at once: enough to hide a round trip, few enough to balance.
const IN_FLIGHT: usize = 16;
/// With a long queue a worker may hold its share of it, up to this many.
const IN_FLIGHT_QUEUED: usize = 4096;

/// Submits tasks to the workers of [`super::run`] (mpi4py.futures' `CommExecutor` on the
/// root).
#[derive(Debug)]
pub struct Executor<'c> {
    comm: &'c Communicator,
    registry: &'c Registry,
    state: RefCell<State>,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    queue: VecDeque<Job>,
    workers: Vec<usize>,
    /// Jobs each rank holds.
    inflight: Vec<usize>,
    /// Where each job in flight runs, and its function.
    running: HashMap<u64, (usize, u32)>,
    /// Finished jobs whose future has not taken the result.
    done: HashMap<u64, Result<Vec<Vec<u8>>, Error>>,
    /// The receive of the next result message.
    recv: Option<Request>,
    sends: Vec<Request>,
}

/// The result of a submitted task, once it has one.
#[derive(Debug)]
#[must_use = "a future does nothing unless waited for"]
pub struct Future<'e, O> {
    executor: &'e Executor<'e>,
    id: u64,
    task: u32,
    _output: PhantomData<fn() -> O>,
}

impl<O: DeserializeOwned> Future<'_, O> {
    /// Waits for the task and returns its output.
    ///
    /// # Errors
    /// [`Error::Task`] when its function panicked on the worker; [`Error::Comm`] when the
    /// worker was lost.
    pub fn wait(self) -> Result<O, Error> {
        let mut outputs = self.executor.wait_id(self.id)?;
        let bytes = outputs.pop().unwrap_or_default();
        let name = self.executor.registry.name(self.task).to_string();
        bincode::deserialize(&bytes).map_err(|source| Error::Codec { task: name, source })
    }

    /// Whether the result has arrived (moves the executor once, without blocking).
    ///
    /// # Errors
    /// As [`Future::wait`].
    pub fn is_done(&self) -> Result<bool, Error> {
        self.executor.poll()?;
        Ok(self.executor.state.borrow().done.contains_key(&self.id))
    }
}

impl<'c> Executor<'c> {
    pub(super) fn new(comm: &'c Communicator, root: usize, registry: &'c Registry) -> Self {
        let workers: Vec<usize> = (0..comm.size()).filter(|&r| r != root).collect();
        let state = State { inflight: vec![0; comm.size()], workers, ..State::default() };
        Executor { comm, registry, state: RefCell::new(state) }
    }

    /// The ranks that run tasks (none in a world of one: the root runs them in `wait`).
    pub fn workers(&self) -> usize {
        self.state.borrow().workers.len()
    }

    /// Schedules `task(input)` on a worker.
    ///
    /// # Errors
    /// [`Error::Codec`] when `input` cannot be encoded; [`Error::Comm`] when a worker is
    /// lost.
    pub fn submit<I: Serialize, O: DeserializeOwned>(
        &self,
        task: TaskFn<I, O>,
        input: I,
    ) -> Result<Future<'_, O>, Error> {
        let id = self.enqueue(task.index, vec![self.encode(task.index, &input)?])?;
        Ok(Future { executor: self, id, task: task.index, _output: PhantomData })
    }

    /// `task` over every input, in order (`Executor.map`): `chunksize` inputs travel and
    /// run as one job.
    ///
    /// # Errors
    /// As [`Executor::submit`] and [`Future::wait`]; [`Error::Invalid`] for a zero
    /// `chunksize`.
    pub fn map<I: Serialize, O: DeserializeOwned>(
        &self,
        task: TaskFn<I, O>,
        inputs: impl IntoIterator<Item = I>,
        chunksize: usize,
    ) -> Result<Vec<O>, Error> {
        if chunksize == 0 {
            return Err(Error::Invalid("map: chunksize must be at least 1".into()));
        }
        let mut ids = Vec::new();
        let mut chunk = Vec::with_capacity(chunksize);
        for input in inputs {
            chunk.push(self.encode(task.index, &input)?);
            if chunk.len() == chunksize {
                ids.push(self.enqueue(task.index, std::mem::take(&mut chunk))?);
            }
        }
        if !chunk.is_empty() {
            ids.push(self.enqueue(task.index, chunk)?);
        }
        let name = self.registry.name(task.index);
        let mut out = Vec::new();
        for id in ids {
            for bytes in self.wait_id(id)? {
                let codec = |source| Error::Codec { task: name.to_string(), source };
                out.push(bincode::deserialize(&bytes).map_err(codec)?);
            }
        }
        Ok(out)
    }

    fn encode<I: Serialize>(&self, task: u32, input: &I) -> Result<Vec<u8>, Error> {
        let name = self.registry.name(task).to_string();
        bincode::serialize(input).map_err(|source| Error::Codec { task: name, source })
    }

    fn enqueue(&self, task: u32, inputs: Vec<Vec<u8>>) -> Result<u64, Error> {
        let mut st = self.state.borrow_mut();
        st.next_id += 1;
        let id = st.next_id;
        st.queue.push_back(Job { id, task, inputs });
        self.dispatch(&mut st)?;
        if !st.queue.is_empty() && !st.workers.is_empty() {
            self.pump(&mut st, false)?; // take results that came meanwhile, and refill
        }
        Ok(id)
    }

    /// Hands queued jobs to the least loaded workers while they have room.
    fn dispatch(&self, st: &mut State) -> Result<(), Error> {
        while !st.queue.is_empty() {
            let Some(&w) = st.workers.iter().min_by_key(|&&w| st.inflight[w]) else { break };
            let share = st.queue.len() / st.workers.len();
            let room = IN_FLIGHT.max(share.min(IN_FLIGHT_QUEUED)).saturating_sub(st.inflight[w]);
            if room == 0 {
                break;
            }
            let batch: Vec<Job> = st.queue.drain(..room.min(st.queue.len())).collect();
            for job in &batch {
                st.running.insert(job.id, (w, job.task));
            }
            st.inflight[w] += batch.len();
            let bytes = bincode::serialize(&batch)
                .map_err(|source| Error::Codec { task: "a batch".into(), source })?;
            st.sends.push(self.comm.isend_bytes(bytes, w, TASK)?);
        }
        st.sends.retain_mut(|r| !r.is_done());
        Ok(())
    }

    /// Takes the next result message (blocking, or only if one has come); returns whether
    /// one was taken.
    fn pump(&self, st: &mut State, block: bool) -> Result<bool, Error> {
        if st.recv.is_none() {
            st.recv = Some(self.comm.irecv_bytes(None, Some(RESULT))?);
        }
        let Some(req) = st.recv.as_mut() else { return Ok(false) };
        let arrived = if block { wait_long(req)?.is_some() } else { req.test()? };
        if !arrived {
            return Ok(false);
        }
        let Some(mut req) = st.recv.take() else { return Ok(false) };
        let source = req.status().map_or(0, |s| s.source);
        let bytes = req.take_bytes().unwrap_or_default();
        let outcomes: Vec<Outcome> = bincode::deserialize(&bytes)
            .map_err(|source| Error::Codec { task: "results".into(), source })?;
        for o in outcomes {
            st.inflight[source] = st.inflight[source].saturating_sub(1);
            let (rank, task) = st.running.remove(&o.id).unwrap_or((source, 0));
            let result = o.outputs.map_err(|message| Error::Task {
                task: self.registry.name(task).to_string(),
                id: o.id,
                rank,
                message,
            });
            st.done.insert(o.id, result);
        }
        self.dispatch(st)?;
        Ok(true)
    }

    /// Moves once without blocking.
    fn poll(&self) -> Result<(), Error> {
        let mut st = self.state.borrow_mut();
        if !st.workers.is_empty() && !st.running.is_empty() {
            self.pump(&mut st, false)?;
        }
        Ok(())
    }

    /// Waits for job `id`; returns its outputs.
    fn wait_id(&self, id: u64) -> Result<Vec<Vec<u8>>, Error> {
        let mut st = self.state.borrow_mut();
        loop {
            if let Some(result) = st.done.remove(&id) {
                return result;
            }
            if st.workers.is_empty() {
                // A world of one: the root runs its queue itself, in order.
                let Some(job) = st.queue.pop_front() else {
                    return Err(Error::Invalid(format!("no task with id {id} is pending")));
                };
                let outputs = worker::run(self.registry, &job).map_err(|message| Error::Task {
                    task: self.registry.name(job.task).to_string(),
                    id: job.id,
                    rank: self.comm.rank(),
                    message,
                });
                st.done.insert(job.id, outputs);
                continue;
            }
            if st.running.is_empty() && st.queue.is_empty() {
                return Err(Error::Invalid(format!("no task with id {id} is pending")));
            }
            self.pump(&mut st, true)?;
        }
    }

    /// Waits for every job, then tells the workers to stop.
    pub(super) fn shutdown(&self) -> Result<(), Error> {
        let mut st = self.state.borrow_mut();
        while !st.running.is_empty() || !st.queue.is_empty() {
            if st.workers.is_empty() {
                st.queue.clear();
                break;
            }
            self.pump(&mut st, true)?;
        }
        for &w in &st.workers {
            self.comm.send_bytes(&[], w, STOP)?;
        }
        for mut r in st.sends.drain(..) {
            wait_long(&mut r)?;
        }
        Ok(())
    }
}
