//! The bridge layer's one error type.

use std::time::Duration;

/// Result of the bridge layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong on a bridge. Errors that end a bridged task carry the task, the
/// instance and the filter's command, and once the process is gone its exit status and the
/// tail of its standard error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The filter's program could not be started.
    #[error("bridge {task}: cannot start `{command}`: {source}{hint}")]
    Spawn {
        /// Task name and instance.
        task: String,
        /// The command line.
        command: String,
        /// The operating system's error.
        source: std::io::Error,
        /// What to do about it.
        hint: &'static str,
    },
    /// An I/O error on the channel or a transport file.
    #[error("bridge: {what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A frame that is not valid wire format.
    #[error("bridge: malformed frame from the {peer}: {source}")]
    Wire {
        /// `host` or `filter`.
        peer: &'static str,
        /// The decoder's error.
        source: heddle_wire::Error,
    },
    /// A frame or message that breaks the bridge protocol (`spec/bridge.md`).
    #[error("bridge protocol error ({rule}): {detail}")]
    Protocol {
        /// The rule of the specification, e.g. `B2`.
        rule: &'static str,
        /// What was seen.
        detail: String,
    },
    /// The two sides speak different protocol versions.
    #[error("host speaks bridge protocol version {host}, the filter version {filter}")]
    Version {
        /// The host's version.
        host: u32,
        /// The filter's version.
        filter: u32,
    },
    /// A record above the configured maximum.
    #[error("record {record} is {size} bytes, above the bridge's max_record of {limit} bytes; raise max_record or split the record")]
    RecordTooLarge {
        /// Its number in its direction.
        record: u64,
        /// Its size in bytes.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Something the bridge waited for did not happen in time.
    #[error("bridge: no {what} within {limit:?}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// The timeout.
        limit: Duration,
    },
    /// The filter failed: it reported an error, aborted, exited, crashed or hung.
    #[error("bridged task {task}: {what}; `{command}` {exit}{}", stderr_section(.stderr_tail))]
    Filter {
        /// Task name and instance.
        task: String,
        /// The command line.
        command: String,
        /// What happened.
        what: String,
        /// Its exit status or signal, or `is still running`.
        exit: String,
        /// The last lines it wrote to standard error.
        stderr_tail: String,
    },
    /// What the filter did: reported an ERROR, aborted, or closed its channel early.
    #[error("{0}")]
    Ended(String),
    /// A result that cannot be read as the type the job expects.
    #[error("bridge: a result the job cannot read as {expected}: {detail}")]
    Decode {
        /// The Rust type expected.
        expected: &'static str,
        /// Why.
        detail: String,
    },
    /// A bad setting (transport name, policy rule, command).
    #[error("bridge configuration: {0}")]
    Config(String),
}

fn stderr_section(tail: &str) -> String {
    if tail.trim().is_empty() {
        "; it wrote nothing to standard error".to_owned()
    } else {
        format!("; the end of its standard error:\n{}", tail.trim_end())
    }
}

impl Error {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io { what: what.into(), source }
    }

    pub(crate) fn protocol(rule: &'static str, detail: impl Into<String>) -> Error {
        Error::Protocol { rule, detail: detail.into() }
    }

    /// The code an `ERROR` control message carries for this error (`spec/bridge.md` §4).
    pub fn code(&self) -> &'static str {
        match self {
            Error::Version { .. } => "VERSION",
            Error::RecordTooLarge { .. } => "RECORD_TOO_LARGE",
            _ => "PROTOCOL",
        }
    }
}
