//! Futures over the ranks of a job, as `mpi4py.futures` and Python's
//! `concurrent.futures` give them: one rank (the root) submits tasks and waits for their
//! results; the other ranks run them.
//!
//! Closures cannot travel between processes, so a task is a function registered under a
//! name in a [`Registry`] that every rank builds the same way (the job runs one program):
//! [`Registry::register`] returns a typed [`TaskFn`] the root submits with an input.
//! Inputs and outputs cross as `bincode`; many small tasks travel in one message.
//!
//! [`run`] is collective over a communicator: on the root it calls your closure with an
//! [`Executor`] and returns `Some` of its result; on the other ranks it serves tasks until
//! the root's closure has returned (and its tasks finished), then returns `None`.
//!
//! ```
//! use heddle::futures::{self, Registry};
//! let mut registry = Registry::new();
//! let square = registry.register("square", |x: u64| x * x);
//! let world = heddle::init().unwrap(); // under `heddle run -n 3`: two workers
//! let total = futures::run(&world, 0, &registry, |ex| {
//!     let fs = (0..100u64).map(|i| ex.submit(square, i)).collect::<Result<Vec<_>, _>>()?;
//!     fs.into_iter().map(|f| f.wait()).sum::<Result<u64, _>>()
//! })
//! .unwrap();
//! assert_eq!(total, Some((0..100u64).map(|i| i * i).sum()));
//! ```
//!
//! A world of one has no worker: its root runs the tasks itself, in `wait`.

mod executor;
mod worker;

use std::marker::PhantomData;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::Communicator;
pub use executor::{Executor, Future};

/// What a task or the executor failed with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A message between the root and a worker failed (a lost peer, an aborted job).
    #[error(transparent)]
    Comm(#[from] heddle_comm::Error),
    /// A task's function panicked on a worker; the message is the panic's.
    #[error("task {task} (id {id}) panicked on rank {rank}: {message}")]
    Task {
        /// The function's registered name.
        task: String,
        /// The submission's id (its order among the root's submissions).
        id: u64,
        /// The rank it ran on.
        rank: usize,
        /// The panic message.
        message: String,
    },
    /// A task's input or output could not be encoded or decoded.
    #[error("task {task}: {source}")]
    Codec {
        /// The function's registered name.
        task: String,
        /// What bincode said.
        source: bincode::Error,
    },
    /// A call that cannot be right: registries that differ across ranks, a root outside
    /// the world, a chunk size of 0.
    #[error("{0}")]
    Invalid(String),
}

/// A function of bytes to bytes: a registered task, its types erased.
type Erased = dyn Fn(&[u8]) -> Result<Vec<u8>, Error> + Send + Sync;

/// The functions tasks may call, registered in the same order on every rank.
#[derive(Default, Clone)]
pub struct Registry {
    fns: Vec<(&'static str, Arc<Erased>)>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.fns.iter().map(|(name, _)| name)).finish()
    }
}

/// A registered function taking `I` and returning `O`, to submit to an [`Executor`].
#[derive(Debug)]
pub struct TaskFn<I, O> {
    index: u32,
    _types: PhantomData<fn(I) -> O>,
}

impl<I, O> Clone for TaskFn<I, O> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<I, O> Copy for TaskFn<I, O> {}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Registers `f` under `name`; every rank must register the same functions in the
    /// same order.
    ///
    /// ```
    /// let mut registry = heddle::futures::Registry::new();
    /// let words = registry.register("words", |line: String| line.split_whitespace().count());
    /// # let _ = words;
    /// ```
    pub fn register<I, O, F>(&mut self, name: &'static str, f: F) -> TaskFn<I, O>
    where
        I: DeserializeOwned,
        O: Serialize,
        F: Fn(I) -> O + Send + Sync + 'static,
    {
        let erased = move |input: &[u8]| -> Result<Vec<u8>, Error> {
            let codec = |source| Error::Codec { task: name.to_string(), source };
            let value: I = bincode::deserialize(input).map_err(codec)?;
            bincode::serialize(&f(value)).map_err(codec)
        };
        self.fns.push((name, Arc::new(erased)));
        TaskFn { index: (self.fns.len() - 1) as u32, _types: PhantomData }
    }

    fn name(&self, index: u32) -> &'static str {
        self.fns.get(index as usize).map_or("?", |f| f.0)
    }

    /// The registered names joined, to compare across ranks.
    fn signature(&self) -> String {
        self.fns.iter().map(|f| f.0).collect::<Vec<_>>().join(",")
    }
}

/// Runs `body` on `root` with an [`Executor`] whose tasks run on the other ranks of
/// `comm`, which serve them meanwhile; collective over `comm`. Returns `Some(body's
/// result)` on the root and `None` elsewhere, once every submitted task has finished.
///
/// # Errors
/// [`Error::Invalid`] when the ranks' registries differ; [`Error::Comm`] when a worker
/// is lost or the job is aborted; on the root, `body`'s own error.
pub fn run<R, E>(
    comm: &Communicator,
    root: usize,
    registry: &Registry,
    body: impl FnOnce(&Executor<'_>) -> Result<R, E>,
) -> Result<Option<R>, E>
where
    E: From<Error>,
{
    // A context of its own, and a check that every rank registered the same functions.
    let comm = comm
        .split(Some(0), comm.rank() as i64)
        .map_err(Error::from)?
        .ok_or_else(|| Error::Invalid("the executor's communicator could not be made".into()))?;
    if root >= comm.size() {
        return Err(
            Error::Invalid(format!("root {root} is outside a world of {}", comm.size())).into()
        );
    }
    let mine = registry.signature();
    let mut bytes = mine.clone().into_bytes();
    let mut len = [bytes.len() as u64];
    comm.broadcast(&mut len, root).map_err(Error::from)?;
    bytes.resize(len[0] as usize, 0);
    comm.broadcast(&mut bytes, root).map_err(Error::from)?;
    let roots = String::from_utf8_lossy(&bytes).into_owned();
    // Every rank learns whether any differs, so that all fail together.
    let mut same = [u8::from(roots == mine)];
    comm.allreduce(&mut same, crate::Op::Min).map_err(Error::from)?;
    if same[0] == 0 {
        let why = if roots == mine {
            "another rank's differs".to_string()
        } else {
            format!("rank {} registered [{mine}]", comm.rank())
        };
        return Err(Error::Invalid(format!(
            "the root registered [{roots}] but {why}: build the registry the same way on every \
             rank"
        ))
        .into());
    }
    if comm.rank() != root {
        worker::serve(&comm, root, registry)?;
        return Ok(None);
    }
    let executor = Executor::new(&comm, root, registry);
    let out = body(&executor);
    // Every task finishes and the workers stop, whatever `body` returned.
    executor.shutdown()?;
    out.map(Some)
}
