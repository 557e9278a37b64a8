//! Records: what crosses a bridge, as bytes or typed.

use heddle_wire::{Codec, Dtype};

/// One record: its codec (how to read the payload), an optional key and the payload.
///
/// ```
/// use heddle_bridge::Record;
/// let r = Record::f64s(&[1.5, 2.5]).with_key(b"k".to_vec());
/// assert_eq!(r.to_f64s(), Some(vec![1.5, 2.5]));
/// assert_eq!(Record::text("hé").as_text(), Some("hé"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// How the payload is encoded.
    pub codec: Codec,
    /// The record's key (empty: none).
    pub key: Vec<u8>,
    /// The payload.
    pub payload: Vec<u8>,
}

impl Record {
    /// An opaque byte record.
    pub fn bytes(payload: impl Into<Vec<u8>>) -> Record {
        Record { codec: Codec::Raw, key: Vec::new(), payload: payload.into() }
    }

    /// A UTF-8 text record.
    pub fn text(text: impl Into<String>) -> Record {
        Record { codec: Codec::Utf8, key: Vec::new(), payload: text.into().into_bytes() }
    }

    /// A little-endian `f64` array record.
    pub fn f64s(values: &[f64]) -> Record {
        let payload = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Record { codec: Codec::Array(Dtype::F64), key: Vec::new(), payload }
    }

    /// A little-endian `i64` array record.
    pub fn i64s(values: &[i64]) -> Record {
        let payload = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Record { codec: Codec::Array(Dtype::I64), key: Vec::new(), payload }
    }

    /// The same record with a key.
    #[must_use]
    pub fn with_key(mut self, key: Vec<u8>) -> Record {
        self.key = key;
        self
    }

    /// The text of a UTF-8 record that is valid UTF-8.
    pub fn as_text(&self) -> Option<&str> {
        (self.codec == Codec::Utf8).then(|| std::str::from_utf8(&self.payload).ok()).flatten()
    }

    /// The values of an `f64` array record.
    pub fn to_f64s(&self) -> Option<Vec<f64>> {
        (self.codec == Codec::Array(Dtype::F64)).then(|| {
            self.payload
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect()
        })
    }

    /// The values of an `i64` array record.
    pub fn to_i64s(&self) -> Option<Vec<i64>> {
        (self.codec == Codec::Array(Dtype::I64)).then(|| {
            self.payload
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect()
        })
    }
}
