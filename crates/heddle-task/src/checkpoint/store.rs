//! The state backend: a directory (local, or shared by the hosts) holding, per
//! checkpoint, one state file per task that keeps state and, once every task has
//! acknowledged, the commit file that makes the checkpoint complete.
//!
//! ```text
//! stream-000000000012.task-3.state   a task's state, and the records it held in flight
//!                                      if the checkpoint went unaligned (by its worker)
//! stream-000000000012.ckpt           the commit (written by rank 0, last)
//! loop-000000000006.ckpt             task-graph iterations: after 6 passes
//! ```
//!
//! Each file is private (0600, in a 0700 directory), written under a temporary name,
//! synced and renamed, so a crash never leaves a half-written one: a checkpoint without
//! its commit file is not complete, and is ignored and removed on resume. Both kinds start
//! with a magic line and a JSON header naming the job and its graph, so a checkpoint of
//! another job or graph is refused, naming what differs.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use heddle_dataflow::TaskId;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{Error, Result};

const STATE_MAGIC: &str = "HEDDLE-TASK-STATE 1";
const COMMIT_MAGIC: &str = "HEDDLE-STREAM-CHECKPOINT 1";

/// A state file's header.
#[derive(Debug, Serialize, Deserialize)]
struct StateHeader {
    job: String,
    checkpoint: u64,
    task: TaskId,
    bytes: u64,
    sha256: String,
    /// Bytes of records in flight ([`super::Inflight`]) after the state.
    #[serde(default)]
    inflight: u64,
    /// The task keeps no state of its own (the file holds records in flight only).
    #[serde(default)]
    stateless: bool,
}

/// What a complete checkpoint holds (its commit file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Commit {
    /// The job's name.
    pub(crate) job: String,
    /// The job's graph, one line per vertex and edge ([`super::describe`]).
    pub(crate) graph: String,
    /// The checkpoint's id.
    pub(crate) checkpoint: u64,
    /// Taken when every source had ended (the job had finished).
    pub(crate) last: bool,
    /// The tasks that have a state file.
    pub(crate) states: Vec<TaskId>,
    /// Bytes of state over all tasks.
    pub(crate) bytes: u64,
    /// Milliseconds from the trigger to the last acknowledgement.
    pub(crate) duration_ms: f64,
    /// Tasks that stored records in flight (the checkpoint went unaligned there).
    #[serde(default)]
    pub(crate) unaligned_tasks: usize,
}

/// What a task's state file holds: its state (`None`: it keeps none) and the records in
/// flight an unaligned checkpoint stored with it.
pub(crate) type TaskFile = (Option<Vec<u8>>, Option<Vec<u8>>);

/// A checkpoint directory, as one job sees it.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    dir: PathBuf,
    job: String,
    graph: String,
    /// What the checkpoints are of, the files' prefix: `stream` or `loop`.
    kind: &'static str,
}

impl Store {
    /// The store of `kind` checkpoints (`stream`, `loop`: the files' prefix) of job `job`
    /// with graph `graph` in `dir` (made private if missing).
    ///
    /// # Errors
    /// A directory that cannot be made, or that is not ours and private.
    pub(crate) fn open(dir: &Path, job: &str, graph: &str, kind: &'static str) -> Result<Store> {
        prepare_dir(dir)?;
        let (job, graph) = (job.to_string(), graph.to_string());
        Ok(Store { dir: dir.to_path_buf(), job, graph, kind })
    }

    fn state_path(&self, checkpoint: u64, task: TaskId) -> PathBuf {
        self.dir.join(format!("{}-{checkpoint:012}.task-{task}.state", self.kind))
    }

    fn commit_path(&self, checkpoint: u64) -> PathBuf {
        self.dir.join(format!("{}-{checkpoint:012}.ckpt", self.kind))
    }

    /// Writes task `task`'s state at `checkpoint` (staged, then published at once).
    pub(crate) fn write_state(
        &self,
        checkpoint: u64,
        task: TaskId,
        state: Option<&[u8]>,
        inflight: Option<&[u8]>,
    ) -> Result<()> {
        let staged = self.stage_state(checkpoint, task, state, inflight)?;
        publish(vec![staged])
    }

