//! Communication settings: buffer size, credit window, timeouts, transport, forced algorithms.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use crate::collectives::{Algorithm, Collective};
use crate::{settings, Error, Result};

/// Which transport to use between workers on the same host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportChoice {
    /// Shared memory on the same host, TCP across hosts.
    Auto,
    /// Shared memory for same-host peers (TCP across hosts still).
    Shm,
    /// TCP for every peer.
    Tcp,
    /// MPI point-to-point for every peer (a build with the `mpi` feature, under `mpirun`).
    Mpi,
}

impl FromStr for TransportChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" | "" => Ok(TransportChoice::Auto),
            "shm" => Ok(TransportChoice::Shm),
            "tcp" => Ok(TransportChoice::Tcp),
            "mpi" => Ok(TransportChoice::Mpi),
            other => Err(Error::Config(format!(
                "HEDDLE_TRANSPORT={other:?} is not one of auto, shm, tcp, mpi"
            ))),
        }
    }
}

/// Settings of one worker's communication engine.
#[derive(Debug, Clone)]
pub struct CommConfig {
    /// Bytes of one transport buffer, frame header included (`HEDDLE_BUFFER_BYTES`).
    pub buffer_bytes: usize,
    /// Buffers a receiver grants each sender: its credit window (`HEDDLE_WINDOW`).
    pub window: usize,
    /// Longest wait of any blocking call (`HEDDLE_TIMEOUT_S`).
    pub timeout: Duration,
    /// Transport between same-host workers (`HEDDLE_TRANSPORT`).
    pub transport: TransportChoice,
    /// Algorithms forced per collective
    /// (`HEDDLE_ALGORITHMS=allreduce=ring,broadcast=binomial_tree`).
    pub algorithms: BTreeMap<Collective, Algorithm>,
    /// Idle polls before a waiting thread starts yielding the CPU (`HEDDLE_SPIN_POLLS`).
    /// `None` picks by load: spin long when this host has a core per worker, yield
    /// almost at once when workers outnumber cores (as Open MPI does when oversubscribed).
    pub spin_polls: Option<u32>,
}

impl Default for CommConfig {
    fn default() -> Self {
        CommConfig {
            // 8 x 32 KiB = 256 KiB per ring stays in a core's L2; measured with
            // `heddle bench collectives` against 16 x 64 KiB, it doubled 16 MiB bandwidth.
            buffer_bytes: 32 << 10,
            window: 8,
            timeout: Duration::from_secs(300),
            transport: TransportChoice::Auto,
            algorithms: BTreeMap::new(),
            spin_polls: None,
        }
    }
}

impl CommConfig {
    /// The environment variables [`CommConfig::from_env`] reads.
    pub const ENV_KEYS: &'static [&'static str] = &[
        "HEDDLE_BUFFER_BYTES",
        "HEDDLE_WINDOW",
        "HEDDLE_TIMEOUT_S",
        "HEDDLE_TRANSPORT",
        "HEDDLE_ALGORITHMS",
        "HEDDLE_SPIN_POLLS",
    ];

    /// Defaults overridden by the `HEDDLE_*` variables named on each field.
    ///
    /// # Errors
    /// [`Error::Config`] naming the variable whose value does not parse.
    pub fn from_env() -> Result<CommConfig> {
        let mut c = CommConfig::default();
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        if let Some(v) = var(settings::BUFFER_BYTES.name) {
            c.buffer_bytes = settings::whole(&settings::BUFFER_BYTES, &v)? as usize;
        }
        if let Some(v) = var(settings::WINDOW.name) {
            c.window = settings::whole(&settings::WINDOW, &v)? as usize;
        }
        if let Some(v) = var(settings::TIMEOUT_S.name) {
            c.timeout = settings::seconds(&settings::TIMEOUT_S, &v)?;
        }
        if let Some(v) = var(settings::SPIN_POLLS.name) {
            c.spin_polls = Some(settings::whole(&settings::SPIN_POLLS, &v)? as u32);
        }
        if let Some(v) = var("HEDDLE_TRANSPORT") {
            c.transport = v.parse()?;
        }
        if let Some(v) = var("HEDDLE_ALGORITHMS") {
            for item in v.split(',').filter(|s| !s.trim().is_empty()) {
                let (coll, algo) = item.split_once('=').ok_or_else(|| {
                    Error::Config(format!(
                        "HEDDLE_ALGORITHMS entry {item:?} is not COLLECTIVE=ALGORITHM"
                    ))
                })?;
                c.algorithms.insert(coll.trim().parse()?, algo.trim().parse()?);
            }
        }
        c.validate()?;
        Ok(c)
    }

    /// Checks the values are usable.
    ///
    /// # Errors
    /// [`Error::Config`] explaining the bad value.
    pub fn validate(&self) -> Result<()> {
        if self.buffer_bytes < 1024 || !self.buffer_bytes.is_multiple_of(64) {
            return Err(Error::Config(format!(
                "buffer_bytes {} must be a multiple of 64 and at least 1024",
                self.buffer_bytes
            )));
        }
        if self.window < 2 || self.window as f64 > settings::WINDOW.max {
            return Err(Error::Config(format!(
                "window {} must be from 2 to {} buffers",
                self.window,
                settings::WINDOW.max
            )));
        }
        if self.buffer_bytes as f64 > settings::BUFFER_BYTES.max {
            return Err(Error::Config(format!(
                "buffer_bytes {} must be at most {}",
                self.buffer_bytes,
                settings::BUFFER_BYTES.max
            )));
        }
        let timeout = self.timeout.as_secs_f64();
        if !(settings::TIMEOUT_S.min..=settings::TIMEOUT_S.max).contains(&timeout) {
            return Err(Error::Config(format!(
                "timeout {:?} must be from {} to {} seconds",
                self.timeout,
                settings::TIMEOUT_S.min,
                settings::TIMEOUT_S.max
            )));
        }
        Ok(())
    }

    /// Idle polls before yielding, for `local_workers` busy workers on this host.
    pub fn spin_polls_for(&self, local_workers: usize) -> u32 {
        self.spin_polls.unwrap_or_else(|| {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            if local_workers <= cores {
                200_000
            } else {
                16
            }
        })
    }

    /// Payload bytes one buffer carries after the frame header.
    pub fn fragment_payload(&self) -> usize {
        self.buffer_bytes - heddle_wire::HEADER_LEN
    }
}

/// The candidate closest to `word` by edit distance, if it is a plausible misspelling.
///
/// ```
/// let known = ["HEDDLE_WINDOW", "HEDDLE_RANK"];
/// assert_eq!(heddle_comm::closest("HEDDLE_WINDWO", &known), Some("HEDDLE_WINDOW"));
/// assert_eq!(heddle_comm::closest("XYZ", &["HEDDLE_WINDOW"]), None);
/// ```
pub fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let limit = (word.chars().count() / 4).clamp(1, 3);
    candidates
        .iter()
        .map(|c| (edit_distance(c, word), *c))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push((prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}
