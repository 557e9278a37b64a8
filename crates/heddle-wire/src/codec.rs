//! Payload codecs: how the payload bytes of a frame are to be read.

use crate::{Error, Result};

/// Element type of a little-endian primitive array payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Dtype {
    /// `u8`
    U8 = 0,
    /// `i8`
    I8 = 1,
    /// `u16`
    U16 = 2,
    /// `i16`
    I16 = 3,
    /// `u32`
    U32 = 4,
    /// `i32`
    I32 = 5,
    /// `u64`
    U64 = 6,
    /// `i64`
    I64 = 7,
    /// `f32`
    F32 = 8,
    /// `f64`
    F64 = 9,
}

impl Dtype {
    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            Dtype::U8 | Dtype::I8 => 1,
            Dtype::U16 | Dtype::I16 => 2,
            Dtype::U32 | Dtype::I32 | Dtype::F32 => 4,
            Dtype::U64 | Dtype::I64 | Dtype::F64 => 8,
        }
    }

    /// The element type with wire byte `b`, if there is one.
    ///
    /// ```
    /// use heddle_wire::Dtype;
    /// assert_eq!(Dtype::from_u8(9), Some(Dtype::F64));
    /// assert_eq!(Dtype::from_u8(10), None);
    /// ```
    pub fn from_u8(b: u8) -> Option<Dtype> {
        Some(match b {
            0 => Dtype::U8,
            1 => Dtype::I8,
            2 => Dtype::U16,
            3 => Dtype::I16,
            4 => Dtype::U32,
            5 => Dtype::I32,
            6 => Dtype::U64,
            7 => Dtype::I64,
            8 => Dtype::F32,
            9 => Dtype::F64,
            _ => return None,
        })
    }
}

/// How to interpret a payload. Byte values: `0..=5` named codecs, `0x10 + dtype` for arrays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    /// Opaque bytes.
    Raw,
    /// UTF-8 text.
    Utf8,
    /// Rust `bincode` (1.x, little-endian, fixed-int) serialization.
    Bincode,
    /// Arrow IPC stream.
    ArrowIpc,
    /// Python pickle (accepted only from authenticated peers).
    Pickle,
    /// JSON text.
    Json,
    /// Little-endian array of one primitive type.
    Array(Dtype),
}

impl Codec {
    /// The codec's byte on the wire.
    pub fn to_u8(self) -> u8 {
        match self {
            Codec::Raw => 0,
            Codec::Utf8 => 1,
            Codec::Bincode => 2,
            Codec::ArrowIpc => 3,
            Codec::Pickle => 4,
            Codec::Json => 5,
            Codec::Array(d) => 0x10 + d as u8,
        }
    }

    /// Parses a codec byte.
    ///
    /// # Errors
    /// [`Error::UnknownCodec`] for a byte that names no codec.
    pub fn from_u8(b: u8) -> Result<Codec> {
        Ok(match b {
            0 => Codec::Raw,
            1 => Codec::Utf8,
            2 => Codec::Bincode,
            3 => Codec::ArrowIpc,
            4 => Codec::Pickle,
            5 => Codec::Json,
            0x10..=0x1f => Codec::Array(Dtype::from_u8(b - 0x10).ok_or(Error::UnknownCodec(b))?),
            other => return Err(Error::UnknownCodec(other)),
        })
    }
}