    /// Writes task `task`'s state at `checkpoint` under a temporary name, not yet synced:
    /// [`publish`] makes a worker's states of one checkpoint durable together (one sync of
    /// the directory for all of them).
    pub(crate) fn stage_state(
        &self,
        checkpoint: u64,
        task: TaskId,
        state: Option<&[u8]>,
        inflight: Option<&[u8]>,
    ) -> Result<Staged> {
        let (state, inflight) = (state.unwrap_or_default(), inflight.unwrap_or_default());
        let mut digest = Sha256::new();
        digest.update(state);
        digest.update(inflight);
        let header = StateHeader {
            job: self.job.clone(),
            checkpoint,
            task,
            bytes: state.len() as u64,
            sha256: hex(&digest.finalize()),
            inflight: inflight.len() as u64,
            stateless: state.is_empty() && !inflight.is_empty(),
        };
        let header = serde_json::to_string(&header).map_err(io::Error::other);
        let path = self.state_path(checkpoint, task);
        let temp = temp_path(&path);
        let _ = std::fs::remove_file(&temp); // a failed attempt's, of this process
        let written = (|| -> io::Result<File> {
            let mut file = heddle_comm::private::create_file(&temp)?;
            file.write_all(format!("{STATE_MAGIC}\n{}\n", header?).as_bytes())?;
            file.write_all(state)?;
            file.write_all(inflight)?;
            Ok(file)
        })();
        match written {
            Ok(file) => Ok(Staged { file, temp, path }),
            Err(e) => {
                let _ = std::fs::remove_file(&temp);
                Err(io_err(&path, e))
            }
        }
    }

    pub(crate) fn read_state(&self, checkpoint: u64, task: TaskId) -> Result<TaskFile> {
        let path = self.state_path(checkpoint, task);
        let (header, mut bytes) = read_file::<StateHeader>(&path, STATE_MAGIC)?;
        if header.job != self.job {
            return Err(foreign(&path, "job", &header.job, &self.job));
        }
        if header.checkpoint != checkpoint || header.task != task {
            return Err(damaged(&path, "its header names another checkpoint or task"));
        }
        if bytes.len() as u64 != header.bytes + header.inflight
            || hex(&Sha256::digest(&bytes)) != header.sha256
        {
            return Err(damaged(&path, "its length or checksum does not match its header"));
        }
        let inflight = bytes.split_off(header.bytes as usize);
        let state = (!header.stateless).then_some(bytes);
        Ok((state, (!inflight.is_empty()).then_some(inflight)))
    }

    pub(crate) fn commit(&self, commit: &Commit) -> Result<()> {
        let json = serde_json::to_string(commit).map_err(io::Error::other);
        write_atomically(&self.commit_path(commit.checkpoint), &|f| {
            let json = json.as_ref().map_err(clone_err)?;
            f.write_all(format!("{COMMIT_MAGIC}\n{json}\n").as_bytes())
        })
    }

