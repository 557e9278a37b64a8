//! What a host really offers its workers: cores and memory, the tightest of the machine
//! (CPU affinity, `/proc/meminfo`), its control groups (v2 or v1: a container's or a
//! Kubernetes pod's limits), and a Slurm allocation (`SLURM_CPUS_ON_NODE`,
//! `SLURM_MEM_PER_NODE`); or what `heddle run --cpus-per-worker --memory-per-worker` says.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::amount::{format_bytes, parse_bytes, parse_cpus};
use crate::cgroup;
use crate::{Error, Result};

/// Cores each worker offers, set by `heddle run --cpus-per-worker` (overrides detection).
pub const CPUS_PER_WORKER_ENV: &str = "HEDDLE_CPUS_PER_WORKER";
/// Memory each worker offers, set by `heddle run --memory-per-worker` (an amount such as
/// `4GiB`; overrides detection).
pub const MEMORY_PER_WORKER_ENV: &str = "HEDDLE_MEMORY_PER_WORKER";

/// Cores and memory, and where each figure comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offer {
    /// Cores (fractions when a CPU quota says so).
    pub cpus: f64,
    /// Bytes of memory.
    pub memory: u64,
    /// What set `cpus`: `cpu affinity`, a cgroup file, `SLURM_CPUS_ON_NODE`, …
    pub cpus_from: String,
    /// What set `memory`.
    pub memory_from: String,
}

impl std::fmt::Display for Offer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} cores (from {}), {} of memory (from {})",
            self.cpus,
            self.cpus_from,
            format_bytes(self.memory),
            self.memory_from
        )
    }
}

impl Offer {
    /// What this host offers, from the machine, its control groups and Slurm.
    ///
    /// ```
    /// let o = heddle_task::Offer::host().unwrap();
    /// assert!(o.cpus > 0.0 && o.memory > 0);
    /// ```
    ///
    /// # Errors
    /// [`Error::Plan`] for a Slurm variable that is not a number.
    pub fn host() -> Result<Offer> {
        Offer::detect(Path::new("/"), &|k| std::env::var(k).ok())
    }

    /// As [`Offer::host`], reading `/proc` and `/sys` under `root` and variables through
    /// `env` (tests give a made-up machine).
    ///
    /// # Errors
    /// As [`Offer::host`].
    pub fn detect(root: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Offer> {
        let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap_or_default();
        let mut o = Offer {
            cpus: affinity_cpus() as f64,
            memory: mem_total(&read("proc/meminfo")).unwrap_or(u64::MAX),
            cpus_from: "cpu affinity".into(),
            memory_from: "/proc/meminfo".into(),
        };
        let (cg, mi) = (read("proc/self/cgroup"), read("proc/self/mountinfo"));
        let controllers = |mount: &Path| {
            let inside = mount.strip_prefix("/").unwrap_or(mount);
            std::fs::read_to_string(root.join(inside).join("cgroup.controllers")).ok()
        };
        let under_root = |g: cgroup::Group| cgroup::Group {
            dir: root.join(g.dir.strip_prefix("/").unwrap_or(&g.dir)),
            mount: root.join(g.mount.strip_prefix("/").unwrap_or(&g.mount)),
            v2: g.v2,
        };
        let shown = |p: &Path| format!("/{}", p.strip_prefix(root).unwrap_or(p).display());
        if let Some(g) = cgroup::find("cpu", &cg, &mi, &controllers).map(under_root) {
            if let Some((c, file)) = cgroup::cpu_limit(&g).filter(|(c, _)| *c < o.cpus) {
                (o.cpus, o.cpus_from) = (c, shown(&file));
            }
        }
        if let Some(g) = cgroup::find("memory", &cg, &mi, &controllers).map(under_root) {
            if let Some((m, file)) = cgroup::memory_limit(&g).filter(|(m, _)| *m < o.memory) {
                (o.memory, o.memory_from) = (m, shown(&file));
            }
        }
        if let Some(v) = env("SLURM_CPUS_ON_NODE").filter(|v| !v.is_empty()) {
            let c = parse_cpus(&v).map_err(|e| Error::Plan(format!("SLURM_CPUS_ON_NODE: {e}")))?;
            if c < o.cpus {
                (o.cpus, o.cpus_from) = (c, "SLURM_CPUS_ON_NODE".into());
            }
        }
        if let Some(v) = env("SLURM_MEM_PER_NODE").filter(|v| !v.is_empty()) {
            // Slurm writes megabytes (MiB) without a unit.
            let with_unit =
                if v.trim().bytes().all(|b| b.is_ascii_digit()) { format!("{v}MiB") } else { v };
            let m = parse_bytes(&with_unit)
                .map_err(|e| Error::Plan(format!("SLURM_MEM_PER_NODE: {e}")))?;
            if m < o.memory {
                (o.memory, o.memory_from) = (m, "SLURM_MEM_PER_NODE".into());
            }
        }
        Ok(o)
    }

    /// One worker's share when `workers` share this host, unless `heddle run
    /// --cpus-per-worker` / `--memory-per-worker` set it (read through `env`).
    ///
    /// ```
    /// use heddle_task::Offer;
    /// let host = Offer { cpus: 8.0, memory: 16 << 30, cpus_from: "x".into(), memory_from: "y".into() };
    /// let w = host.per_worker(4, &|k| (k == "HEDDLE_MEMORY_PER_WORKER").then(|| "1GiB".into())).unwrap();
    /// assert_eq!((w.cpus, w.memory), (2.0, 1 << 30));
    /// assert_eq!(w.memory_from, "HEDDLE_MEMORY_PER_WORKER");
    /// ```
    ///
    /// # Errors
    /// [`Error::Plan`] naming the variable when it is not an amount.
    pub fn per_worker(
        &self,
        workers: usize,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Offer> {
        let n = workers.max(1);
        let mut o = Offer {
            cpus: self.cpus / n as f64,
            memory: self.memory / n as u64,
            cpus_from: format!("{} / {n} workers", self.cpus_from),
            memory_from: format!("{} / {n} workers", self.memory_from),
        };
        if n == 1 {
            (o.cpus_from, o.memory_from) = (self.cpus_from.clone(), self.memory_from.clone());
        }
        if let Some(v) = env(CPUS_PER_WORKER_ENV).filter(|v| !v.is_empty()) {
            o.cpus =
                parse_cpus(&v).map_err(|e| Error::Plan(format!("{CPUS_PER_WORKER_ENV}: {e}")))?;
            o.cpus_from = CPUS_PER_WORKER_ENV.into();
        }
        if let Some(v) = env(MEMORY_PER_WORKER_ENV).filter(|v| !v.is_empty()) {
            o.memory = parse_bytes(&v)
                .map_err(|e| Error::Plan(format!("{MEMORY_PER_WORKER_ENV}: {e}")))?;
            o.memory_from = MEMORY_PER_WORKER_ENV.into();
        }
        Ok(o)
    }
}

fn mem_total(meminfo: &str) -> Option<u64> {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

/// The cores this process may run on.
fn affinity_cpus() -> usize {
    // SAFETY: a zeroed cpu_set_t filled by sched_getaffinity for this process.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            let n = libc::CPU_COUNT(&set);
            if n > 0 {
                return n as usize;
            }
        }
    }
    std::thread::available_parallelism().map_or(1, usize::from)
}
