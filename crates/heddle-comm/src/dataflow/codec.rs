//! Record encoding for dataflow operations (bincode) and the key hash that routes keyed
//! records (FNV-1a over the encoded key, so every worker and language agrees).

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::Result;

/// Encodes one record.
pub(crate) fn encode<T: Serialize>(item: &T) -> Result<Vec<u8>> {
    Ok(bincode::serialize(item)?)
}

/// Decodes one record.
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    Ok(bincode::deserialize(bytes)?)
}

/// Decodes every record packed in a message.
pub(crate) fn decode_all<T: DeserializeOwned>(payload: &[u8]) -> Result<Vec<T>> {
    super::core::records(payload).map(|r| r.and_then(decode)).collect()
}

/// Stable hash of an encoded key.
pub(crate) fn key_hash(encoded: &[u8]) -> u64 {
    encoded.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}
