//! The one error type of `heddle-runtime`.

/// What can go wrong while bootstrapping or launching a job.
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
    /// An operating-system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The communication layer failed.
    #[error(transparent)]
    Comm(#[from] heddle_comm::Error),
    /// A launcher environment variable is missing or malformed.
    #[error("environment: {0}")]
    Env(String),
    /// A peer or the master did not prove it knows the job token.
    #[error("authentication failed: {0}")]
    Auth(String),
    /// The master refused this worker or aborted the job.
    #[error("the job master refused: {0}")]
    Refused(String),
    /// An unexpected or malformed control message.
    #[error("protocol: {0}")]
    Protocol(String),
    /// Bootstrap did not finish in time.
    #[error("{0}")]
    Timeout(String),
    /// A worker program could not be started.
    #[error("cannot start {program:?}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io { context: context.into(), source }
    }
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;
