//! Writing a data set's parts into a directory so that a failed job never leaves output
//! that looks complete, and old parts are never silently mixed with new ones (the save
//! modes of Spark's `DataFrameWriter`).
//!
//! Every worker writes its partitions under `DIR/_temporary-<job>/`; only once every worker
//! has written all of its parts are they renamed into `DIR` and a `_SUCCESS` marker written
//! last. A failed job removes its temporary files and leaves `DIR` as it was.
//!
//! | [`WriteMode`] | `DIR` holds files | parts named |
//! |---|---|---|
//! | `ErrorIfExists` (default) | refused, naming `DIR` | `part-00000` ... |
//! | `Overwrite` | old parts and `_SUCCESS` removed at commit (others kept) | `part-00000` ... |
//! | `Append` | kept | `part-00000-<job>` ...: never a name already taken |
//!
//! ```
//! use heddle_data::{Output, Session, WriteMode};
//! let s = Session::new(heddle_comm::solo(Default::default())?)?;
//! let dir = std::env::temp_dir().join(format!("heddle-doc-output-{}", std::process::id()));
//! s.range(0, 10).write_text(&dir)?;
//! assert!(s.range(0, 10).write_text(&dir).is_err()); // not empty: refused
//! s.range(0, 5).write_text(Output::new(&dir).mode(WriteMode::Overwrite))?;
//! assert!(dir.join("_SUCCESS").exists());
//! std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use heddle_comm::{Communicator, Op};

use crate::error::io;
use crate::{Error, Result};

/// What a write does when its directory already holds files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteMode {
    /// Refuse (the default).
    #[default]
    ErrorIfExists,
    /// Replace the old parts and marker, once the new ones are all written.
    Overwrite,
    /// Add new parts beside the old ones, under names not yet taken.
    Append,
}

impl FromStr for WriteMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<WriteMode> {
        match s {
            "errorifexists" | "error" => Ok(WriteMode::ErrorIfExists),
            "overwrite" => Ok(WriteMode::Overwrite),
            "append" => Ok(WriteMode::Append),
            other => Err(Error::InvalidArgument(format!(
                "mode {other:?} is not one of errorifexists, overwrite, append"
            ))),
        }
    }
}

/// Whether a write must be abandoned instead of committed (checked on each worker).
pub type Veto = Arc<dyn Fn() -> bool + Send + Sync>;

/// Where and how a data set is written: a directory and a [`WriteMode`]. A path converts
/// into one with the default mode.
#[derive(Clone)]
pub struct Output {
    dir: PathBuf,
    mode: WriteMode,
    pub(crate) veto: Option<Veto>,
}

impl Output {
    /// `dir`, refusing it if it holds files.
    pub fn new(dir: impl AsRef<Path>) -> Output {
        Output { dir: dir.as_ref().to_path_buf(), mode: WriteMode::default(), veto: None }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The same directory with `mode`.
    pub fn mode(mut self, mode: WriteMode) -> Output {
        self.mode = mode;
        self
    }

    /// Abandons the write, as a failed one, if `veto` says so once the parts are written
    /// (a front end whose functions report failures aside, as the Python package does);
    /// a checkpointed stream's sink takes no more checkpoints once it says so.
    pub fn veto(mut self, veto: Veto) -> Output {
        self.veto = Some(veto);
        self
    }
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Output")
            .field("dir", &self.dir)
            .field("mode", &self.mode)
            .field("veto", &self.veto.is_some())
            .finish()
    }
}

impl<P: AsRef<Path>> From<P> for Output {
    fn from(dir: P) -> Output {
        Output::new(dir)
    }
}

/// The name of a marker of a complete output.
pub const SUCCESS: &str = "_SUCCESS";
const TEMPORARY: &str = "_temporary-";

/// One write in progress on this worker (every worker makes one, collectively): the
/// data set writers use it, and so can a writer of its own (the Python package's
/// `write_parquet`): write each partition to [`Commit::temp_path`], then
/// [`Commit::finish`].
pub struct Commit {
    dir: PathBuf,
    tmp: PathBuf,
    tag: String,
    mode: WriteMode,
    veto: Option<Veto>,
}

