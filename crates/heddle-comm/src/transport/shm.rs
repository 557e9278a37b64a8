//! Shared-memory segments in `/dev/shm`: one per worker, holding one incoming ring per peer
//! and the worker's broadcast area and doorbell.
//!
//! A worker creates its segment before it registers, so every same-host peer can map it
//! once the peer table is known, and unlinks it once all peers are connected (the mapping
//! stays valid; nothing is left in `/dev/shm` even if the job is killed later).
//!
//! A segment is private: created exclusively with mode 0600 (whatever the umask), never
//! through a symlink, and a peer maps it only after checking that it is a regular file owned
//! by the same user with no group or other permissions ([`crate::private`]). Another local
//! user can neither read a job's traffic nor write frames into its rings.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::bcast_area::{Area, AREA_BYTES};
use super::doorbell::Doorbell;
use super::region::Region;
use super::ring::{ring_bytes, RingConsumer, RingProducer};
use crate::{private, Error, Result};

const MAGIC: u64 = u64::from_le_bytes(*b"HEDDLSHM");
const PREAMBLE: usize = 4096;
/// The owner's doorbell, in the preamble after the identifying words.
const DOORBELL_AT: usize = 128;

/// A peer's segment as this worker maps it.
pub(crate) struct PeerSegment {
    /// The ring this worker writes into.
    pub(crate) ring: RingProducer,
    /// The owner's process.
    pub(crate) pid: u32,
    /// The owner's broadcast area.
    pub(crate) area: Area,
    /// The owner's doorbell.
    pub(crate) bell: Doorbell,
}

/// Ring geometry shared by every segment of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingShape {
    /// Number of peers (rings) in a segment: the world size.
    pub world: usize,
    /// Buffers per ring (the credit window).
    pub slots: usize,
    /// Bytes per buffer.
    pub slot_bytes: usize,
}

impl RingShape {
    fn segment_bytes(&self) -> usize {
        self.area_offset() + AREA_BYTES
    }
    /// After the rings, page-aligned.
    fn area_offset(&self) -> usize {
        (PREAMBLE + self.world * ring_bytes(self.slots, self.slot_bytes)).next_multiple_of(4096)
    }
    fn ring_offset(&self, source: usize) -> usize {
        PREAMBLE + source * ring_bytes(self.slots, self.slot_bytes)
    }
}

/// This worker's own segment: where same-host peers write frames addressed to it.
#[derive(Debug)]
pub struct ShmSegment {
    region: Arc<Region>,
    path: PathBuf,
    shape: RingShape,
    linked: bool,
}

impl ShmSegment {
    /// Creates the private segment file at `path` (which must not exist) and maps it.
    ///
    /// # Errors
    /// [`Error::Io`] if the file cannot be created, sized or mapped (is `/dev/shm` full?).
    pub fn create(path: &Path, shape: RingShape) -> Result<ShmSegment> {
        let ctx = || format!("creating shared-memory segment {}", path.display());
        let file = private::create_file(path).map_err(|e| Error::io(ctx(), e))?;
        let mut seg = ShmSegment {
            region: Arc::new(Region::heap(0)),
            path: path.to_owned(),
            shape,
            linked: true,
        };
        file.set_len(shape.segment_bytes() as u64).map_err(|e| Error::io(ctx(), e))?;
        // SAFETY: the file is ours, freshly created; peers only map it after we register.
        let map = unsafe { memmap2::MmapMut::map_mut(&file) }.map_err(|e| Error::io(ctx(), e))?;
        seg.region = Arc::new(Region::mapped(map));
        let words = [
            MAGIC,
            shape.world as u64,
            shape.slots as u64,
            shape.slot_bytes as u64,
            u64::from(std::process::id()),
        ];
        for (i, w) in words.iter().enumerate() {
            // SAFETY: inside the preamble, 8-aligned.
            unsafe { std::ptr::write(seg.region.at(i * 8) as *mut u64, *w) };
        }
        Ok(seg)
    }

