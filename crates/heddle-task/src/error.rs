//! The one error type of the task system.

/// What can go wrong planning or running a task graph.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The graph is malformed (an unknown vertex, an edge into a source, a cycle ...).
    #[error("invalid task graph: {0}")]
    Graph(String),
    /// The graph cannot be placed on the workers; names the task and the shortfall.
    #[error("cannot place the task graph: {0}")]
    Plan(String),
    /// A task returned an error.
    #[error("task {task} failed: {message}")]
    Task {
        /// The task instance, as `name[index]`.
        task: String,
        /// What the task reported.
        message: String,
    },
    /// The job was aborted on this worker ([`crate::AbortHandle`]); says why.
    #[error("the job was aborted: {0}")]
    Aborted(String),
    /// Communication failed (a lost peer, a timeout, a job-wide abort).
    #[error(transparent)]
    Comm(#[from] heddle_comm::Error),
    /// A dataflow operation failed (bad input to it, a spill file it could not use).
    #[error(transparent)]
    Dataflow(heddle_dataflow::Error),
}

impl From<heddle_dataflow::Error> for Error {
    /// A communication failure inside an operation stays [`Error::Comm`], so a lost peer
    /// or an abort reads the same whichever layer met it.
    fn from(e: heddle_dataflow::Error) -> Error {
        match e {
            heddle_dataflow::Error::Comm(c) => Error::Comm(c),
            other => Error::Dataflow(other),
        }
    }
}

/// Results of the task system.
pub type Result<T, E = Error> = std::result::Result<T, E>;
