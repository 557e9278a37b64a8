//! The one error type of `heddle-comm`.

use std::time::Duration;

/// Everything that can go wrong while communicating.
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
    /// A peer sent bytes that are not a valid frame; its connection is closed.
    #[error("malformed frame from rank {rank}: {source}")]
    Wire {
        /// Sending rank.
        rank: usize,
        /// What was wrong.
        #[source]
        source: heddle_wire::Error,
    },
    /// A peer closed its connection or its process is gone.
    #[error("rank {rank} is gone ({detail}); the job cannot continue")]
    PeerLost {
        /// The lost rank (world numbering).
        rank: usize,
        /// How we noticed.
        detail: String,
    },
    /// An operation did not complete in time.
    #[error(
        "{op} timed out after {waited:?} ({detail}); raise HEDDLE_TIMEOUT_S if peers are \
         legitimately slow"
    )]
    Timeout {
        /// The operation.
        op: &'static str,
        /// How long it waited.
        waited: Duration,
        /// What it was waiting for.
        detail: String,
    },
    /// A received message does not fit the receive buffer.
    #[error(
        "message of {got} bytes from rank {rank} does not fit the {capacity}-byte receive buffer"
    )]
    Truncated {
        /// Sending rank.
        rank: usize,
        /// Bytes in the message.
        got: u64,
        /// Bytes the buffer holds.
        capacity: usize,
    },
    /// Another rank made a different collective call at the same point (another
    /// collective, element type, count or reduction).
    #[error(
        "rank {rank} called {theirs} where this rank called {ours}: every rank must make the \
         same collective calls, in the same order, with the same element type, count and \
         operation"
    )]
    CollectiveMismatch {
        /// The other rank.
        rank: usize,
        /// Its call.
        theirs: String,
        /// This rank's call.
        ours: String,
    },
    /// A message's element type differs from the receive buffer's.
    #[error(
        "rank {rank} sent {sent} elements but the receive buffer holds {expected}: send and \
         receive the same element type"
    )]
    TypeMismatch {
        /// Sending rank.
        rank: usize,
        /// The element type sent.
        sent: String,
        /// The receive buffer's element type.
        expected: String,
    },
    /// The caller passed arguments that cannot be right.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A configuration value is wrong.
    #[error("configuration: {0}")]
    Config(String),
    /// A file, directory or segment that must be private to this user is not: another user
    /// owns it or may read or write it, or it is not what it should be (e.g. a symlink).
    #[error(
        "{} is not private to this user: {detail}; refusing to use it (remove it, or check \
         who created it)",
        path.display()
    )]
    NotPrivate {
        /// What was checked.
        path: std::path::PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// The job was aborted: a rank failed (this one or another), and every blocking call of
    /// every rank now fails with its cause.
    #[error("the job was aborted: {0}")]
    Aborted(crate::AbortCause),
    /// An object could not be (de)serialized.
    #[error("serialization: {0}")]
    Serialization(#[from] bincode::Error),
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io { context: context.into(), source }
    }

    /// The variant's name, for reports (`Timeout`, `PeerLost`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Io { .. } => "Io",
            Error::Wire { .. } => "Wire",
            Error::PeerLost { .. } => "PeerLost",
            Error::Timeout { .. } => "Timeout",
            Error::Truncated { .. } => "Truncated",
            Error::TypeMismatch { .. } => "TypeMismatch",
            Error::CollectiveMismatch { .. } => "CollectiveMismatch",
            Error::InvalidArgument(_) => "InvalidArgument",
            Error::Config(_) => "Config",
            Error::NotPrivate { .. } => "NotPrivate",
            Error::Aborted(_) => "Aborted",
            Error::Serialization(_) => "Serialization",
        }
    }
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;
