//! The one error type of the data API.

/// What can go wrong building or running a data pipeline.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input from the program (an empty path list, a zero count ...).
    #[error("{0}")]
    InvalidArgument(String),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The failure.
        source: std::io::Error,
    },
    /// A malformed row in an input file.
    #[error("{path} line {line}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// Its line, counting from 1.
        line: u64,
        /// What is wrong with the row.
        message: String,
    },
    /// An input file changed while the job read it (appended to, truncated, rewritten):
    /// the result would mix two versions of it.
    #[error(
        "{path} changed while the job read it ({detail}); rerun once it no longer changes, \
         or read a copy"
    )]
    Changed {
        /// The file.
        path: String,
        /// What changed.
        detail: String,
    },
    /// Planning or running the task graph failed.
    #[error(transparent)]
    Task(#[from] heddle_task::Error),
    /// Communication failed.
    #[error(transparent)]
    Comm(#[from] heddle_comm::Error),
}

impl Error {
    /// Wraps `e` as a task failure, for errors raised inside running tasks.
    pub(crate) fn into_task(self) -> heddle_task::Error {
        match self {
            Error::Task(t) => t,
            other => heddle_task::Error::Task { task: String::new(), message: other.to_string() },
        }
    }
}

/// The I/O error `e` on `path`.
pub(crate) fn io(path: &std::path::Path, e: std::io::Error) -> Error {
    Error::Io { path: path.display().to_string(), source: e }
}

/// Results of the data API.
pub type Result<T, E = Error> = std::result::Result<T, E>;
