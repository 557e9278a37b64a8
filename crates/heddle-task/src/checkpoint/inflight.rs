//! In-flight records of unaligned checkpoints: a task's checkpoint may hold, beside its own
//! state, the records that were between tasks when it snapshotted — those its input queue
//! held or received before the barrier on a slower input, and those the barrier overtook in
//! its outboxes. They are encoded with the edge's record type ([`Codec`]) and given back
//! on restore before anything new.

use serde::{Deserialize, Serialize};

use crate::{Error, Record, Result};

/// Encodes and decodes one record type (bincode, as the dataflow operations do).
pub(crate) struct Codec<T> {
    encode: fn(&T, &mut Vec<u8>) -> bincode::Result<()>,
    decode: fn(&mut &[u8]) -> bincode::Result<T>,
}

impl<T> Clone for Codec<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Codec<T> {}

impl<T> std::fmt::Debug for Codec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Codec")
    }
}

impl<T: Record> Codec<T> {
    /// The codec of a record type.
    pub(crate) fn of() -> Codec<T> {
        Codec {
            encode: |x, out| bincode::serialize_into(out, x),
            decode: |input| bincode::deserialize_from(input),
        }
    }
}

impl<T> Codec<T> {
    /// Appends `items` to `out`.
    ///
    /// # Errors
    /// A record that does not serialize.
    pub(crate) fn encode_all<'a>(
        &self,
        items: impl IntoIterator<Item = &'a T>,
        out: &mut Vec<u8>,
    ) -> Result<()>
    where
        T: 'a,
    {
        for x in items {
            (self.encode)(x, out).map_err(|e| inflight_error(&e))?;
        }
        Ok(())
    }

    /// Appends one record to `out`.
    ///
    /// # Errors
    /// A record that does not serialize.
    pub(crate) fn encode(&self, x: &T, out: &mut Vec<u8>) -> Result<()> {
        (self.encode)(x, out).map_err(|e| inflight_error(&e))
    }

    /// Every record of `bytes`, in order.
    ///
    /// # Errors
    /// Bytes that do not decode as records of this type.
    pub(crate) fn decode_all(&self, mut bytes: &[u8]) -> Result<Vec<T>> {
        let mut items = Vec::new();
        while !bytes.is_empty() {
            items.push((self.decode)(&mut bytes).map_err(|e| inflight_error(&e))?);
        }
        Ok(items)
    }
}

fn inflight_error(e: &bincode::Error) -> Error {
    Error::Graph(format!("an in-flight record of a checkpoint does not (de)serialize: {e}"))
}

/// What a task's unaligned checkpoint holds beside its state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Inflight {
    /// Records of its input queue, encoded.
    pub(crate) inputs: Vec<u8>,
    /// Records its barrier overtook, per output port (its index), encoded.
    pub(crate) outputs: Vec<(u32, Vec<u8>)>,
}

impl Inflight {
    /// Whether it holds no record.
    pub(crate) fn is_empty(&self) -> bool {
        self.inputs.is_empty() && self.outputs.iter().all(|(_, b)| b.is_empty())
    }

    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        bincode::serialize(self).unwrap_or_default()
    }

    /// # Errors
    /// Bytes that are not an `Inflight`.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Result<Inflight> {
        bincode::deserialize(bytes).map_err(|e| inflight_error(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_blobs_round_trip() {
        let codec = Codec::<(String, u64)>::of();
        let items = vec![("a".to_string(), 1), (String::new(), u64::MAX), ("é".into(), 0)];
        let mut bytes = Vec::new();
        codec.encode_all(&items, &mut bytes).unwrap();
        assert_eq!(codec.decode_all(&bytes).unwrap(), items);
        assert!(codec.decode_all(&bytes[..bytes.len() - 1]).is_err());
        let blob = Inflight { inputs: bytes, outputs: vec![(1, vec![7])] };
        assert_eq!(Inflight::from_bytes(&blob.to_bytes()).unwrap(), blob);
        assert!(!blob.is_empty() && Inflight::default().is_empty());
    }
}
