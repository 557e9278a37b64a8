//! Checkpoints of an iterative job's loop state ([`LoopCheckpoints`]), so that a job
//! restarted after a failure (`heddle run --restarts N`) resumes from its last completed
//! checkpoint instead of from the start.
//!
//! The loop state (K-means' centers, a model's weights) is the same on every worker, so
//! rank 0 alone writes it, and on resume reads it and broadcasts it: the checkpoint
//! directory need only exist where rank 0 runs. Each checkpoint is one private file
//! (0600, in a 0700 directory), written whole under a temporary name, synced, then renamed,
//! so a crash leaves the previous checkpoint intact; the newest two are kept.
//!
//! # File format
//!
//! ```text
//! HEDDLE-LOOP-CHECKPOINT 1\n
//! {"job": "...", "state": "<Rust type>", "iteration": i, "bytes": n, "sha256": "..."}\n
//! <n bytes: the state, bincode>
//! ```

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{Error, Result, Session};

const MAGIC: &str = "HEDDLE-LOOP-CHECKPOINT 1";
/// Checkpoints kept in the directory; older ones are removed.
const KEEP: u64 = 2;

/// What a checkpoint says about itself.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    /// The job's description: a checkpoint of another job is refused.
    job: String,
    /// The state's Rust type.
    state: String,
    /// Iterations completed.
    iteration: u64,
    /// Bytes of the encoded state.
    bytes: u64,
    /// SHA-256 of the encoded state, hex.
    sha256: String,
}

/// Checkpoints of loop state `S` every `every` iterations, in a directory of rank 0's.
///
/// ```
/// use heddle_data::Session;
/// let dir = std::env::temp_dir().join(format!("heddle-doc-loop-{}", std::process::id()));
/// let run = |iterations: u64| -> heddle_data::Result<(u64, f64)> {
///     let session = Session::new(heddle_comm::solo(Default::default())?)?;
///     let checkpoints = session.loop_checkpoints::<f64>(&dir, 2, "halving from 1000")?;
///     let (start, mut x) = checkpoints.resume()?.unwrap_or((0, 1000.0));
///     for i in start..iterations {
///         x /= 2.0;
///         checkpoints.completed(i + 1, &x)?;
///     }
///     Ok((start, x))
/// };
/// assert_eq!(run(5)?, (0, 31.25)); // checkpoints after iterations 2 and 4
/// assert_eq!(run(6)?, (4, 15.625)); // a second run resumes after iteration 4
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct LoopCheckpoints<S> {
    session: Session,
    dir: PathBuf,
    every: u64,
    job: String,
    /// Each worker checkpoints a state of its own (its partitions), rank 0 a commit marker
    /// once every worker has written; otherwise the state is replicated and rank 0 alone
    /// writes it.
    per_worker: bool,
    _state: PhantomData<fn() -> S>,
}

impl Session {
    /// Checkpoints of loop state `S` in `dir` (made private if missing) every `every`
    /// iterations; `job` describes the job and its parameters, and a checkpoint written
    /// under another description is refused rather than resumed.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `every == 0`; [`Error::Io`] if rank 0 cannot make or
    /// use the directory (it must be this user's and not readable by others).
    pub fn loop_checkpoints<S: Serialize + DeserializeOwned>(
        &self,
        dir: impl AsRef<Path>,
        every: u64,
        job: impl Into<String>,
    ) -> Result<LoopCheckpoints<S>> {
        self.checkpoints(dir.as_ref(), every, job.into(), false)
    }

    /// As [`Session::loop_checkpoints`], for a state of each worker's own (such as the
    /// partitions of a data set it holds): every worker writes its state to `dir` (shared
    /// by the workers, or each worker's own disk at the same path), and a checkpoint is
    /// complete once rank 0 has seen every worker write and committed it. A restarted
    /// job needs the same number of workers.
    ///
    /// # Errors
    /// As [`Session::loop_checkpoints`], on any worker.
    pub fn worker_checkpoints<S: Serialize + DeserializeOwned>(
        &self,
        dir: impl AsRef<Path>,
        every: u64,
        job: impl Into<String>,
    ) -> Result<LoopCheckpoints<S>> {
        let job = format!("{} (on {} workers)", job.into(), self.comm().size());
        self.checkpoints(dir.as_ref(), every, job, true)
    }

