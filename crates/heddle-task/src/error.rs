//! The one error type of the task system.

/// What can go wrong planning or running a task graph.
///
/// Not `#[non_exhaustive]`: the Python bindings map every variant to an exception class,
/// so a new variant must not compile until it is mapped.
#[derive(Debug, thiserror::Error, strum::EnumDiscriminants)]
#[strum_discriminants(
    name(ErrorVariant),
    derive(strum::EnumIter, strum::IntoStaticStr),
    doc = "The variants of [`Error`], without their fields."
)]
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
    /// A task failed with an error of a layer built on the task system (the data API's
    /// unreadable or malformed input, for one), kept whole so that the layer takes it back
    /// out of the job as itself ([`Error::raised`]).
    #[error("task {task} failed: {source}")]
    Raised {
        /// The task instance, as `name[index]` (named by the job as the error leaves the
        /// task).
        task: String,
        /// The error's kind (its variant's name, such as `Parse`), for the report of a
        /// job-wide abort.
        kind: &'static str,
        /// The error itself.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A checkpoint cannot be used: corrupt, of another job or graph, or unreadable.
    #[error("checkpoint {path}: {message}")]
    Checkpoint {
        /// The checkpoint file or directory.
        path: String,
        /// What is wrong, and what to do.
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

impl Error {
    /// Carries `source`, an error of a layer built on the task system that a task raised,
    /// out of the job whole ([`Error::Raised`]); `kind` names its variant. The job names
    /// the task; the layer gets its error back with `Box::downcast`.
    ///
    /// ```
    /// let io = std::io::Error::other("disk on fire");
    /// let e = heddle_task::Error::raised("Io", io);
    /// let heddle_task::Error::Raised { kind, source, .. } = e else { unreachable!() };
    /// assert_eq!(kind, "Io");
    /// assert_eq!(source.downcast::<std::io::Error>().unwrap().to_string(), "disk on fire");
    /// ```
    pub fn raised(
        kind: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        Error::Raised { task: String::new(), kind, source: Box::new(source) }
    }

    /// The variant's name, for reports (`Graph`, `Task`, ..., the raised error's kind, or
    /// the communication or dataflow error's own, such as `Timeout`).
    ///
    /// ```
    /// let e = heddle_task::Error::Plan("no worker has 3 GPUs".into());
    /// assert_eq!(e.kind(), "Plan");
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Graph(_) => "Graph",
            Error::Plan(_) => "Plan",
            Error::Task { .. } => "Task",
            Error::Raised { kind, .. } => kind,
            Error::Checkpoint { .. } => "Checkpoint",
            Error::Aborted(_) => "Aborted",
            Error::Comm(e) => e.kind(),
            Error::Dataflow(e) => e.kind(),
        }
    }
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
