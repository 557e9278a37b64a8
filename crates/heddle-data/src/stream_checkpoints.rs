//! Which streams checkpoint, where and how often: set on the session
//! ([`Session::with_checkpoints`]) or by `heddle run --checkpoint-interval S
//! [--checkpoint-dir DIR]` (`HEDDLE_CHECKPOINT_INTERVAL_S`, `HEDDLE_CHECKPOINT_DIR`).
//!
//! With checkpoints a stream's sources replay from their positions, its keyed state and
//! windows are restored, and its file and Redis sinks commit at each checkpoint (two
//! phases), so a job restarted after a failure (`--restarts N`) writes every record
//! exactly once through them. Callbacks (`Stream::run`) and sockets see the records after
//! the last checkpoint again (at least once). The n-th checkpointed stream a session runs
//! (from the second on) checkpoints in a subdirectory `stream-<n>`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use heddle_comm::settings;
use heddle_task::Checkpointing;

use crate::{Error, Result, Session};

/// The checkpoints the environment asks for: on when `HEDDLE_CHECKPOINT_INTERVAL_S` is
/// set, in `HEDDLE_CHECKPOINT_DIR` (default: [`default_dir`]).
pub(crate) fn from_env() -> Result<Option<Checkpointing>> {
    let Some(v) =
        std::env::var(settings::CHECKPOINT_INTERVAL_S.name).ok().filter(|v| !v.is_empty())
    else {
        return Ok(None);
    };
    let interval = settings::seconds(&settings::CHECKPOINT_INTERVAL_S, &v)?;
    let job = program_name();
    let dir = match std::env::var_os(settings::CHECKPOINT_DIR).filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => run_dir(&job)?,
    };
    let alignment_timeout = alignment_timeout_from_env()?;
    Ok(Some(Checkpointing { dir, job, interval: Some(interval), alignment_timeout }))
}

/// The alignment timeout of `HEDDLE_CHECKPOINT_ALIGNMENT_TIMEOUT_S` (unset: the default,
/// [`Checkpointing::DEFAULT_ALIGNMENT_TIMEOUT`]).
///
/// # Errors
/// A value that is neither seconds nor `off`.
pub fn alignment_timeout_from_env() -> Result<Option<Duration>> {
    match std::env::var(settings::CHECKPOINT_ALIGNMENT_TIMEOUT_S.name) {
        Ok(v) if !v.is_empty() => Ok(settings::alignment_timeout(&v)?),
        _ => Ok(Some(Checkpointing::DEFAULT_ALIGNMENT_TIMEOUT)),
    }
}

/// The default checkpoint directory of job `job` in this run: [`default_dir`] of `job` and,
/// under `heddle run`, the run's id (the same in every attempt, so that a restarted job
/// finds it and another run of the program does not), its parent made private.
///
/// # Errors
/// A parent directory that cannot be made, or is not this user's alone.
pub fn run_dir(job: &str) -> Result<PathBuf> {
    let run = std::env::var("HEDDLE_RUN_ID").unwrap_or_default();
    let dir = default_dir(&if run.is_empty() { job.to_string() } else { format!("{job}-{run}") });
    private_parent(&dir)?;
    Ok(dir)
}

/// Makes the default directory's parent (`heddle-checkpoints-<uid>`, a name anyone could
/// take first) ours alone, or checks that it is.
fn private_parent(dir: &std::path::Path) -> Result<()> {
    let Some(parent) = dir.parent() else { return Ok(()) };
    match heddle_comm::private::create_dir(parent) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            return Err(crate::error::io(parent, e))
        }
        _ => {}
    }
    heddle_comm::private::check_dir(parent)
        .map_err(|e| Error::InvalidArgument(format!("the default checkpoint directory: {e}")))
}

/// The program's file name: the job's name unless given.
fn program_name() -> String {
    std::env::args_os()
        .next()
        .map(PathBuf::from)
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().to_string()))
        .unwrap_or_else(|| "heddle-job".into())
}

/// Where checkpoints go unless told: `heddle-checkpoints-<uid>/<job>` in the temporary
/// directory (private to this user); under `heddle run`, `<job>` is the program's name and
/// the run's id, and the directory is removed once the job has succeeded.
pub fn default_dir(job: &str) -> PathBuf {
    let uid = heddle_comm::private::effective_uid();
    std::env::temp_dir().join(format!("heddle-checkpoints-{uid}")).join(job)
}

impl Session {
    /// Checkpoints every stream this session runs every `interval` into `dir` (a local
    /// directory, or one every host shares), as job `job`; a stream finds the newest
    /// complete checkpoint there and resumes from it. `interval` `None`: only the last
    /// checkpoint, when the sources have all ended, which commits the sinks' output.
    ///
    /// ```
    /// use std::time::Duration;
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-ckpt-{}", std::process::id()));
    /// let out = dir.join("out");
    /// let s = s.with_checkpoints(dir.join("ckpt"), Some(Duration::from_millis(50)), "evens")?;
    /// let evens = s.stream_generate(None, Some(1000), |i| i * 2);
    /// evens.write_lines(&out, None)?; // part files appear as checkpoints complete
    /// let mut lines = 0;
    /// for f in std::fs::read_dir(&out)? {
    ///     lines += std::fs::read_to_string(f?.path())?.lines().count();
    /// }
    /// assert_eq!(lines, 1000);
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] once data sets exist, or for a zero interval.
    pub fn with_checkpoints(
        self,
        dir: impl Into<PathBuf>,
        interval: Option<Duration>,
        job: &str,
    ) -> Result<Session> {
        if interval.is_some_and(|i| i.is_zero()) {
            return Err(Error::InvalidArgument("a checkpoint interval must be above zero".into()));
        }
        let inner = Arc::try_unwrap(self.0).map_err(|_| {
            Error::InvalidArgument("set checkpoints before making data sets".into())
        })?;
        let checkpoints = Some(Checkpointing {
            dir: dir.into(),
            job: job.to_string(),
            interval,
            alignment_timeout: alignment_timeout_from_env()?,
        });
        Ok(Session(Arc::new(crate::session::Inner { checkpoints, ..inner })))
    }

    /// Sets how long a checkpoint of this session's streams aligns its barriers before it
    /// goes on unaligned, storing the records in flight (`None`: always aligned); after
    /// [`Session::with_checkpoints`]. The default is
    /// [`heddle_task::Checkpointing::DEFAULT_ALIGNMENT_TIMEOUT`], or
    /// `HEDDLE_CHECKPOINT_ALIGNMENT_TIMEOUT_S`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-align-{}", std::process::id()));
    /// let s = s.with_checkpoints(&dir, Some(Duration::from_secs(1)), "job")?;
    /// let s = s.with_alignment_timeout(None)?;
    /// assert_eq!(s.stream_checkpoints().unwrap().alignment_timeout, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] once data sets exist, or without checkpoints.
    pub fn with_alignment_timeout(self, timeout: Option<Duration>) -> Result<Session> {
        let mut inner = Arc::try_unwrap(self.0).map_err(|_| {
            Error::InvalidArgument("set checkpoints before making data sets".into())
        })?;
        let c = inner.checkpoints.as_mut().ok_or_else(|| {
            Error::InvalidArgument("set checkpoints (with_checkpoints) before their timeout".into())
        })?;
        c.alignment_timeout = timeout;
        Ok(Session(Arc::new(inner)))
    }

    /// The checkpoints streams take, if they do.
    pub fn stream_checkpoints(&self) -> Option<&Checkpointing> {
        self.0.checkpoints.as_ref()
    }
}
