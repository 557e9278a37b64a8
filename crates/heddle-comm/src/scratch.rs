//! Scratch directories: where spill and sort run files live, one private directory per
//! sorter and spill directory, removed with everything in it when the last user drops it.
//!
//! A [`ScratchDir`] is `ROOT/heddle-scratch-<pid>-<n>-<nanos>`, mode 0700, made in one of the
//! spill directories the user listed (`ROOT`). Nothing of it outlives the job on any exit
//! path:
//!
//! * dropped normally (success, error, a half-read stream): removed at once;
//! * the process exits without dropping it (`std::process::exit`, Python's interpreter
//!   exit): removed by an `atexit` handler;
//! * the process is killed: a worker started by `heddle run` registers each scratch
//!   directory in its job directory (`HEDDLE_JOB_DIR`), and the launcher removes every
//!   registered one when the job ends;
//! * anything still left (the launcher itself was killed): the first scratch directory made
//!   in a root reaps that root's scratch directories of this user whose process is gone.
//!
//! ```
//! let root = std::env::temp_dir();
//! let dir = heddle_comm::scratch::ScratchDir::create(&root)?;
//! let (path, _file) = dir.create_file("run-0")?;
//! assert!(path.starts_with(dir.path()));
//! let kept = dir.path().to_owned();
//! drop(dir);
//! assert!(!kept.exists());
//! # Ok::<(), std::io::Error>(())
//! ```

use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::private;
use crate::transport::shm::process_alive;

/// Name prefix of every scratch directory.
pub const SCRATCH_PREFIX: &str = "heddle-scratch-";
/// Name prefix of a scratch directory's registration in the job directory.
pub const REGISTRATION_PREFIX: &str = "scratch-";
/// The variable through which `heddle run` tells workers their job directory.
pub const JOB_DIR_VAR: &str = "HEDDLE_JOB_DIR";

static NEXT: AtomicU64 = AtomicU64::new(0);
/// Scratch directories (and their registrations) not yet removed, for the exit handler.
static LIVE: Mutex<Vec<(PathBuf, Option<PathBuf>)>> = Mutex::new(Vec::new());
/// Roots already reaped by this process.
static REAPED: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
static AT_EXIT: Once = Once::new();

/// A private directory for run files, removed with its contents when dropped.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
    registration: Option<PathBuf>,
}

impl ScratchDir {
    /// Makes a new scratch directory in `root` (which must exist), after reaping `root`'s
    /// stale scratch directories once per process.
    ///
    /// # Errors
    /// The operating system's error if the directory cannot be made (the caller names
    /// `root` in its message).
    pub fn create(root: &Path) -> io::Result<ScratchDir> {
        reap_once(root);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let mut attempt = 0;
        // Registered before it exists, so a worker killed between the two still leaves
        // the launcher a registration to clean up after.
        let (path, registration) = loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = root.join(format!("{SCRATCH_PREFIX}{}-{n}-{nanos:08x}", std::process::id()));
            let registration = register(&path);
            match private::create_dir(&path) {
                Ok(()) => break (path, registration),
                Err(e) => {
                    if let Some(r) = &registration {
                        let _ = std::fs::remove_file(r);
                    }
                    if e.kind() != io::ErrorKind::AlreadyExists || attempt >= 16 {
                        return Err(e);
                    }
                    attempt += 1;
                }
            }
        };
        AT_EXIT.call_once(|| {
            // SAFETY: registers a plain `extern "C" fn` with no captured state.
            unsafe { libc::atexit(remove_live_at_exit) };
        });
        LIVE.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((path.clone(), registration.clone()));
        Ok(ScratchDir { path, registration })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates the private file `name` in this directory; returns its path and the file,
    /// open for reading and writing.
    ///
    /// # Errors
    /// The operating system's error (`AlreadyExists` if the name is taken).
    pub fn create_file(&self, name: &str) -> io::Result<(PathBuf, File)> {
        let path = self.path.join(name);
        let file = private::create_file(&path)?;
        Ok((path, file))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        LIVE.lock().unwrap_or_else(PoisonError::into_inner).retain(|(p, _)| p != &self.path);
        remove(&self.path, self.registration.as_deref());
    }
}

/// Removes a scratch directory, then its registration — only once the directory is gone,
/// so that the launcher still removes what a dying process could not (a thread of it may
/// be writing a run into the directory as it exits).
fn remove(path: &Path, registration: Option<&Path>) {
    let mut gone = false;
    for _ in 0..3 {
        match std::fs::remove_dir_all(path) {
            Ok(()) => gone = true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => gone = true,
            Err(_) => continue,
        }
        break;
    }
    if !gone {
        let path = path.display();
        tracing::warn!(path = %path, "could not remove a scratch directory; its launcher will");
        return;
    }
    if let Some(r) = registration {
        let _ = std::fs::remove_file(r);
    }
}

extern "C" fn remove_live_at_exit() {
    // try_lock: never block process exit on a thread that died holding the lock.
    if let Ok(mut live) = LIVE.try_lock() {
        for (path, registration) in live.drain(..) {
            remove(&path, registration.as_deref());
        }
    }
}