    /// Appends a completed checkpoint's figures to `history.jsonl` (one JSON object per
    /// line: id, duration, bytes, whether last), for `heddle bench recovery` and anyone
    /// watching. A failure is reported, not fatal.
    pub(crate) fn append_history(&self, commit: &Commit) {
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.dir.join("history.jsonl");
        let line = serde_json::json!({
            "checkpoint": commit.checkpoint,
            "duration_ms": commit.duration_ms,
            "bytes": commit.bytes,
            "last": commit.last,
            "unaligned_tasks": commit.unaligned_tasks,
        });
        let appended = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(heddle_comm::private::FILE_MODE)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC) // never through a symlink
            .open(&path)
            .and_then(|mut f| writeln!(f, "{line}"));
        if let Err(e) = appended {
            eprintln!("heddle: warning: could not append to {}: {e}", path.display());
        }
    }

    /// The newest complete checkpoint, checked to be this job's and of this graph.
    ///
    /// # Errors
    /// [`Error::Checkpoint`]: a damaged commit file, or one of another job or graph.
    pub(crate) fn latest(&self) -> Result<Option<Commit>> {
        let Some(&(id, _)) = self.list(".ckpt")?.iter().max() else { return Ok(None) };
        let path = self.commit_path(id);
        let (commit, _) = read_file::<Commit>(&path, COMMIT_MAGIC)?;
        if commit.job != self.job {
            return Err(foreign(&path, "job", &commit.job, &self.job));
        }
        if commit.graph != self.graph {
            let (theirs, ours) = first_difference(&commit.graph, &self.graph);
            return Err(Error::Checkpoint {
                path: path.display().to_string(),
                message: format!(
                    "it is a checkpoint of another graph (it has {theirs}, this job has \
                     {ours}); run the job it was taken of, or use another checkpoint directory"
                ),
            });
        }
        if commit.checkpoint != id {
            return Err(damaged(&path, "its header names another checkpoint"));
        }
        Ok(Some(commit))
    }

    /// Removes the state files of `tasks` of checkpoints `remove` says to, and (with
    /// `commits`) the commit files of all but the newest `keep`. Failures are reported,
    /// not fatal.
    pub(crate) fn prune(
        &self,
        tasks: &[TaskId],
        remove: &dyn Fn(u64) -> bool,
        commits: Option<usize>,
    ) {
        let remove_file = |path: &Path| {
            if let Err(e) = std::fs::remove_file(path) {
                if e.kind() != io::ErrorKind::NotFound {
                    eprintln!(
                        "heddle: warning: could not remove old checkpoint file {}: {e}",
                        path.display()
                    );
                }
            }
        };
        if let Some(keep) = commits {
            if let Ok(mut all) = self.list(".ckpt") {
                all.sort_unstable();
                all.iter().rev().skip(keep).for_each(|(_, p)| remove_file(p));
            }
        }
        let Ok(states) = self.list(".state") else { return };
        for (id, path) in states {
            let task = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.split(".task-").nth(1))
                .and_then(|n| n.split('.').next())
                .and_then(|t| t.parse::<TaskId>().ok());
            if task.is_some_and(|t| tasks.contains(&t)) && remove(id) {
                remove_file(&path);
            }
        }
    }

    /// Every file of the directory of kind `suffix` (`.ckpt`, `.state`), with its id.
    /// States include the temporary files a writer killed mid-write leaves
    /// (`.<name>.state.<pid>.tmp`), so that pruning removes those too.
    fn list(&self, suffix: &str) -> Result<Vec<(u64, PathBuf)>> {
        let entries = std::fs::read_dir(&self.dir).map_err(|e| io_err(&self.dir, e))?;
        let mut found = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_err(&self.dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let temp = suffix == ".state"
                && name.ends_with(".tmp")
                && name.contains(".state.")
                && name.starts_with('.');
            if !name.ends_with(suffix) && !temp {
                continue;
            }
            let name = if temp { &name[1..] } else { name };
            let id = name
                .strip_prefix(self.kind)
                .and_then(|n| n.strip_prefix('-'))
                .and_then(|n| n.get(..12))
                .and_then(|n| n.parse().ok());
            if let Some(id) = id {
                found.push((id, entry.path()));
            }
        }
        Ok(found)
    }

    /// The job's name and graph description, for a commit.
    pub(crate) fn names(&self) -> (String, String) {
        (self.job.clone(), self.graph.clone())
    }

    /// The id of the oldest commit in the directory (0: none).
    pub(crate) fn oldest_commit(&self) -> u64 {
        self.list(".ckpt").ok().and_then(|all| all.iter().map(|(id, _)| *id).min()).unwrap_or(0)
    }

    /// The directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The first line where two graph descriptions differ, quoted, from each.
fn first_difference(theirs: &str, ours: &str) -> (String, String) {
    let (mut a, mut b) = (theirs.lines(), ours.lines());
    loop {
        match (a.next(), b.next()) {
            (Some(x), Some(y)) if x == y => continue,
            (x, y) => {
                let q =
                    |l: Option<&str>| l.map_or("nothing more".to_string(), |l| format!("'{l}'"));
                return (q(x), q(y));
            }
        }
    }
}

