//! What a task asks for and what a worker offers.

use heddle_comm::Communicator;
use serde::{Deserialize, Serialize};

/// A task instance's resource request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    /// Cores (fractions allowed).
    pub cpu: f64,
    /// Bytes of memory.
    pub memory: u64,
    /// Hosts that hold the task's input, preferred by the data-locality scheduler.
    pub hosts: Vec<String>,
}

impl Default for Resources {
    /// One core, no memory reservation, no preferred host.
    fn default() -> Self {
        Resources { cpu: 1.0, memory: 0, hosts: Vec::new() }
    }
}

impl Resources {
    /// A request of `cpu` cores and `memory` bytes.
    pub fn new(cpu: f64, memory: u64) -> Resources {
        Resources { cpu, memory, hosts: Vec::new() }
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
    pub cpu: f64,
    /// Bytes of memory it offers.
    pub memory: u64,
}

impl WorkerSpec {
    /// Every worker of `comm` with its host, its share of the host's cores and memory
    /// (workers on one host split it evenly). Collective: every worker must call it.
    ///
    /// # Errors
    /// A failed allgather.
    pub fn discover(comm: &Communicator) -> crate::Result<Vec<WorkerSpec>> {
        let host = std::env::var("HEDDLE_HOST_ID")
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(host_name);
        let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
        let memory = total_memory();
        let all: Vec<(String, f64, u64)> = comm.allgather_object(&(host, cores, memory))?;
        let on_host = |h: &str| all.iter().filter(|(x, _, _)| x == h).count().max(1);
        Ok(all
            .iter()
            .enumerate()
            .map(|(rank, (host, cpu, mem))| {
                let n = on_host(host);
                WorkerSpec { rank, host: host.clone(), cpu: cpu / n as f64, memory: mem / n as u64 }
            })
            .collect())
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

fn total_memory() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(u64::MAX, |kb| kb * 1024)
}