    fn checkpoints<S>(
        &self,
        dir: &Path,
        every: u64,
        job: String,
        per_worker: bool,
    ) -> Result<LoopCheckpoints<S>> {
        if every == 0 {
            return Err(Error::InvalidArgument(
                "checkpoints every 0 iterations: give at least 1".into(),
            ));
        }
        let dir = dir.to_path_buf();
        let made = if per_worker || self.rank() == 0 { prepare_dir(&dir) } else { Ok(()) };
        agree(self, &dir, made)?;
        let session = self.clone();
        Ok(LoopCheckpoints { session, dir, every, job, per_worker, _state: PhantomData })
    }
}

/// `mine` on this worker, or an error on every worker if any worker failed: its own error
/// where it failed, elsewhere one of the same kind saying another worker failed (its
/// message says why). Collective.
fn agree<T>(session: &Session, dir: &Path, mine: Result<T>) -> Result<T> {
    let mut worst = [mine.as_ref().err().map_or(0, kind_code)];
    session.comm().allreduce(&mut worst, heddle_comm::Op::Max)?;
    match mine {
        Err(e) => Err(e),
        Ok(_) if worst[0] != 0 => Err(of_kind(
            worst[0],
            dir,
            "another worker could not use its checkpoint (its error says why)".into(),
        )),
        Ok(v) => Ok(v),
    }
}

/// 1 for a refusal ([`Error::InvalidArgument`]), 2 for anything else (a damaged or
/// unreadable file).
fn kind_code(e: &Error) -> u8 {
    match e {
        Error::InvalidArgument(_) => 1,
        _ => 2,
    }
}

/// An error of the kind `code` (of [`kind_code`]) about `dir`.
fn of_kind(code: u8, dir: &Path, message: String) -> Error {
    match code {
        1 => Error::InvalidArgument(message),
        _ => crate::error::io(dir, io::Error::new(io::ErrorKind::InvalidData, message)),
    }
}

impl<S: Serialize + DeserializeOwned> LoopCheckpoints<S> {
    /// The newest checkpoint, as (iterations completed, state), on every worker; `None`
    /// if there is none (a fresh start). Collective.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the file and what differs, for a checkpoint of
    /// another job or state type; [`Error::Io`] naming the file if it is damaged.
    pub fn resume(&self) -> Result<Option<(u64, S)>> {
        if self.per_worker {
            return self.resume_own();
        }
        let comm = self.session.comm();
        let mut found: Option<(u64, Vec<u8>)> = None;
        let mut error = (0u8, String::new());
        let mut own_error = None;
        if comm.rank() == 0 {
            match self.newest() {
                Ok(f) => found = f,
                Err(e) => {
                    error = (kind_code(&e), e.to_string());
                    own_error = Some(e);
                }
            }
        }
        // Every worker fails alike, with an error of the same kind, when rank 0 could not
        // read the checkpoint.
        let (code, message) = comm.broadcast_object((comm.rank() == 0).then_some(&error), 0)?;
        if let Some(e) = own_error {
            return Err(e);
        }
        if code != 0 {
            return Err(of_kind(code, &self.dir, format!("rank 0: {message}")));
        }
        let found = comm.broadcast_object((comm.rank() == 0).then_some(&found), 0)?;
        found.map(|(iteration, bytes)| Ok((iteration, decode(&bytes)?))).transpose()
    }

    /// [`resume`](Self::resume) of a state per worker: rank 0 finds the newest committed
    /// checkpoint, and every worker reads its own state of that iteration.
    fn resume_own(&self) -> Result<Option<(u64, S)>> {
        let comm = self.session.comm();
        let newest =
            if comm.rank() == 0 { self.newest().map(|f| f.map(|(i, _)| i)) } else { Ok(None) };
        let newest = agree(&self.session, &self.dir, newest)?;
        let Some(iteration) = comm.broadcast_object((comm.rank() == 0).then_some(&newest), 0)?
        else {
            return Ok(None);
        };
        let path = self.dir.join(rank_file(iteration, comm.rank()));
        let mine = self.read(&path, iteration).and_then(|bytes| decode(&bytes));
        Ok(Some((iteration, agree(&self.session, &self.dir, mine)?)))
    }

    /// Whether iteration `iteration` is one this worker checkpoints (so a caller need make
    /// the state only then).
    pub fn due(&self, iteration: u64) -> bool {
        iteration.is_multiple_of(self.every) && (self.per_worker || self.session.rank() == 0)
    }

