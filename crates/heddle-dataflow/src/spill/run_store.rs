//! [`RunStore`]: where an external sort's runs go — private scratch directories in the
//! spill directories, used in turn.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::{Error, Result};
use heddle_comm::scratch::ScratchDir;

use super::merge::RunFormat;
use super::run_file::{Run, RunWriter};

/// What to do about an unusable spill directory.
const LIST_ANOTHER: &str = "list another in SpillConfig::dirs (spill_dirs in Python)";

/// The spill directories of one external sort, and the private scratch directory (mode
/// 0700) it makes in each at its first run there. Runs go to the directories in turn.
///
/// ```
/// use heddle_dataflow::spill::RunStore;
/// let mut store = RunStore::new(vec![std::env::temp_dir()])?;
/// let mut writer = store.writer()?;
/// writer.push(b"apple", b"1")?;
/// writer.push(b"pear", b"2")?;
/// let (run, bytes) = writer.finish()?;
/// assert_eq!((run.records(), bytes), (2, 16 + 2 * 8 + 9 + 2));
/// # Ok::<(), heddle_dataflow::Error>(())
/// ```
pub struct RunStore {
    dirs: Vec<PathBuf>,
    scratch: Vec<Option<Arc<ScratchDir>>>,
    next_dir: usize,
}

impl RunStore {
    /// A store spilling to `dirs` in turn.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if `dirs` is empty or names something that is not a
    /// directory; [`Error::Io`] naming the directory if one does not exist or a file cannot
    /// be created in it (checked now, not at the first spill).
    pub fn new(dirs: Vec<PathBuf>) -> Result<RunStore> {
        if dirs.is_empty() {
            return Err(Error::InvalidArgument(
                "no spill directory is configured; list at least one in SpillConfig::dirs \
                 (spill_dirs in Python)"
                    .into(),
            ));
        }
        for dir in &dirs {
            check_dir(dir)?;
        }
        Ok(RunStore { scratch: vec![None; dirs.len()], dirs, next_dir: 0 })
    }

    /// A writer of a new run, in the next spill directory.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the directory if the scratch directory or the file cannot be
    /// made.
    pub fn writer(&mut self) -> Result<RunWriter> {
        let dir = self.next_scratch()?;
        RunWriter::create(&dir)
    }

    /// Writes `records` (in `format`'s order) as a new run; returns it and the bytes
    /// written.
    ///
    /// # Errors
    ///
    /// The first error of `records`, of encoding a record, or of writing the file.
    pub fn write_run<F: RunFormat>(
        &mut self,
        format: &mut F,
        records: impl IntoIterator<Item = Result<F::Record>>,
    ) -> Result<(Run, u64)> {
        let mut writer = self.writer()?;
        for record in records {
            format.write(&record?, &mut writer)?;
        }
        writer.finish()
    }

    /// The scratch directory for the next run (spill directories in turn).
    fn next_scratch(&mut self) -> Result<Arc<ScratchDir>> {
        let i = self.next_dir % self.dirs.len();
        self.next_dir += 1;
        if let Some(dir) = &self.scratch[i] {
            return Ok(dir.clone());
        }
        let dir = Arc::new(ScratchDir::create(&self.dirs[i]).map_err(|e| {
            Error::io(
                format!(
                    "making a private scratch directory in spill directory {} (fix its \
                     permissions or {LIST_ANOTHER})",
                    self.dirs[i].display()
                ),
                e,
            )
        })?);
        self.scratch[i] = Some(dir.clone());
        Ok(dir)
    }
}

impl fmt::Debug for RunStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunStore").field("dirs", &self.dirs).finish()
    }
}

fn check_dir(dir: &Path) -> Result<()> {
    let meta = fs::metadata(dir).map_err(|e| {
        Error::io(
            format!("spill directory {} is unusable (create it or {LIST_ANOTHER})", dir.display()),
            e,
        )
    })?;
    if !meta.is_dir() {
        return Err(Error::InvalidArgument(format!(
            "spill directory {} is not a directory; {LIST_ANOTHER}",
            dir.display()
        )));
    }
    let _probe = ScratchDir::create(dir).map_err(|e| {
        Error::io(
            format!(
                "spill directory {} is not writable (fix its permissions or \
                 {LIST_ANOTHER})",
                dir.display()
            ),
            e,
        )
    })?;
    Ok(())
}
