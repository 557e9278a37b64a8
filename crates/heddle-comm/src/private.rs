//! Private files: everything Heddle creates — shared-memory segments, spill and run files,
//! scratch and job directories — is readable and writable by its owner only, whatever the
//! umask, and is never reached through a symbolic link.
//!
//! Files are created with `O_CREAT | O_EXCL | O_NOFOLLOW` and mode 0600, directories with
//! mode 0700; both are set again explicitly after creation, so a permissive umask (`000`)
//! cannot widen them. The side that opens something another process created checks that it
//! is a regular file (or directory) owned by this user with no group or other permission
//! bits, and refuses anything else with [`Error::NotPrivate`] naming the path.
//!
//! ```
//! use std::os::unix::fs::PermissionsExt;
//! let dir = std::env::temp_dir().join(format!("heddle-doc-private-{}", std::process::id()));
//! heddle_comm::private::create_dir(&dir)?;
//! let file = dir.join("data");
//! heddle_comm::private::create_file(&file)?;
//! assert_eq!(std::fs::metadata(&file)?.permissions().mode() & 0o777, 0o600);
//! assert_eq!(std::fs::metadata(&dir)?.permissions().mode() & 0o777, 0o700);
//! heddle_comm::private::open_owned(&file, false)?; // ours and private: accepted
//! std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644))?;
//! assert!(heddle_comm::private::open_owned(&file, false).is_err()); // readable by others
//! std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::{Error, Result};

/// Mode of every file Heddle creates.
pub const FILE_MODE: u32 = 0o600;
/// Mode of every directory Heddle creates.
pub const DIR_MODE: u32 = 0o700;

/// Creates `path`, which must not exist (not even as a dangling symlink), for reading and
/// writing by this user only.
///
/// # Errors
/// The operating system's error: `AlreadyExists` if anything is at `path`.
pub fn create_file(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))?;
    Ok(file)
}

/// Creates the directory `path` (its parent must exist; `path` must not) for this user only.
///
/// # Errors
/// The operating system's error: `AlreadyExists` if anything is at `path`.
pub fn create_dir(path: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().mode(DIR_MODE).create(path)?;
    // mkdir(2) never follows a final symlink, so `path` is the directory just made.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(DIR_MODE))
}

/// Opens an existing file that must be a regular file owned by this user with no group or
/// other permissions; symlinks are not followed.
///
/// # Errors
/// [`Error::Io`] if it cannot be opened; [`Error::NotPrivate`] naming the path if it is not a
/// private regular file of ours.
pub fn open_owned(path: &Path, write: bool) -> Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    let meta =
        file.metadata().map_err(|e| Error::io(format!("inspecting {}", path.display()), e))?;
    if !meta.is_file() {
        return Err(not_private(path, "it is not a regular file".into()));
    }
    check_meta(path, &meta)?;
    Ok(file)
}

/// Checks that `path` is a directory (not a symlink to one) owned by this user with no group
/// or other permissions.
///
/// # Errors
/// [`Error::Io`] if it cannot be inspected; [`Error::NotPrivate`] otherwise.
pub fn check_dir(path: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| Error::io(format!("inspecting {}", path.display()), e))?;
    if !meta.is_dir() {
        return Err(not_private(path, "it is not a directory".into()));
    }
    check_meta(path, &meta)
}

/// Why [`ensure_dir`] failed.
#[derive(Debug)]
pub enum EnsureDirError {
    /// A directory (`dir` or a missing parent) could not be inspected or made.
    Io(std::path::PathBuf, io::Error),
    /// `dir` exists but is not a private directory of this user's ([`check_dir`]).
    NotPrivate(Error),
}

/// Makes `dir` this user's alone if it is missing (missing parents too: 0700, less by the
/// umask); checks that it is ours and private if it exists, or if another process of this
/// host made it meanwhile.
///
/// # Errors
/// [`EnsureDirError`]: the directory that could not be made, or why `dir` is not private.
pub fn ensure_dir(dir: &Path) -> std::result::Result<(), EnsureDirError> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                let mut parents = std::fs::DirBuilder::new();
                parents.recursive(true).mode(DIR_MODE);
                parents.create(parent).map_err(|e| EnsureDirError::Io(parent.into(), e))?;
            }
            match create_dir(dir) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => ensure_dir(dir),
                other => other.map_err(|e| EnsureDirError::Io(dir.into(), e)),
            }
        }
        Err(e) => Err(EnsureDirError::Io(dir.into(), e)),
        Ok(_) => check_dir(dir).map_err(EnsureDirError::NotPrivate),
    }
}

/// Whether `meta` (from `lstat`) belongs to this user.
pub fn is_ours(meta: &std::fs::Metadata) -> bool {
    meta.uid() == effective_uid()
}

/// This process's effective user id.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

fn check_meta(path: &Path, meta: &std::fs::Metadata) -> Result<()> {
    let me = effective_uid();
    if meta.uid() != me {
        return Err(not_private(
            path,
            format!("it is owned by uid {}, not by this user (uid {me})", meta.uid()),
        ));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(not_private(
            path,
            format!("its mode is {:04o}: group or others may use it", meta.mode() & 0o7777),
        ));
    }
    Ok(())
}

fn not_private(path: &Path, detail: String) -> Error {
    Error::NotPrivate { path: path.to_owned(), detail }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d =
            std::env::temp_dir().join(format!("heddle-private-unit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        create_dir(&d).unwrap();
        d
    }

    #[test]
    fn files_are_created_exclusively_and_never_through_a_symlink() {
        let d = scratch("excl");
        let f = d.join("f");
        create_file(&f).unwrap();
        assert_eq!(create_file(&f).unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        let target = d.join("target");
        let link = d.join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(create_file(&link).is_err(), "a dangling symlink must not be followed");
        assert!(!target.exists());
        std::fs::write(&target, b"x").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        let err = open_owned(&link, false).unwrap_err().to_string();
        assert!(err.contains("link"), "{err}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn loose_modes_and_non_files_are_refused_with_the_path() {
        let d = scratch("loose");
        let f = d.join("f");
        create_file(&f).unwrap();
        open_owned(&f, true).unwrap();
        for mode in [0o640, 0o604, 0o666] {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = open_owned(&f, true).unwrap_err();
            assert!(matches!(err, Error::NotPrivate { .. }), "{err}");
            assert!(err.to_string().contains(&f.display().to_string()), "{err}");
        }
        check_dir(&d).unwrap();
        assert!(check_dir(&f).is_err());
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(matches!(check_dir(&d), Err(Error::NotPrivate { .. })));
        assert!(matches!(open_owned(&d, false), Err(Error::NotPrivate { .. })));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