    /// Records that `iteration` iterations are complete with loop state `state`: every
    /// `every`th iteration, rank 0 writes a checkpoint (of a replicated state), or every
    /// worker writes its own and rank 0 commits them once all have (collective then).
    /// Returns whether a checkpoint was completed. One that cannot be written (a full disk)
    /// is reported and skipped: the job goes on, and a restart resumes from the one
    /// before.
    ///
    /// # Errors
    /// A replicated state that cannot be encoded; with a state per worker, a communication
    /// failure.
    pub fn completed(&self, iteration: u64, state: &S) -> Result<bool> {
        if !self.due(iteration) {
            return Ok(false);
        }
        let encoded = bincode::serialize(state)
            .map_err(|e| Error::InvalidArgument(format!("encoding loop state: {e}")));
        if !self.per_worker {
            let name = file_name(iteration);
            let done = self.report(iteration, self.write(&name, iteration, &encoded?));
            if done {
                self.prune(None, KEEP);
            }
            return Ok(done);
        }
        // Each worker its own state; rank 0 commits once all have written.
        let rank = self.session.rank();
        let mine = encoded.and_then(|b| self.write(&rank_file(iteration, rank), iteration, &b));
        let mut ok = [u8::from(self.report(iteration, mine))];
        self.session.comm().allreduce(&mut ok, heddle_comm::Op::Min)?;
        if ok[0] == 0 {
            return Ok(false);
        }
        let mut oldest_kept = [0u64];
        let committed = if rank == 0 {
            let done = self.report(iteration, self.write(&file_name(iteration), iteration, &[]));
            if done {
                oldest_kept[0] = self.prune(None, KEEP);
            }
            done
        } else {
            true
        };
        let mut ok = [u8::from(committed)];
        self.session.comm().broadcast(&mut ok, 0)?;
        self.session.comm().broadcast(&mut oldest_kept, 0)?;
        if ok[0] == 1 {
            // This worker's states of iterations before every kept commit.
            self.prune(Some(&format!(".rank-{rank}.ckpt")), oldest_kept[0]);
        }
        Ok(ok[0] == 1)
    }

    /// Whether `written` succeeded; a failure is reported, and the job goes on.
    fn report(&self, iteration: u64, written: Result<()>) -> bool {
        match written {
            Ok(()) => true,
            Err(e) => {
                eprintln!(
                    "heddle: rank {}: checkpoint of iteration {iteration} failed, going on: {e}",
                    self.session.rank()
                );
                false
            }
        }
    }

    fn header(&self, iteration: u64, bytes: &[u8]) -> Header {
        Header {
            job: self.job.clone(),
            state: std::any::type_name::<S>().to_string(),
            iteration,
            bytes: bytes.len() as u64,
            sha256: hex(&Sha256::digest(bytes)),
        }
    }

    /// Writes checkpoint file `name` under a temporary name, syncs it and renames it into
    /// place.
    fn write(&self, name: &str, iteration: u64, bytes: &[u8]) -> Result<()> {
        let path = self.dir.join(name);
        let temp = self.dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let _ = std::fs::remove_file(&temp);
        let written = (|| -> io::Result<()> {
            let mut file = heddle_comm::private::create_file(&temp)?;
            let header = serde_json::to_string(&self.header(iteration, bytes))?;
            file.write_all(format!("{MAGIC}\n{header}\n").as_bytes())?;
            file.write_all(bytes)?;
            file.sync_all()?;
            std::fs::rename(&temp, &path)?;
            File::open(&self.dir)?.sync_all()
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temp);
            return Err(crate::error::io(&path, e));
        }
        Ok(())
    }

    /// Removes old checkpoint files; a failure to is reported, not fatal. Commits
    /// (`suffix` `None`): all but the newest `arg`, returning the oldest iteration kept.
    /// This worker's states (file names ending in `suffix`): those of iterations before
    /// `arg`.
    fn prune(&self, suffix: Option<&str>, arg: u64) -> u64 {
        let mut all = match self.list(suffix) {
            Ok(all) => all,
            Err(e) => {
                eprintln!("heddle: could not list old checkpoints to remove: {e}");
                return 0;
            }
        };
        all.sort_unstable();
        let old: Vec<&(u64, PathBuf)> = match suffix {
            None => all.iter().rev().skip(arg as usize).collect(),
            Some(_) => all.iter().filter(|(i, _)| *i < arg).collect(),
        };
        for (_, path) in &old {
            if let Err(e) = std::fs::remove_file(path) {
                eprintln!("heddle: could not remove old checkpoint {}: {e}", path.display());
            }
        }
        let kept = all.iter().rev().take(arg as usize).map(|(i, _)| *i);
        kept.min().unwrap_or(0)
    }

