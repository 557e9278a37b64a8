//! Job token files: `heddle master --token-file F` writes one, `heddle worker --token-file
//! F` and `HEDDLE_JOB_TOKEN_FILE` read one. A token file is a secret: it is written with
//! mode 0600, and one that others may read or write is refused.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::{Error, Result};

/// Reads the token in `path`, refusing a file others may read or write. A file owned by
/// root and readable by its group is accepted (a Kubernetes Secret mounted with an
/// `fsGroup`); one owned by a third user is not.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("heddle-doc-token-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let f = dir.join("token");
/// heddle_runtime::token_file::write(&f, "s3cret")?;
/// assert_eq!(heddle_runtime::token_file::read(&f)?, "s3cret");
/// use std::os::unix::fs::PermissionsExt;
/// std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644))?;
/// assert!(heddle_runtime::token_file::read(&f).is_err());
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`Error::Io`] if it cannot be read; [`Error::Auth`] naming the file and its mode if it
/// is not private, or if it is empty.
pub fn read(path: &Path) -> Result<String> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::io(format!("reading the token file {}", path.display()), e))?;
    let mode = meta.mode() & 0o777;
    let me = heddle_comm::private::effective_uid();
    let owner_ok = meta.uid() == me || meta.uid() == 0;
    let group_ok = mode & 0o070 == 0 || meta.uid() == 0;
    if !meta.is_file() || !owner_ok || mode & 0o007 != 0 || !group_ok || mode & 0o022 != 0 {
        return Err(Error::Auth(format!(
            "the token file {} (mode {mode:04o}, owner uid {}) is not private: it must be a \
             file of this user (uid {me}) that nobody else can read or write (chmod 600 {})",
            path.display(),
            meta.uid(),
            path.display()
        )));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("reading the token file {}", path.display()), e))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(Error::Auth(format!("the token file {} is empty", path.display())));
    }
    Ok(token.to_string())
}

/// Writes `token` to `path` with mode 0600: whole, under a temporary name first, then
/// renamed over whatever was there.
///
/// # Errors
/// [`Error::Io`] naming the file.
pub fn write(path: &Path, token: &str) -> Result<()> {
    replace_private(path, format!("{token}\n").as_bytes())
        .map_err(|e| Error::io(format!("writing the token file {}", path.display()), e))
}

/// Puts `bytes` at `path` (mode 0600) whole: written under a temporary name, synced, then
/// renamed over whatever was there.
pub(crate) fn replace_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let attempt = || -> std::io::Result<()> {
        let mut f = heddle_comm::private::create_file(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    attempt().inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}