impl std::fmt::Debug for Commit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Commit")
            .field("dir", &self.dir)
            .field("tmp", &self.tmp)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl Commit {
    /// Checks the directory against the mode and makes the job's temporary directory
    /// (collective: every worker calls it).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a directory that holds files under
    /// [`WriteMode::ErrorIfExists`]; I/O errors naming the directory.
    pub fn begin(comm: &Communicator, out: &Output) -> Result<Commit> {
        let dir = out.dir.clone();
        // Every worker looks before any writes, so all see the same directory.
        let held = held_files(&dir)?;
        let mut tag = [if comm.rank() == 0 { rand_tag() } else { 0 }];
        comm.allreduce(&mut tag, Op::Max)?;
        let tag = format!("{:012x}", tag[0] & 0xffff_ffff_ffff);
        if out.mode == WriteMode::ErrorIfExists && !held.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "output directory {} already holds {} file(s) (such as {}): remove them, \
                 or write with mode overwrite or append",
                dir.display(),
                held.len(),
                held[0]
            )));
        }
        let tmp = dir.join(format!("{TEMPORARY}{tag}"));
        std::fs::create_dir_all(&tmp).map_err(|e| io(&tmp, e))?;
        Ok(Commit { dir, tmp, tag, mode: out.mode, veto: out.veto.clone() })
    }

    /// Where partition `i` is written until the commit (`suffix`: an extension such as
    /// `.parquet`).
    pub fn temp_path(&self, i: u32, suffix: &str) -> PathBuf {
        self.tmp.join(format!("part-{i:05}{suffix}"))
    }

    fn final_path(&self, i: u32, suffix: &str) -> PathBuf {
        match self.mode {
            WriteMode::Append => self.dir.join(format!("part-{i:05}-{}{suffix}", self.tag)),
            _ => self.dir.join(format!("part-{i:05}{suffix}")),
        }
    }

    /// Ends the write (collective): if `written` (this worker's outcome, with the
    /// partitions it wrote) is `Ok` on every worker, moves every part into place, then
    /// writes `_SUCCESS`; otherwise removes the temporary files and returns the error.
    ///
    /// # Errors
    /// This worker's error, or a failure of another worker or of the commit.
    pub fn finish(
        &self,
        comm: &Communicator,
        written: Result<Vec<u32>>,
        suffix: &str,
    ) -> Result<()> {
        let result = self.agree_and_move(comm, written, suffix);
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
        result
    }

    fn agree_and_move(
        &self,
        comm: &Communicator,
        written: Result<Vec<u32>>,
        suffix: &str,
    ) -> Result<()> {
        let mine = written?;
        if self.veto.as_ref().is_some_and(|v| v()) {
            return Err(Error::InvalidArgument(format!(
                "the write of {} was abandoned",
                self.dir.display()
            )));
        }
        // Every worker wrote its parts (a failed one would have aborted the job).
        comm.barrier()?;
        if self.mode == WriteMode::Overwrite && comm.rank() == 0 {
            for old in held_files(&self.dir)? {
                if old.starts_with("part-") || old == SUCCESS {
                    let p = self.dir.join(&old);
                    std::fs::remove_file(&p).map_err(|e| io(&p, e))?;
                }
            }
        }
        comm.barrier()?;
        for i in mine {
            let (from, to) = (self.temp_path(i, suffix), self.final_path(i, suffix));
            std::fs::rename(&from, &to).map_err(|e| io(&to, e))?;
        }
        comm.barrier()?;
        if comm.rank() == 0 {
            let _ = std::fs::remove_dir(&self.tmp);
            let marker = self.dir.join(SUCCESS);
            std::fs::write(&marker, b"").map_err(|e| io(&marker, e))?;
        }
        // Return once the output is complete, on every worker.
        comm.barrier()?;
        Ok(())
    }
}

/// The names in `dir` other than temporary directories of writes (none if it does not
/// exist).
fn held_files(dir: &Path) -> Result<Vec<String>> {
    match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(io(dir, e)),
        Ok(entries) => {
            let mut names: Vec<String> = entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with(TEMPORARY))
                .collect();
            names.sort();
            Ok(names)
        }
    }
}

/// Creates a part file: a new file (never one that exists, nor through a symlink), with
/// the permissions the user's umask gives, as output of any tool has.
pub(crate) fn create_part(path: &Path) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| io(path, e))
}

fn rand_tag() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (nanos ^ u64::from(std::process::id()).rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}