    /// Every commit (`suffix` `None`) or every state file ending in `suffix` of the
    /// directory, with its iteration.
    fn list(&self, suffix: Option<&str>) -> Result<Vec<(u64, PathBuf)>> {
        let entries = std::fs::read_dir(&self.dir).map_err(|e| crate::error::io(&self.dir, e))?;
        let mut found = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| crate::error::io(&self.dir, e))?;
            let name = entry.file_name();
            let Some(i) = name.to_str().and_then(|n| iteration_of(n, suffix)) else { continue };
            found.push((i, entry.path()));
        }
        Ok(found)
    }

    /// The newest commit's iteration and encoded state, checked.
    fn newest(&self) -> Result<Option<(u64, Vec<u8>)>> {
        let Some((iteration, path)) = self.list(None)?.into_iter().max() else { return Ok(None) };
        Ok(Some((iteration, self.read(&path, iteration)?)))
    }

    /// The encoded state in checkpoint file `path` of `iteration`, checked.
    fn read(&self, path: &Path, iteration: u64) -> Result<Vec<u8>> {
        let file = heddle_comm::private::open_owned(path, false)?;
        let mut input = BufReader::new(file);
        let damaged = |what: String| {
            crate::error::io(
                path,
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{what}: the checkpoint is damaged; remove it to resume from the one \
                         before"
                    ),
                ),
            )
        };
        let mut line = String::new();
        let mut header = String::new();
        let read = input.read_line(&mut line).and_then(|_| input.read_line(&mut header));
        read.map_err(|e| crate::error::io(path, e))?;
        if line.trim_end() != MAGIC {
            return Err(damaged(format!("it does not start with {MAGIC:?}")));
        }
        let header: Header = serde_json::from_str(header.trim_end())
            .map_err(|e| damaged(format!("its header does not parse ({e})")))?;
        let want = self.header(iteration, &[]);
        for (what, theirs, ours) in
            [("job", &header.job, &want.job), ("state type", &header.state, &want.state)]
        {
            if theirs != ours {
                return Err(Error::InvalidArgument(format!(
                    "{} is a checkpoint of another {what}: {theirs:?}, not {ours:?}; point the \
                     job at another checkpoint directory or remove this one",
                    path.display()
                )));
            }
        }
        if header.iteration != iteration {
            return Err(damaged(format!("its header says iteration {}", header.iteration)));
        }
        let mut bytes = Vec::new();
        input.read_to_end(&mut bytes).map_err(|e| crate::error::io(path, e))?;
        if bytes.len() as u64 != header.bytes || hex(&Sha256::digest(&bytes)) != header.sha256 {
            return Err(damaged(format!(
                "{} bytes of state, {} announced, or their checksum differs",
                bytes.len(),
                header.bytes
            )));
        }
        Ok(bytes)
    }
}

/// Makes `dir` private if it is missing; checks it is ours and private if it exists.
fn prepare_dir(dir: &Path) -> Result<()> {
    use heddle_comm::private::EnsureDirError as E;
    heddle_comm::private::ensure_dir(dir).map_err(|e| match e {
        E::Io(path, e) => crate::error::io(&path, e),
        E::NotPrivate(e) => Error::InvalidArgument(format!("checkpoint directory: {e}")),
    })
}

fn file_name(iteration: u64) -> String {
    format!("loop-{iteration:012}.ckpt")
}

fn rank_file(iteration: u64, rank: usize) -> String {
    format!("loop-{iteration:012}.rank-{rank}.ckpt")
}

/// The iteration of a commit file's name (`suffix` `None`), or of a state file's name
/// ending in `suffix`.
fn iteration_of(name: &str, suffix: Option<&str>) -> Option<u64> {
    name.strip_prefix("loop-")?.strip_suffix(suffix.unwrap_or(".ckpt"))?.parse().ok()
}

fn decode<S: DeserializeOwned>(bytes: &[u8]) -> Result<S> {
    bincode::deserialize(bytes)
        .map_err(|e| Error::InvalidArgument(format!("a checkpoint's state does not decode: {e}")))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
