//! The one error type of the data API.

/// What can go wrong building or running a data pipeline.
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
    /// Planning or running the task graph failed (an error of this crate raised inside a
    /// task comes back out of the job as itself, not as this).
    #[error(transparent)]
    Task(heddle_task::Error),
    /// Communication failed.
    #[error(transparent)]
    Comm(#[from] heddle_comm::Error),
}

impl Error {
    /// Carries this error out of the running task it was raised in, whole: the job hands
    /// it back as itself ([`heddle_task::Error::raised`], undone by `From`).
    pub(crate) fn into_task(self) -> heddle_task::Error {
        match self {
            Error::Task(t) => t,
            other => heddle_task::Error::raised(other.kind(), other),
        }
    }

    /// The variant's name, for reports (`Parse`, `Io`, ..., or the communication or task
    /// error's own).
    ///
    /// ```
    /// let e = heddle_data::Error::InvalidArgument("no paths".into());
    /// assert_eq!(e.kind(), "InvalidArgument");
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            Error::InvalidArgument(_) => "InvalidArgument",
            Error::Io { .. } => "Io",
            Error::Parse { .. } => "Parse",
            Error::Changed { .. } => "Changed",
            Error::Task(t) => t.kind(),
            Error::Comm(c) => c.kind(),
        }
    }
}

impl From<heddle_task::Error> for Error {
    /// An error of this crate that a task raised ([`heddle_task::Error::Raised`]) is
    /// itself again; anything else is [`Error::Task`].
    fn from(e: heddle_task::Error) -> Error {
        match e {
            heddle_task::Error::Raised { task, kind, source } => match source.downcast() {
                Ok(own) => *own,
                Err(source) => Error::Task(heddle_task::Error::Raised { task, kind, source }),
            },
            other => Error::Task(other),
        }
    }
}

/// The I/O error `e` on `path`.
pub(crate) fn io(path: &std::path::Path, e: std::io::Error) -> Error {
    Error::Io { path: path.display().to_string(), source: e }
}

/// Results of the data API.
pub type Result<T, E = Error> = std::result::Result<T, E>;
