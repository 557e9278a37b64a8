//! [`BytesKey`]: a byte string (or a prefix of one) as a sort key.

use serde::{Deserialize, Serialize};

/// A byte string as a key that orders as its bytes do, with its first 16 bytes inline: a
/// comparison of keys up to 16 bytes long (the usual sort key: a terasort key, a date, an
/// id) follows no pointer, and such a key allocates nothing.
///
/// ```
/// use heddle_data::BytesKey;
/// let (a, b) = (BytesKey::new(b"apple pie", Some(5)), BytesKey::new(b"apples", Some(5)));
/// assert_eq!(a, b); // both "apple"
/// assert!(BytesKey::new(b"ab", None) < BytesKey::new(b"ab\0", None));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BytesKey {
    /// The first 16 bytes, big-endian, zero-padded.
    head: u128,
    /// The bytes after the first 16.
    rest: Vec<u8>,
    /// The length: among keys equal when zero-padded, the shorter is a prefix of the longer.
    len: usize,
}

impl BytesKey {
    /// The key of `bytes`: their first `prefix` bytes, or all of them.
    pub fn new(bytes: &[u8], prefix: Option<usize>) -> BytesKey {
        let key = &bytes[..prefix.map_or(bytes.len(), |n| n.min(bytes.len()))];
        let (first, rest) = key.split_at(key.len().min(16));
        let mut head = [0u8; 16];
        head[..first.len()].copy_from_slice(first);
        BytesKey { head: u128::from_be_bytes(head), rest: rest.to_vec(), len: key.len() }
    }
}

#[cfg(test)]
mod tests {
    use super::BytesKey;

    #[test]
    fn keys_order_as_their_bytes() {
        let words: Vec<&[u8]> = vec![
            b"",
            b"\0",
            b"\0\0",
            b"a",
            b"a\0",
            b"ab",
            b"abcdefghijklmnop",
            b"abcdefghijklmnop\0",
            b"abcdefghijklmnopq",
            b"abcdefghijklmnoq",
            b"abcdefghijklmnop\0\0",
            b"b",
            b"\xff",
            b"\xff\xff",
            b"abcdefghijklmnopqrstuvwxyz",
            b"abcdefghijklmnopqrstuvwxy",
        ];
        for a in &words {
            for b in &words {
                assert_eq!(
                    BytesKey::new(a, None).cmp(&BytesKey::new(b, None)),
                    a.cmp(b),
                    "{a:?} vs {b:?}"
                );
                let (a3, b3) = (&a[..a.len().min(3)], &b[..b.len().min(3)]);
                assert_eq!(
                    BytesKey::new(a, Some(3)).cmp(&BytesKey::new(b, Some(3))),
                    a3.cmp(b3),
                    "{a:?} vs {b:?}, 3 bytes"
                );
            }
        }
    }
}
