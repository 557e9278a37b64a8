//! The one error type of `heddle-wire`.

/// What can be wrong with bytes that claim to be a Heddle frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Fewer bytes than the header or the lengths it declares.
    #[error("truncated frame: need {needed} bytes, have {available}")]
    Truncated {
        /// Bytes the frame needs.
        needed: usize,
        /// Bytes that were available.
        available: usize,
    },
    /// The first two bytes are not `HD`.
    #[error("bad magic {found:#06x}: not a heddle frame (expected 0x4448 \"HD\")")]
    BadMagic {
        /// The value found.
        found: u16,
    },
    /// A version this implementation does not speak.
    #[error("unsupported wire version {found} (this build speaks version {supported})")]
    UnsupportedVersion {
        /// Version in the header.
        found: u8,
        /// Version this build speaks.
        supported: u8,
    },
    /// Unknown frame kind byte.
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    /// Unknown payload codec byte.
    #[error("unknown payload codec {0}")]
    UnknownCodec(u8),
    /// Reserved flag bits or reserved bytes are not zero.
    #[error("reserved bits set in {field}: {value:#x}")]
    Reserved {
        /// Which field.
        field: &'static str,
        /// Its value.
        value: u32,
    },
    /// A declared length exceeds the configured limit.
    #[error("{field} of {value} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Which length.
        field: &'static str,
        /// Declared value.
        value: u64,
        /// Configured limit.
        limit: u64,
    },
    /// Fields that contradict each other (for example a fragment longer than its message).
    #[error("inconsistent frame: {0}")]
    Inconsistent(&'static str),
}

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, Error>;
