//! What a message says it is, checked by the receiving side: its element type (the
//! frame's codec) and, for a collective's messages, the call's [`Signature`] (the frame's
//! `sequence` field).
//!
//! Ranks that pass different element types, counts or reductions to the same collective
//! call, or that call different collectives at the same point, would otherwise compute
//! garbage or wait forever. With the signature on every message, the first receive that
//! sees another rank's call fails with [`Error::CollectiveMismatch`] naming both calls.

use heddle_wire::{Codec, Dtype};

use crate::collectives::Collective;
use crate::{Error, Result};

/// Bits of a signature that hold the element count.
const COUNT_BITS: u32 = 40;
/// The count of a call whose ranks may pass different counts (the v-variants).
const ANY_COUNT: u64 = (1 << COUNT_BITS) - 1;

/// Which collective, element type, element count and reduction a call is, packed into 64
/// bits: collective (8) | reduction (8) | element type (8) | count (40). Zero is no
/// signature (point-to-point messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Signature(pub(crate) u64);

impl Signature {
    /// No signature: matches anything.
    pub(crate) const NONE: Signature = Signature(0);

    /// The signature of a call of `c` on `count` elements of `dtype` (`None`: ranks may
    /// pass different counts), reducing with `op` (an [`crate::Op::code`], 0 for none).
    pub(crate) fn new(c: Collective, dtype: Dtype, count: Option<usize>, op: u8) -> Signature {
        let index = Collective::ALL.iter().position(|&x| x == c).unwrap_or(0) as u64 + 1;
        let count = count.map_or(ANY_COUNT, |n| (n as u64).min(ANY_COUNT - 1));
        Signature(index << 56 | u64::from(op) << 48 | (dtype as u64 + 1) << COUNT_BITS | count)
    }

    /// The collective of a signature made by [`Signature::new`].
    pub(crate) fn collective(self) -> Collective {
        self.parts().0.unwrap_or(Collective::Barrier)
    }

    fn parts(self) -> (Option<Collective>, u8, Option<Dtype>, u64) {
        let c = (self.0 >> 56) as usize;
        let collective = c.checked_sub(1).and_then(|i| Collective::ALL.get(i)).copied();
        let dtype = (((self.0 >> COUNT_BITS) & 0xff) as u8).checked_sub(1).and_then(Dtype::from_u8);
        (collective, (self.0 >> 48) as u8, dtype, self.0 & ANY_COUNT)
    }

    /// Whether a message signed `sent` belongs to a call signed `self`.
    pub(crate) fn accepts(self, sent: Signature) -> bool {
        if self == Signature::NONE || sent == Signature::NONE {
            return true;
        }
        let head = |s: Signature| s.0 >> COUNT_BITS;
        let count = |s: Signature| s.0 & ANY_COUNT;
        head(self) == head(sent)
            && (count(self) == count(sent) || count(self) == ANY_COUNT || count(sent) == ANY_COUNT)
    }

    /// The call in words, e.g. `allreduce of 8 f64 with sum`.
    pub(crate) fn describe(self) -> String {
        let (c, op, dtype, count) = self.parts();
        let mut s = c.map_or_else(|| "an unknown collective".to_string(), |c| c.name().to_string());
        let ty = dtype.map_or_else(|| "?".to_string(), |d| format!("{d:?}").to_lowercase());
        if count == ANY_COUNT {
            s.push_str(&format!(" of {ty} elements"));
        } else if c != Some(Collective::Barrier) {
            s.push_str(&format!(" of {count} {ty}"));
        }
        if let Some(name) = op_name(op) {
            s.push_str(&format!(" with {name}"));
        }
        s
    }
}

fn op_name(code: u8) -> Option<&'static str> {
    ["sum", "prod", "min", "max", "a custom operation"]
        .get(usize::from(code).checked_sub(1)?)
        .copied()
}

/// Whether `codec` names an element type (bytes and untyped data match anything).
fn typed(codec: Codec) -> bool {
    matches!(codec, Codec::Array(d) if d != Dtype::U8)
}

fn type_name(c: Codec) -> String {
    match c {
        Codec::Array(d) => format!("{d:?}").to_lowercase(),
        other => format!("{other:?}"),
    }
}

/// Refuses a message from `peer` stamped (`codec`, `signature`) where a receive expects
/// (`expect_codec`, `expect_signature`), naming both sides.
///
/// # Errors
/// [`Error::CollectiveMismatch`] or [`Error::TypeMismatch`].
pub(crate) fn check(
    expect_codec: Codec,
    expect_signature: Signature,
    peer: usize,
    codec: Codec,
    signature: Signature,
) -> Result<()> {
    if !expect_signature.accepts(signature) {
        return Err(Error::CollectiveMismatch {
            rank: peer,
            theirs: signature.describe(),
            ours: expect_signature.describe(),
        });
    }
    if typed(codec) && typed(expect_codec) && codec != expect_codec {
        return Err(Error::TypeMismatch {
            rank: peer,
            sent: type_name(codec),
            expected: type_name(expect_codec),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_match_only_the_same_call() {
        let a = Signature::new(Collective::Allreduce, Dtype::F64, Some(8), 1);
        assert!(a.accepts(a));
        assert!(a.accepts(Signature::NONE));
        assert!(!a.accepts(Signature::new(Collective::Allreduce, Dtype::F64, Some(4), 1)));
        assert!(!a.accepts(Signature::new(Collective::Allreduce, Dtype::F64, Some(8), 4)));
        assert!(!a.accepts(Signature::new(Collective::Allreduce, Dtype::I32, Some(8), 1)));
        assert!(!a.accepts(Signature::new(Collective::Broadcast, Dtype::F64, Some(8), 0)));
        let v = Signature::new(Collective::Allgather, Dtype::U8, None, 0);
        assert!(v.accepts(Signature::new(Collective::Allgather, Dtype::U8, Some(3), 0)));
        assert_eq!(a.describe(), "allreduce of 8 f64 with sum");
        assert_eq!(v.describe(), "allgather of u8 elements");
        assert_eq!(
            Signature::new(Collective::Barrier, Dtype::U8, Some(0), 0).describe(),
            "barrier"
        );
    }

    #[test]
    fn a_mismatch_names_both_calls() {
        let ours = Signature::new(Collective::Allreduce, Dtype::F64, Some(8), 1);
        let theirs = Signature::new(Collective::Allreduce, Dtype::F64, Some(8), 4);
        let e = check(Codec::Raw, ours, 3, Codec::Raw, theirs).unwrap_err().to_string();
        assert!(e.contains("rank 3 called allreduce of 8 f64 with max"), "{e}");
        assert!(e.contains("this rank called allreduce of 8 f64 with sum"), "{e}");
    }
}
