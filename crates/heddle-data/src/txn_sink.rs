//! The two-phase file sink of checkpointed streams (Flink's `FileSink`): each partition
//! writes into a hidden in-progress file; at a checkpoint the file is synced and closed
//! (pre-commit) and a new one begins; when the checkpoint completes everywhere, the closed
//! files are renamed to their final names (commit). A restored job commits what its
//! checkpoint pre-committed and deletes in-progress files written after it (their
//! records are replayed), so every record is published exactly once. It numbers its new
//! files after the ones its checkpoint holds, so a run resumed from the same checkpoint
//! again (the first resumed run failed too) never takes such a run's unfinished file for
//! one the checkpoint pre-committed, whatever the attempt numbers.
//!
//! ```text
//! .part-00003.a1-7.inprogress   partition 3, attempt 1, its 7th file: being written
//! part-00003-000000000012       partition 3's records up to checkpoint 12: committed
//! ```

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use heddle_task::{Compute, Context, Result};
use serde::{Deserialize, Serialize};

use crate::error::io;
use crate::output::Veto;
use crate::sinks::PartWriter;

/// Writes one record to a part file.
pub(crate) type WriteFn<T> = Arc<dyn Fn(&mut PartWriter, T) -> std::io::Result<()> + Send + Sync>;

/// A file closed at a checkpoint and not yet committed.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pending {
    checkpoint: u64,
    /// File names in the output directory.
    temp: String,
    part: String,
}

/// One partition of a two-phase file sink.
pub(crate) struct TxnSink<T> {
    pub(crate) dir: PathBuf,
    pub(crate) write: WriteFn<T>,
    pub(crate) attempt: u32,
    pub(crate) files: u64,
    pub(crate) current: Option<(String, PartWriter)>,
    pending: Vec<Pending>,
    restored: bool,
    /// Says the run has failed (records were lost before the sink): no more checkpoints.
    veto: Option<Veto>,
}

impl<T> TxnSink<T> {
    pub(crate) fn new(
        dir: &Path,
        write: WriteFn<T>,
        attempt: u32,
        veto: Option<Veto>,
    ) -> TxnSink<T> {
        TxnSink {
            dir: dir.to_path_buf(),
            write,
            attempt,
            files: 0,
            current: None,
            pending: Vec::new(),
            restored: false,
            veto,
        }
    }

    fn fail(&self, name: &str, e: std::io::Error) -> heddle_task::Error {
        io(&self.dir.join(name), e).into_task()
    }

    /// Renames every pending file of checkpoints up to `checkpoint` into place.
    fn commit(&mut self, checkpoint: u64) -> Result<()> {
        let mut moved = false;
        let mut keep = Vec::new();
        for p in std::mem::take(&mut self.pending) {
            if p.checkpoint > checkpoint {
                keep.push(p);
                continue;
            }
            let (temp, part) = (self.dir.join(&p.temp), self.dir.join(&p.part));
            match std::fs::rename(&temp, &part) {
                Ok(()) => moved = true,
                // Committed before (a restored job commits again): nothing to do.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && part.exists() => {}
                Err(e) => return Err(self.fail(&p.temp, e)),
            }
        }
        self.pending = keep;
        if moved {
            File::open(&self.dir).and_then(|d| d.sync_all()).map_err(|e| self.fail(".", e))?;
        }
        Ok(())
    }

    /// Deletes this partition's in-progress files that no checkpoint holds (an earlier
    /// attempt's records after its last checkpoint, which the job replays).
    fn clean(&self, index: u32) -> Result<()> {
        let prefix = format!(".part-{index:05}.");
        let entries = std::fs::read_dir(&self.dir).map_err(|e| self.fail(".", e))?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            let held = self.pending.iter().any(|p| p.temp == name);
            if name.starts_with(&prefix) && name.ends_with(".inprogress") && !held {
                std::fs::remove_file(entry.path()).map_err(|e| self.fail(&name, e))?;
            }
        }
        Ok(())
    }
}

impl<T: Send + 'static> Compute for TxnSink<T> {
    type In = T;
    type Out = ();

    fn prepare(&mut self, ctx: &mut Context<'_, ()>) -> Result<()> {
        let index = ctx.index();
        if !self.restored {
            // A fresh start must not mix with an earlier run's committed output.
            let prefix = format!("part-{index:05}-");
            let entries = std::fs::read_dir(&self.dir).map_err(|e| self.fail(".", e))?;
            if let Some(old) = entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .find(|n| n.starts_with(&prefix))
            {
                return Err(self.fail(
                    &old,
                    std::io::Error::other(
                        "the output directory holds committed output of an earlier run and \
                         there is no checkpoint to resume it from; remove it or write elsewhere",
                    ),
                ));
            }
        }
        self.clean(index)
    }

    fn execute(&mut self, ctx: &mut Context<'_, ()>, x: T) -> Result<()> {
        if self.current.is_none() {
            self.files += 1;
            let name =
                format!(".part-{:05}.a{}-{}.inprogress", ctx.index(), self.attempt, self.files);
            let file = heddle_comm::private::create_file(&self.dir.join(&name))
                .map_err(|e| self.fail(&name, e))?;
            self.current = Some((name, BufWriter::with_capacity(256 << 10, file)));
        }
        let (name, out) = self.current.as_mut().expect("opened above");
        (self.write)(out, x).map_err(|e| io(&self.dir.join(name.as_str()), e).into_task())
    }

    fn snapshot(&mut self, ctx: &mut Context<'_, ()>, checkpoint: u64) -> Result<Option<Vec<u8>>> {
        if self.veto.as_ref().is_some_and(|v| v()) {
            // Records before this barrier may be missing: the checkpoint must not complete.
            return Err(heddle_task::Error::Task {
                task: ctx.info().to_string(),
                message: format!("checkpoint {checkpoint} is not taken: the run has failed"),
            });
        }
        if let Some((temp, out)) = self.current.take() {
            let file = out.into_inner().map_err(|e| self.fail(&temp, e.into_error()))?;
            file.sync_all().map_err(|e| self.fail(&temp, e))?;
            // Its name too must survive a crash: the checkpoint will point at it.
            File::open(&self.dir).and_then(|d| d.sync_all()).map_err(|e| self.fail(".", e))?;
            let part = format!("part-{:05}-{checkpoint:012}", ctx.index());
            self.pending.push(Pending { checkpoint, temp, part });
        }
        bincode::serialize(&self.pending).map(Some).map_err(|e| {
            heddle_task::Error::Graph(format!("a file sink's pending files do not encode: {e}"))
        })
    }

    fn committed(&mut self, _: &mut Context<'_, ()>, checkpoint: u64) -> Result<()> {
        self.commit(checkpoint)
    }

    fn restore(&mut self, ctx: &mut Context<'_, ()>, state: &[u8]) -> Result<()> {
        self.pending = bincode::deserialize(state).map_err(|e| {
            heddle_task::Error::Graph(format!(
                "{}: its checkpointed pending files do not decode: {e}",
                ctx.info()
            ))
        })?;
        self.restored = true;
        // `.part-NNNNN.aA-N.inprogress`: go on after the highest N the checkpoint holds.
        let number =
            |temp: &str| temp.strip_suffix(".inprogress")?.rsplit('-').next()?.parse::<u64>().ok();
        self.files = self.pending.iter().filter_map(|p| number(&p.temp)).max().unwrap_or(0);
        // The checkpoint is complete: what it pre-committed is committed.
        self.commit(u64::MAX)
    }
}

/// Makes `dir` for the sink's output if it is missing.
pub(crate) fn prepare_output(dir: &Path) -> crate::Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))
}
