//! The messages between the root and its workers, and the loop a worker serves in.
//!
//! The root sends a worker a batch of [`Job`]s with tag [`TASK`]; the worker runs them in
//! order and answers with one message of their [`Outcome`]s, tag [`RESULT`]. Tag [`STOP`]
//! ends the loop. Every message is `bincode`.

use std::panic::{catch_unwind, AssertUnwindSafe};

use serde::{Deserialize, Serialize};

use super::{Error, Registry};
use crate::comm::{Error as CommError, Request, Status};
use crate::Communicator;

pub(super) const TASK: u32 = 1;
pub(super) const STOP: u32 = 2;
pub(super) const RESULT: u32 = 3;

/// One submission: a registered function and one input, or a chunk of inputs (`map`).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Job {
    pub(super) id: u64,
    pub(super) task: u32,
    pub(super) inputs: Vec<Vec<u8>>,
}

/// What a job gave: an output per input, or the panic message of the first that failed.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Outcome {
    pub(super) id: u64,
    pub(super) outputs: Result<Vec<Vec<u8>>, String>,
}

/// Waits for `req` however long it takes: an idle spell longer than the communicator's
/// timeout is not an error here (a task may run for long); a lost peer still is.
pub(super) fn wait_long<B>(req: &mut Request<B>) -> Result<Option<Status>, CommError> {
    loop {
        match req.wait() {
            Err(CommError::Timeout { .. }) => continue,
            other => return other,
        }
    }
}

/// Runs `job`'s inputs through its function, a panic becoming the job's error.
pub(super) fn run(registry: &Registry, job: &Job) -> Result<Vec<Vec<u8>>, String> {
    let Some((_, f)) = registry.fns.get(job.task as usize) else {
        return Err(format!("no task number {} is registered", job.task));
    };
    job.inputs
        .iter()
        .map(|input| match catch_unwind(AssertUnwindSafe(|| f(input))) {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(e)) => Err(e.to_string()),
            Err(panic) => Err(panic_message(panic.as_ref())),
        })
        .collect()
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// Serves `root`'s tasks until it says stop.
///
/// # Errors
/// [`Error::Comm`] when the root is lost or the job is aborted; an undecodable batch.
pub(super) fn serve(comm: &Communicator, root: usize, registry: &Registry) -> Result<(), Error> {
    // The previous reply: it leaves while the next batch runs (the root takes it only when
    // it calls into its executor, which may be long after).
    let mut last_reply: Option<Request> = None;
    loop {
        let mut req = comm.irecv_bytes(Some(root), None)?;
        let status = wait_long(&mut req)?;
        if status.is_some_and(|s| s.tag == STOP) {
            if let Some(mut r) = last_reply.take() {
                wait_long(&mut r)?;
            }
            return Ok(());
        }
        let bytes = req.take_bytes().unwrap_or_default();
        let batch: Vec<Job> = bincode::deserialize(&bytes)
            .map_err(|source| Error::Codec { task: "a batch from the root".into(), source })?;
        let outcomes: Vec<Outcome> =
            batch.iter().map(|job| Outcome { id: job.id, outputs: run(registry, job) }).collect();
        let reply = bincode::serialize(&outcomes)
            .map_err(|source| Error::Codec { task: "the results".into(), source })?;
        if let Some(mut r) = last_reply.take() {
            wait_long(&mut r)?;
        }
        last_reply = Some(comm.isend_bytes(reply, root, RESULT)?);
    }
}
