//! What a task asks for and what a worker offers.

use heddle_comm::Communicator;
use serde::{Deserialize, Serialize};

use crate::{Isolation, Offer};

/// The job's default contract for tasks that declare none: cores (a config file's
/// `[resources] cpus`, set by `heddle run`).
pub const TASK_CPUS_ENV: &str = "HEDDLE_TASK_CPUS";
/// The job's default memory contract (`[resources] memory`).
pub const TASK_MEMORY_ENV: &str = "HEDDLE_TASK_MEMORY";
/// The job's default isolation (`[resources] isolation`: auto, thread or process).
pub const TASK_ISOLATION_ENV: &str = "HEDDLE_TASK_ISOLATION";
/// The job's default I/O rate (`[resources] io_bytes_per_s`, an amount of bytes).
pub const TASK_IO_ENV: &str = "HEDDLE_TASK_IO_BYTES_PER_S";
/// The job's default rate on Heddle's channels (`[resources] net_bytes_per_s`).
pub const TASK_NET_ENV: &str = "HEDDLE_TASK_NET_BYTES_PER_S";

/// A task instance's resource request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    /// Cores (fractions allowed).
    pub cpus: f64,
    /// Bytes of memory.
    pub memory: u64,
    /// Hosts that hold the task's input, preferred by the data-locality scheduler.
    pub hosts: Vec<String>,
    /// Thread or isolated process ([`crate::Isolated`] tasks only).
    #[serde(default)]
    pub isolation: Isolation,
    /// Bytes per second the task may read from and write to each block device (0: no
    /// limit); enforced on isolated processes by the io (v2) or blkio (v1) controller.
    #[serde(default)]
    pub io_bytes_per_s: u64,
    /// Bytes per second of records the task may send on its edges, to every target
    /// together (0: no limit); enforced on threads and processes alike by a token bucket
    /// in front of the task's outgoing edges, which then hold its records back.
    #[serde(default)]
    pub net_bytes_per_s: u64,
    /// How often each instance expects its methods to be called ([`Resources::expect`]).
    #[serde(default)]
    pub expected: Vec<crate::Expected>,
}

impl Default for Resources {
    /// One core, no memory reservation, no preferred host.
    fn default() -> Self {
        Resources::new(1.0, 0)
    }
}

impl Resources {
    /// A request of `cpus` cores and `memory` bytes.
    pub fn new(cpus: f64, memory: u64) -> Resources {
        Resources {
            cpus,
            memory,
            hosts: Vec::new(),
            isolation: Isolation::Auto,
            io_bytes_per_s: 0,
            net_bytes_per_s: 0,
            expected: Vec::new(),
        }
    }

    /// Expects each instance's `method` (`execute` or `tick`) to be called about
    /// `calls_per_s` times a second: Squirrel's expected usage. The plan then says what an
    /// isolated process's channel costs at that rate (and admission holds it), and a task
    /// that runs well over it is reported when the job ends. Checked when planned.
    ///
    /// ```
    /// let r = heddle_task::Resources::new(0.5, 0).expect("execute", 50_000.0);
    /// assert_eq!(r.expected[0].calls_per_s, 50_000.0);
    /// ```
    pub fn expect(mut self, method: &str, calls_per_s: f64) -> Resources {
        self.expected.push(crate::Expected { method: method.to_owned(), calls_per_s });
        self
    }

    /// Limits the task's block-device reads and writes to `rate` bytes per second each.
    pub fn io_bytes_per_s(mut self, rate: u64) -> Resources {
        self.io_bytes_per_s = rate;
        self
    }

    /// Limits the bytes of records the task sends on its edges to `rate` per second.
    ///
    /// ```
    /// let r = heddle_task::Resources::new(0.5, 0).net_bytes_per_s(8 << 20);
    /// assert_eq!(r.net_bytes_per_s, 8 << 20);
    /// ```
    pub fn net_bytes_per_s(mut self, rate: u64) -> Resources {
        self.net_bytes_per_s = rate;
        self
    }

    /// Runs the task as `isolation` says (for vertices built with
    /// [`crate::TaskGraph::isolated`]).
    pub fn isolation(mut self, isolation: Isolation) -> Resources {
        self.isolation = isolation;
        self
    }