    /// The file path (a peer maps it with `ShmSegment::producer_to`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// This worker's doorbell (it sleeps on it, its same-host peers ring it).
    pub(crate) fn doorbell(&self) -> Doorbell {
        Doorbell::new(self.region.clone(), DOORBELL_AT)
    }

    /// This worker's broadcast area (it writes, its same-host peers read).
    pub(crate) fn area(&self) -> Area {
        Area::new(self.region.clone(), self.shape.area_offset())
    }

    /// Reading end of the ring that `source` writes into.
    pub(crate) fn consumer(&self, source: usize) -> RingConsumer {
        RingConsumer::new(
            self.region.clone(),
            self.shape.ring_offset(source),
            self.shape.slots,
            self.shape.slot_bytes,
            source,
        )
    }

    /// Maps a peer's segment at `path` and returns the writing end of the ring reserved
    /// for `my_rank`, with the owner's pid, broadcast area and doorbell.
    ///
    /// # Errors
    /// [`Error::Io`] if it cannot be opened; [`Error::NotPrivate`] if it is not a private file
    /// of this user; [`Error::Config`] if its geometry differs.
    pub(crate) fn producer_to(
        path: &Path,
        shape: RingShape,
        my_rank: usize,
    ) -> Result<PeerSegment> {
        let ctx = || format!("opening peer shared-memory segment {}", path.display());
        let file = private::open_owned(path, true)?;
        // SAFETY: the owner created and sized it before publishing its path.
        let map = unsafe { memmap2::MmapMut::map_mut(&file) }.map_err(|e| Error::io(ctx(), e))?;
        if map.len() != shape.segment_bytes() {
            return Err(Error::Config(format!(
                "segment {} has {} bytes, expected {}: do all workers use the same \
                 HEDDLE_BUFFER_BYTES and HEDDLE_WINDOW?",
                path.display(),
                map.len(),
                shape.segment_bytes()
            )));
        }
        let region = Arc::new(Region::mapped(map));
        let word = |i: usize| {
            // SAFETY: inside the preamble, 8-aligned.
            unsafe { std::ptr::read(region.at(i * 8) as *const u64) }
        };
        let expect = [MAGIC, shape.world as u64, shape.slots as u64, shape.slot_bytes as u64];
        if (0..4).any(|i| word(i) != expect[i]) {
            return Err(Error::Config(format!(
                "segment {} was made for another job or geometry",
                path.display()
            )));
        }
        let pid = word(4) as u32;
        Ok(PeerSegment {
            area: Area::new(region.clone(), shape.area_offset()),
            bell: Doorbell::new(region.clone(), DOORBELL_AT),
            ring: RingProducer::new(
                region,
                shape.ring_offset(my_rank),
                shape.slots,
                shape.slot_bytes,
            ),
            pid,
        })
    }

    /// Removes the file name; mappings stay valid.
    pub fn unlink(&mut self) {
        if std::mem::take(&mut self.linked) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for ShmSegment {
    fn drop(&mut self) {
        self.unlink();
    }
}

/// Removes the segments in `dir` (normally `/dev/shm`) named `heddle-*` that belong to this
/// user and whose owner process is gone (a job that was killed before its workers unlinked
/// them); returns how many it removed. Files of other users, and files that are not Heddle
/// segments, are left alone.
pub fn reap_stale(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with("heddle-") {
            continue;
        }
        let path = entry.path();
        let Ok(mut file) = private::open_owned(&path, false) else { continue };
        let mut preamble = [0u8; 40];
        if file.read_exact(&mut preamble).is_err() {
            continue;
        }
        let word = |i: usize| {
            u64::from_le_bytes(preamble[i * 8..i * 8 + 8].try_into().unwrap_or_default())
        };
        let pid = word(4);
        let stale = word(0) == MAGIC
            && u32::try_from(pid).is_ok_and(|p| p != std::process::id() && !process_alive(p));
        if stale && std::fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Whether a process is still alive (same PID namespace).
pub fn process_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}
