//! [`DataSet::iterate_with`]: iterations that checkpoint the data set they carry, so a
//! restarted job resumes after its newest complete checkpoint
//! ([`LoopCheckpoints`](crate::LoopCheckpoints) of each worker's partitions).

use std::path::PathBuf;

use heddle_task::Record;

use crate::{DataSet, Locked, Result, Session};

/// Where and how often [`DataSet::iterate_with`] checkpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpointing {
    /// The directory (shared by the workers, or each worker's own at the same path).
    pub dir: PathBuf,
    /// Iterations between checkpoints.
    pub every: u64,
    /// Describes the job and its parameters: another job's checkpoints are refused.
    pub job: String,
}

/// How [`DataSet::iterate_with`] iterates.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IterateOptions {
    /// The most iterations.
    pub max: u64,
    /// Checkpoints of the data set, for a restarted job to resume from (none by default).
    pub checkpoints: Option<Checkpointing>,
}

impl<T: Record> DataSet<T> {
    /// [`DataSet::iterate`] that survives restarts (`heddle run --restarts`): with
    /// `opts.checkpoints`, every `every` iterations each worker writes its partitions of
    /// the current data set, and a restarted job (with as many workers) resumes after the
    /// newest complete checkpoint. Returns the last data set and the iterations done in
    /// all, those before a restart included.
    ///
    /// ```
    /// use heddle_data::{Checkpointing, IterateOptions, Session};
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-iterate-{}", std::process::id()));
    /// let checkpoints = Some(Checkpointing { dir: dir.clone(), every: 2, job: "halve".into() });
    /// let halve = |max: u64| -> heddle_data::Result<(Option<Vec<u64>>, u64)> {
    ///     let s = Session::new(heddle_comm::solo(Default::default())?)?;
    ///     let opts = IterateOptions { max, checkpoints: checkpoints.clone() };
    ///     let (last, steps) = s.from_vec(vec![1024u64, 96]).iterate_with(
    ///         &opts,
    ///         |d| Ok(d.map(|x| x / 2)),
    ///         |_, _| Ok(false),
    ///     )?;
    ///     Ok((last.collect()?, steps))
    /// };
    /// assert_eq!(halve(3)?, (Some(vec![128, 12]), 3)); // a checkpoint after 2 steps
    /// assert_eq!(halve(5)?, (Some(vec![32, 3]), 5)); // resumed after 2: 3 more steps
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`DataSet::iterate`], and as
    /// [`LoopCheckpoints::resume`](crate::LoopCheckpoints::resume) for checkpoints of
    /// another job or a different number of workers or partitions.
    pub fn iterate_with(
        &self,
        opts: &IterateOptions,
        mut step: impl FnMut(&DataSet<T>) -> Result<DataSet<T>>,
        mut done: impl FnMut(&DataSet<T>, &DataSet<T>) -> Result<bool>,
    ) -> Result<(DataSet<T>, u64)> {
        let session = &self.session;
        let checkpoints = match &opts.checkpoints {
            None => None,
            Some(c) => {
                let job = format!(
                    "{}: DataSet<{}> in {} partitions",
                    c.job,
                    std::any::type_name::<T>(),
                    self.parallelism()
                );
                Some(session.worker_checkpoints::<Vec<Vec<T>>>(&c.dir, c.every, job)?)
            }
        };
        let resumed = match &checkpoints {
            Some(c) => c.resume()?,
            None => None,
        };
        let (start, mut current) = match resumed {
            Some((i, parts)) => (i, cached(session, parts)),
            None => (0, self.clone()),
        };
        for i in start..opts.max {
            let next = step(&current)?.cache()?;
            let mut stop = [u8::from(done(&current, &next)?)];
            session.comm().allreduce(&mut stop, heddle_comm::Op::Min)?;
            if let (Some(c), Some(parts)) = (&checkpoints, &next.cached) {
                if c.due(i + 1) {
                    let parts = parts.locked().clone();
                    c.completed(i + 1, &parts)?;
                }
            }
            current = next;
            if stop[0] == 1 {
                return Ok((current, i + 1));
            }
        }
        Ok((current, opts.max.max(start)))
    }
}

/// A cached data set of this worker's partitions `parts` (by index).
fn cached<T: Record>(session: &Session, parts: Vec<Vec<T>>) -> DataSet<T> {
    let parts = std::sync::Arc::new(std::sync::Mutex::new(parts));
    let p = parts.clone();
    let mut set = crate::sources::from_partitions(session, "resumed", move |i, _| {
        p.locked().get(i as usize).cloned().unwrap_or_default()
    });
    set.cached = Some(parts);
    set
}
