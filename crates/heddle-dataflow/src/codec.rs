//! Record encoding for dataflow operations (bincode) and the key hash that routes keyed
//! records (FNV-1a over the encoded key, so every worker and language agrees).

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{Error, Result};

/// Encodes one value.
pub(crate) fn encode<T: Serialize>(item: &T) -> Result<Vec<u8>> {
    Ok(bincode::serialize(item)?)
}

/// Appends one encoded value to `out`.
pub(crate) fn encode_into<T: Serialize>(out: &mut Vec<u8>, item: &T) -> Result<()> {
    Ok(bincode::serialize_into(out, item)?)
}

/// Appends a keyed record to `out`: u32 LE key length, encoded key, encoded value; the
/// receiver finds the key bytes without decoding anything.
pub(crate) fn encode_keyed_into<K: Serialize, V: Serialize>(
    out: &mut Vec<u8>,
    key: &K,
    value: &V,
) -> Result<()> {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    bincode::serialize_into(&mut *out, key)?;
    let key_len = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&key_len.to_le_bytes());
    Ok(bincode::serialize_into(out, value)?)
}

/// The encoded key and value of a keyed record.
pub(crate) fn split_keyed(record: &[u8]) -> Result<(&[u8], &[u8])> {
    let bad = || crate::Error::InvalidArgument("a keyed record is cut short".into());
    let len = record.get(..4).ok_or_else(bad)?;
    let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    let key = record.get(4..4 + len).ok_or_else(bad)?;
    Ok((key, &record[4 + len..]))
}

/// Decodes a keyed record.
pub(crate) fn decode_keyed<K: DeserializeOwned, V: DeserializeOwned>(
    record: &[u8],
) -> Result<(K, V)> {
    let (k, v) = split_keyed(record)?;
    Ok((decode(k)?, decode(v)?))
}

/// Decodes one record.
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    Ok(bincode::deserialize(bytes)?)
}

/// Decodes every record packed in a message.
pub(crate) fn decode_all<T: DeserializeOwned>(payload: &[u8]) -> Result<Vec<T>> {
    records(payload).map(|r| r.and_then(decode)).collect()
}

/// Stable hash of an encoded key.
pub(crate) fn key_hash(encoded: &[u8]) -> u64 {
    encoded
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Iterates the records packed in a message.
pub(crate) fn records(payload: &[u8]) -> impl Iterator<Item = Result<&[u8]>> {
    let mut at = 0;
    std::iter::from_fn(move || {
        if at >= payload.len() {
            return None;
        }
        let Some(len) =
            payload.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        else {
            at = payload.len();
            return Some(Err(Error::InvalidArgument("a record header is cut short".into())));
        };
        let rec = payload.get(at + 4..at + 4 + len);
        at += 4 + len;
        Some(rec.ok_or_else(|| Error::InvalidArgument("a record is cut short".into())))
    })
}