fn clone_err(e: &io::Error) -> io::Error {
    io::Error::new(e.kind(), e.to_string())
}

/// A file written under a temporary name, to be synced and renamed by [`publish`].
#[derive(Debug)]
pub(crate) struct Staged {
    file: File,
    temp: PathBuf,
    path: PathBuf,
}

impl Staged {
    /// Removes the file: its checkpoint will not be published.
    pub(crate) fn discard(self) {
        let _ = std::fs::remove_file(&self.temp);
    }
}

/// Syncs staged files, renames them into place and syncs their directories once; on an
/// error the temporary files left are removed and the first error names its file.
pub(crate) fn publish(staged: Vec<Staged>) -> Result<()> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut failed = None;
    for s in &staged {
        if failed.is_none() {
            if let Err(e) = s.file.sync_all().and_then(|()| std::fs::rename(&s.temp, &s.path)) {
                failed = Some(io_err(&s.path, e));
                continue;
            }
            let dir = s.path.parent().unwrap_or(Path::new(".")).to_path_buf();
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
        if failed.is_some() {
            let _ = std::fs::remove_file(&s.temp);
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    for dir in dirs {
        File::open(&dir).and_then(|d| d.sync_all()).map_err(|e| io_err(&dir, e))?;
    }
    Ok(())
}

fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("checkpoint");
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

/// Writes `path` under a temporary name, syncs it and renames it into place.
fn write_atomically(path: &Path, write: &dyn Fn(&mut File) -> io::Result<()>) -> Result<()> {
    let temp = temp_path(path);
    let _ = std::fs::remove_file(&temp);
    let staged = heddle_comm::private::create_file(&temp).and_then(|mut file| {
        write(&mut file)?;
        Ok(file)
    });
    match staged {
        Ok(file) => publish(vec![Staged { file, temp, path: path.to_path_buf() }]),
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            Err(io_err(path, e))
        }
    }
}

/// A file's header (after its magic line) and the bytes after it.
fn read_file<H: serde::de::DeserializeOwned>(path: &Path, magic: &str) -> Result<(H, Vec<u8>)> {
    let file = heddle_comm::private::open_owned(path, false).map_err(|e| Error::Checkpoint {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    let mut input = BufReader::new(file);
    let (mut line, mut header) = (String::new(), String::new());
    input
        .read_line(&mut line)
        .and_then(|_| input.read_line(&mut header))
        .map_err(|e| io_err(path, e))?;
    if line.trim_end() != magic {
        return Err(damaged(path, &format!("it does not start with {magic:?}")));
    }
    let header: H = serde_json::from_str(header.trim_end())
        .map_err(|e| damaged(path, &format!("its header does not parse ({e})")))?;
    let mut bytes = Vec::new();
    input.read_to_end(&mut bytes).map_err(|e| io_err(path, e))?;
    Ok((header, bytes))
}

fn damaged(path: &Path, what: &str) -> Error {
    Error::Checkpoint {
        path: path.display().to_string(),
        message: format!(
            "{what}: the checkpoint is damaged; remove its files to resume from the one \
             before (a two-phase sink then writes again what it published for this one)"
        ),
    }
}

fn foreign(path: &Path, what: &str, theirs: &str, ours: &str) -> Error {
    Error::Checkpoint {
        path: path.display().to_string(),
        message: format!(
            "it is a checkpoint of another {what}: {theirs:?}, not {ours:?}; point the job at \
             another checkpoint directory or remove this one"
        ),
    }
}

fn io_err(path: &Path, e: io::Error) -> Error {
    Error::Checkpoint { path: path.display().to_string(), message: e.to_string() }
}

/// Makes `dir` private if it is missing; checks it is ours and private if it exists.
fn prepare_dir(dir: &Path) -> Result<()> {
    use heddle_comm::private::EnsureDirError as E;
    heddle_comm::private::ensure_dir(dir).map_err(|e| match e {
        E::Io(path, e) => io_err(&path, e),
        E::NotPrivate(e) => Error::Checkpoint {
            path: dir.display().to_string(),
            message: format!("{e}; checkpoints go in a directory of this user's alone"),
        },
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
