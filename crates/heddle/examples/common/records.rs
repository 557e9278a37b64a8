//! Terasort's records, shared by the examples that sort them: 100 bytes, the first 10 the
//! key; a seeded generator; an order-independent checksum; and a checked part writer.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

/// Bytes per record.
pub(crate) const RECORD: usize = 100;
/// Bytes of the key at the start of a record.
pub(crate) const KEY: usize = 10;

/// Record `i` of the seeded input: a random key, then the index and filler.
pub(crate) fn generate(seed: u64, i: u64) -> [u8; RECORD] {
    let mut x = (seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).wrapping_add(0x632B_E59B_D9B4_E019);
    let mut next = || {
        x ^= x >> 30;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 27;
        x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
        x
    };
    let mut r = [b'.'; RECORD];
    r[..8].copy_from_slice(&next().to_le_bytes());
    r[8..10].copy_from_slice(&next().to_le_bytes()[..2]);
    r[10..18].copy_from_slice(&i.to_le_bytes());
    r
}

/// A 64-bit hash of one record, eight bytes at a time; their sum is an order-independent
/// checksum.
pub(crate) fn record_hash(k: &[u8], v: &[u8]) -> u64 {
    let step = |h: u64, w: u64| (h ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    let mix = |h: u64, bytes: &[u8]| {
        let whole = bytes.chunks_exact(8);
        let tail = whole.remainder();
        let h = whole.fold(h, |h, c| step(h, u64::from_le_bytes(c.try_into().expect("8 bytes"))));
        if tail.is_empty() {
            return h;
        }
        let mut w = [0u8; 8];
        w[..tail.len()].copy_from_slice(tail);
        step(h, u64::from_le_bytes(w))
    };
    let h = mix(mix(0xcbf2_9ce4_8422_2325, k), v);
    (h ^ (h >> 32)).wrapping_mul(0xBF58_476D_1CE4_E5B9)
}

/// One sorted part as it streams out: written to its part file (raw records back to
/// back, if any) and checked on the way. The file is written under a hidden temporary
/// name and renamed to `part-NNNNN` at [`close`](Part::close); a part dropped unclosed
/// (the job failed) removes its temporary file, so no half-written part is left.
pub(crate) struct Part {
    /// The open temporary file, its path and the part's final path.
    file: Option<(BufWriter<std::fs::File>, PathBuf, PathBuf)>,
    pub(crate) count: u64,
    pub(crate) checksum: u64,
    pub(crate) ordered: bool,
    pub(crate) first: Option<[u8; KEY]>,
    pub(crate) last: Option<[u8; KEY]>,
}

impl Part {
    pub(crate) fn create(dir: Option<&std::path::Path>, index: usize) -> std::io::Result<Part> {
        let file = match dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)?;
                let name = format!("part-{index:05}");
                let pending = dir.join(format!(".{name}.pending-{}", std::process::id()));
                let file = BufWriter::new(std::fs::File::create(&pending)?);
                Some((file, pending, dir.join(name)))
            }
            None => None,
        };
        Ok(Part { file, count: 0, checksum: 0, ordered: true, first: None, last: None })
    }

    pub(crate) fn add(&mut self, k: &[u8; KEY], v: &[u8]) -> std::io::Result<()> {
        if let Some((f, _, _)) = &mut self.file {
            f.write_all(k)?;
            f.write_all(v)?;
        }
        self.ordered &= self.last.as_ref().is_none_or(|l| l <= k);
        self.first.get_or_insert(*k);
        self.last = Some(*k);
        self.count += 1;
        self.checksum = self.checksum.wrapping_add(record_hash(k, v));
        Ok(())
    }

    /// Flushes the part and gives it its final name.
    pub(crate) fn close(&mut self) -> std::io::Result<()> {
        if let Some((mut f, pending, path)) = self.file.take() {
            let done = f.flush().and_then(|()| std::fs::rename(&pending, &path));
            if done.is_err() {
                let _ = std::fs::remove_file(&pending);
            }
            done?;
        }
        Ok(())
    }
}

impl Drop for Part {
    fn drop(&mut self) {
        if let Some((_, pending, _)) = &self.file {
            let _ = std::fs::remove_file(pending);
        }
    }
}