/// Records `dir` in the job directory named by `HEDDLE_JOB_DIR`, if that is set and
/// private, so the launcher can remove it if this process is killed.
fn register(dir: &Path) -> Option<PathBuf> {
    let job_dir = PathBuf::from(std::env::var_os(JOB_DIR_VAR).filter(|v| !v.is_empty())?);
    if let Err(e) = private::check_dir(&job_dir) {
        tracing::warn!(
            "{JOB_DIR_VAR}: {e}; scratch directories are not registered with the launcher"
        );
        return None;
    }
    let name = dir.file_name()?.to_string_lossy().trim_start_matches(SCRATCH_PREFIX).to_string();
    let path = job_dir.join(format!("{REGISTRATION_PREFIX}{name}"));
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    let written = private::create_file(&path).and_then(|mut f| {
        use std::io::Write;
        f.write_all(absolute.as_os_str().as_encoded_bytes())
    });
    match written {
        Ok(()) => Some(path),
        Err(e) => {
            let path = path.display();
            tracing::warn!(path = %path, error = %e, "could not register a scratch directory");
            None
        }
    }
}

/// Removes every scratch directory registered in `job_dir` (and the registrations). Only
/// directories of this user whose name has the scratch prefix are removed, whatever a
/// registration says.
pub fn remove_registered(job_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(job_dir) else { return };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(REGISTRATION_PREFIX) {
            continue;
        }
        let registration = entry.path();
        if let Ok(target) = std::fs::read(&registration) {
            let target = PathBuf::from(
                <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(target),
            );
            let named =
                target.file_name().is_some_and(|n| n.to_string_lossy().starts_with(SCRATCH_PREFIX));
            let ours = std::fs::symlink_metadata(&target)
                .is_ok_and(|m| m.is_dir() && private::is_ours(&m));
            if named && ours {
                remove(&target, None);
            }
        }
        let _ = std::fs::remove_file(&registration);
    }
}

/// Removes `root`'s scratch directories of this user whose process is gone, once per
/// process and root.
fn reap_once(root: &Path) {
    {
        let mut reaped = REAPED.lock().unwrap_or_else(PoisonError::into_inner);
        if !reaped.get_or_insert_with(HashSet::new).insert(root.to_owned()) {
            return;
        }
    }
    reap_stale(root);
}

/// The owner's pid in a name `PREFIX<pid>-...` (scratch and job directories).
pub fn owner_pid(name: &str, prefix: &str) -> Option<u32> {
    name.strip_prefix(prefix)?.split('-').next()?.parse().ok()
}

/// Removes `root`'s scratch directories of this user whose process is gone; returns how
/// many it removed.
pub fn reap_stale(root: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(root) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = owner_pid(&name, SCRATCH_PREFIX) else {
            continue;
        };
        let ours = std::fs::symlink_metadata(entry.path())
            .is_ok_and(|m| m.is_dir() && private::is_ours(&m));
        if ours && pid != std::process::id() && !process_alive(pid) {
            remove(&entry.path(), None);
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_scratch_dir_is_private_and_removed_with_its_files() {
        let root = std::env::temp_dir();
        let dir = ScratchDir::create(&root).unwrap();
        let (path, _f) = dir.create_file("x").unwrap();
        assert_eq!(std::fs::metadata(dir.path()).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let kept = dir.path().to_owned();
        drop(dir);
        assert!(!kept.exists());
    }

    #[test]
    fn stale_dirs_of_dead_processes_are_reaped_and_live_ones_kept() {
        let root = std::env::temp_dir().join(format!("heddle-scratch-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        private::create_dir(&root).unwrap();
        // A pid that cannot be alive (above the kernel's pid_max limit of 2^22).
        let dead = root.join(format!("{SCRATCH_PREFIX}{}-0-0", (1u32 << 22) + 7));
        let alive = root.join(format!("{SCRATCH_PREFIX}1-0-0"));
        let other = root.join("heddle-scratch-notapid");
        for d in [&dead, &alive, &other] {
            private::create_dir(d).unwrap();
        }
        std::fs::write(dead.join("run"), b"x").unwrap();
        assert_eq!(reap_stale(&root), 1);
        assert!(!dead.exists() && alive.exists() && other.exists());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn registered_dirs_are_removed_by_the_job_dir_owner() {
        let base = std::env::temp_dir().join(format!("heddle-scratch-reg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        private::create_dir(&base).unwrap();
        let (job, root) = (base.join("job"), base.join("root"));
        private::create_dir(&job).unwrap();
        private::create_dir(&root).unwrap();
        let target = root.join(format!("{SCRATCH_PREFIX}123-4-5"));
        private::create_dir(&target).unwrap();
        std::fs::write(target.join("run"), b"x").unwrap();
        let decoy = root.join("precious");
        private::create_dir(&decoy).unwrap();
        std::fs::write(
            job.join(format!("{REGISTRATION_PREFIX}a")),
            target.as_os_str().as_encoded_bytes(),
        )
        .unwrap();
        std::fs::write(
            job.join(format!("{REGISTRATION_PREFIX}b")),
            decoy.as_os_str().as_encoded_bytes(),
        )
        .unwrap();
        remove_registered(&job);
        assert!(!target.exists(), "the registered scratch directory is removed");
        assert!(decoy.exists(), "a registration naming anything else is ignored");
        assert_eq!(std::fs::read_dir(&job).unwrap().count(), 0);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