    /// The contract of a task that declares none: one core, no memory and
    /// [`Isolation::Auto`], unless the job's config file (`[resources]`) set
    /// [`TASK_CPUS_ENV`], [`TASK_MEMORY_ENV`], [`TASK_IO_ENV`], [`TASK_NET_ENV`] or
    /// [`TASK_ISOLATION_ENV`].
    ///
    /// # Errors
    /// A value that is not an amount, naming the variable.
    pub fn job_default() -> std::result::Result<Resources, String> {
        let mut r = Resources::default();
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        if let Some(v) = var(TASK_CPUS_ENV) {
            r.cpus = crate::parse_cpus(&v).map_err(|e| format!("{TASK_CPUS_ENV}={v:?}: {e}"))?;
        }
        if let Some(v) = var(TASK_MEMORY_ENV) {
            r.memory =
                crate::parse_bytes(&v).map_err(|e| format!("{TASK_MEMORY_ENV}={v:?}: {e}"))?;
        }
        if let Some(v) = var(TASK_IO_ENV) {
            r.io_bytes_per_s =
                crate::parse_bytes(&v).map_err(|e| format!("{TASK_IO_ENV}={v:?}: {e}"))?;
        }
        if let Some(v) = var(TASK_NET_ENV) {
            r.net_bytes_per_s =
                crate::parse_bytes(&v).map_err(|e| format!("{TASK_NET_ENV}={v:?}: {e}"))?;
        }
        if let Some(v) = var(TASK_ISOLATION_ENV) {
            r.isolation = v.parse().map_err(|e| format!("{TASK_ISOLATION_ENV}: {e}"))?;
        }
        Ok(r)
    }

    /// Prefers workers on `hosts` (where the input lies).
    pub fn on_hosts<S: Into<String>>(mut self, hosts: impl IntoIterator<Item = S>) -> Resources {
        self.hosts = hosts.into_iter().map(Into::into).collect();
        self
    }
}

/// One worker's capacity, as schedulers see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// Rank of the worker in the job's communicator.
    pub rank: usize,
    /// Host name.
    pub host: String,
    /// Cores it offers.
    pub cpus: f64,
    /// Bytes of memory it offers.
    pub memory: u64,
}

impl WorkerSpec {
    /// Every worker of `comm` with its host and what it offers: its share of what the host
    /// offers ([`Offer::host`]: cores and memory of the machine, its control groups and a
    /// Slurm allocation; workers on one host split it evenly), unless `heddle run
    /// --cpus-per-worker` / `--memory-per-worker` set it. Collective: every worker must call
    /// it.
    ///
    /// # Errors
    /// A failed allgather; [`crate::Error::Plan`] for a bad setting.
    pub fn discover(comm: &Communicator) -> crate::Result<Vec<WorkerSpec>> {
        let host = std::env::var("HEDDLE_HOST_ID")
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(host_name);
        // Each worker's offer and its own settings; every worker learns whether every other
        // one could read its offer, so all fail together rather than some waiting forever.
        let settings: Vec<(String, String)> =
            [crate::CPUS_PER_WORKER_ENV, crate::MEMORY_PER_WORKER_ENV]
                .iter()
                .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
                .collect();
        let mine = Offer::host().map_err(message).map(|o| (host, o, settings));
        type Gathered = Result<(String, Offer, Vec<(String, String)>), String>;
        let all: Vec<Gathered> = comm.allgather_object(&mine)?;
        let mut offers = Vec::with_capacity(all.len());
        for (rank, r) in all.into_iter().enumerate() {
            offers.push(r.map_err(|e| crate::Error::Plan(format!("rank {rank}: {e}")))?);
        }
        let on_host = |h: &str| offers.iter().filter(|(x, _, _)| x == h).count();
        offers
            .iter()
            .enumerate()
            .map(|(rank, (host, o, settings))| {
                let env = |k: &str| settings.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
                let w = o
                    .per_worker(on_host(host), &env)
                    .map_err(|e| crate::Error::Plan(format!("rank {rank}: {}", message(e))))?;
                Ok(WorkerSpec { rank, host: host.clone(), cpus: w.cpus, memory: w.memory })
            })
            .collect()
    }
}

/// An offer error's message without the error type's own prefix.
fn message(e: crate::Error) -> String {
    match e {
        crate::Error::Plan(m) => m,
        e => e.to_string(),
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}
