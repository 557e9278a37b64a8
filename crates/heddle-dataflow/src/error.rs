//! The one error type of the dataflow operations.

/// What can go wrong in a dataflow operation.
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
    /// Communication failed: a lost peer, a timeout, a job-wide abort.
    #[error(transparent)]
    Comm(#[from] heddle_comm::Error),
    /// Bad input to an operation: a misplaced task, a malformed record, a record of 4 GiB.
    #[error("{0}")]
    InvalidArgument(String),
    /// A record could not be encoded or decoded (bincode).
    #[error("serialization: {0}")]
    Serialization(#[from] bincode::Error),
    /// A spill file or directory could not be made, written or read back (names it).
    #[error("{context}: {source}")]
    Io {
        /// What was being done, naming the file.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io { context: context.into(), source }
    }

    /// The variant's name, for reports (`InvalidArgument`, `Io`, or the communication
    /// error's own, such as `Timeout`).
    ///
    /// ```
    /// let e = heddle_dataflow::Error::InvalidArgument("no targets".into());
    /// assert_eq!(e.kind(), "InvalidArgument");
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Comm(e) => e.kind(),
            Error::InvalidArgument(_) => "InvalidArgument",
            Error::Serialization(_) => "Serialization",
            Error::Io { .. } => "Io",
        }
    }
}

/// Results of the dataflow operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;
