//! Records: what crosses a bridge, as bytes or typed.

use heddle_wire::{Codec, Dtype};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One record: its codec (how to read the payload), an optional key and the payload.
///
/// ```
/// use heddle_bridge::Record;
/// let r = Record::f64s(&[1.5, 2.5]).with_key(b"k".to_vec());
/// assert_eq!(r.to_f64s(), Some(vec![1.5, 2.5]));
/// assert_eq!(Record::text("hé").as_text(), Some("hé"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Record {
    /// How the payload is encoded.
    #[serde(with = "codec_byte")]
    pub codec: Codec,
    /// The record's key (empty: none).
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    /// The payload.
    #[serde(with = "serde_bytes")]
    pub payload: Vec<u8>,
}

/// A record crosses Heddle's own edges with its codec as the wire byte.
mod codec_byte {
    use super::*;

    pub(super) fn serialize<S: Serializer>(c: &Codec, s: S) -> Result<S::Ok, S::Error> {
        c.to_u8().serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Codec, D::Error> {
        let b = u8::deserialize(d)?;
        Codec::from_u8(b).map_err(serde::de::Error::custom)
    }
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

/// Values that become records for a bridge (`ds.pipe`, a bridge task's input).
pub trait IntoRecord {
    /// The record.
    fn into_record(self) -> Record;
}

/// Values made from a bridge's records.
pub trait FromRecord: Sized {
    /// The value, or why the record cannot be one.
    ///
    /// # Errors
    /// A message naming the record's codec and what was expected.
    fn from_record(r: Record) -> Result<Self, String>;
}

impl IntoRecord for Record {
    fn into_record(self) -> Record {
        self
    }
}

impl FromRecord for Record {
    fn from_record(r: Record) -> Result<Self, String> {
        Ok(r)
    }
}

impl IntoRecord for String {
    fn into_record(self) -> Record {
        Record::text(self)
    }
}

impl FromRecord for String {
    fn from_record(r: Record) -> Result<Self, String> {
        match r.codec {
            Codec::Utf8 | Codec::Json => String::from_utf8(r.payload)
                .map_err(|e| format!("a utf8 record that is not UTF-8: {e}")),
            c => Err(format!("a record of codec {c:?} where text was expected")),
        }
    }
}

impl IntoRecord for Vec<u8> {
    fn into_record(self) -> Record {
        Record::bytes(self)
    }
}

impl FromRecord for Vec<u8> {
    fn from_record(r: Record) -> Result<Self, String> {
        Ok(r.payload)
    }
}

impl IntoRecord for Vec<f64> {
    fn into_record(self) -> Record {
        Record::f64s(&self)
    }
}

impl FromRecord for Vec<f64> {
    fn from_record(r: Record) -> Result<Self, String> {
        let c = r.codec;
        r.to_f64s().ok_or_else(|| format!("a record of codec {c:?} where f64 values were expected"))
    }
}

impl IntoRecord for (String, i64) {
    fn into_record(self) -> Record {
        Record::i64s(&[self.1]).with_key(self.0.into_bytes())
    }
}

impl FromRecord for (String, i64) {
    /// A keyed record: the key as text, the payload one i64 (or decimal text).
    fn from_record(r: Record) -> Result<Self, String> {
        let key = String::from_utf8(r.key.clone())
            .map_err(|e| format!("a key that is not UTF-8: {e}"))?;
        let value = match r.to_i64s().as_deref() {
            Some([v]) => *v,
            _ => r
                .as_text()
                .and_then(|t| t.trim().parse().ok())
                .ok_or_else(|| format!("record `{key}` holds no single i64"))?,
        };
        Ok((key, value))
    }
}
