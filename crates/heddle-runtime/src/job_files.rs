//! The files of one job, owned by its launcher: a private job directory, and on every exit
//! the removal of whatever the workers left behind.
//!
//! The job directory is `$XDG_RUNTIME_DIR/heddle-job-<launcher pid>-<id>` (else in the system
//! temp directory), mode 0700. Workers learn it from `HEDDLE_JOB_DIR` and register there each
//! scratch directory they make for spill and sort runs ([`heddle_comm::scratch`]). When the
//! job ends — success, a failed or killed worker, Ctrl-C or SIGTERM to the launcher — the
//! launcher removes every registered scratch directory, the job's shared-memory segments and
//! the job directory. At start it reaps what jobs of this user whose launcher is gone (killed
//! with SIGKILL) left behind.

use std::path::{Path, PathBuf};

use heddle_comm::{private, scratch};

use crate::bootstrap::{segment_prefix, SHM_DIR};
use crate::{Error, Result};

const JOB_DIR_PREFIX: &str = "heddle-job-";

/// A job's directory and the names of its segments, removed when dropped.
#[derive(Debug)]
pub(crate) struct JobFiles {
    dir: PathBuf,
    shm_prefix: String,
}

impl JobFiles {
    /// Reaps stale jobs' leftovers, then makes this job's directory.
    ///
    /// # Errors
    /// [`Error::Io`] naming the directory if it cannot be made.
    pub(crate) fn create(token: &str) -> Result<JobFiles> {
        let base = base_dir();
        reap_stale_jobs(&base);
        heddle_comm::transport::shm::reap_stale(Path::new(SHM_DIR));
        let id = &crate::control::mac(token, "job")[..12];
        let dir = base.join(format!("{JOB_DIR_PREFIX}{}-{id}", std::process::id()));
        private::create_dir(&dir)
            .map_err(|e| Error::io(format!("making the job directory {}", dir.display()), e))?;
        Ok(JobFiles { dir, shm_prefix: segment_prefix(token) })
    }

    /// The job directory (`HEDDLE_JOB_DIR` of the workers).
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for JobFiles {
    fn drop(&mut self) {
        scratch::remove_registered(&self.dir);
        remove_segments(&self.shm_prefix);
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            tracing::warn!(
                path = %self.dir.display(),
                error = %e,
                "could not remove the job directory"
            );
        }
    }
}

/// `$XDG_RUNTIME_DIR` when it is a directory of this user, else the system temp directory.
pub(crate) fn base_dir() -> PathBuf {
    if let Some(d) =
        std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()).map(PathBuf::from)
    {
        if std::fs::symlink_metadata(&d).is_ok_and(|m| m.is_dir() && private::is_ours(&m)) {
            return d;
        }
    }
    std::env::temp_dir()
}

/// Removes the job directories in `base` of this user whose launcher is gone, with the
/// scratch directories registered in them.
fn reap_stale_jobs(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = scratch::owner_pid(&name, JOB_DIR_PREFIX) else {
            continue;
        };
        let path = entry.path();
        if pid == std::process::id()
            || heddle_comm::transport::shm::process_alive(pid)
            || private::check_dir(&path).is_err()
        {
            continue;
        }
        scratch::remove_registered(&path);
        let _ = std::fs::remove_dir_all(&path);
    }
}

/// Removes this user's segments named `prefix*` in `/dev/shm` (those a worker made but never
/// unlinked because it died during start-up).
fn remove_segments(prefix: &str) {
    let Ok(entries) = std::fs::read_dir(SHM_DIR) else { return };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(prefix)
            && std::fs::symlink_metadata(entry.path())
                .is_ok_and(|m| m.is_file() && private::is_ours(&m))
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
