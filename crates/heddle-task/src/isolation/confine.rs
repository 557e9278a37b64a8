//! Confining an isolated task's process to its contract: a control group of its own
//! under the worker's (cgroup v2 where the unified hierarchy has the controllers, else
//! one group per v1 hierarchy: `memory`, `cpu`), with a memory limit that the kernel
//! enforces by killing the process and a CPU quota (CFS bandwidth). Where no group can
//! be made (no permission, no controller, a v2 group that cannot delegate), the memory
//! contract falls back to `setrlimit(RLIMIT_DATA)` in the child, with a warning.
//!
//! Groups are named `heddle-<worker pid>-<task id>-<sequence number in the worker>`
//! and removed when the task ends;
//! groups left by a worker that was killed are removed by the next one that makes a
//! group in the same place.

use std::path::{Path, PathBuf};

use crate::cgroup::{self, Group};
use crate::Resources;

/// CFS period of the CPU quota (the kernel's default), in microseconds.
const PERIOD_US: u64 = 100_000;

/// How a task's contract is enforced.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Enforcement {
    /// Control groups (`v2`: the unified hierarchy).
    Cgroup {
        /// Whether the groups are v2's.
        v2: bool,
    },
    /// `setrlimit(RLIMIT_DATA)` for memory, nothing for CPU: no group could be made.
    Rlimit,
    /// The contract asks for nothing to enforce.
    None,
}

/// The groups made for one isolated task (removed on drop).
#[derive(Debug)]
pub(crate) struct Confinement {
    /// The group holding the memory files (v2: the one group).
    memory: Option<PathBuf>,
    /// The group holding the CPU files.
    cpu: Option<PathBuf>,
    v2: bool,
    /// Every group made, to add the process to and remove at the end.
    made: Vec<PathBuf>,
    /// How the contract is enforced.
    pub(crate) enforcement: Enforcement,
    /// Why it falls short of control groups (a warning for the user).
    pub(crate) warning: Option<String>,
}

/// Where the worker's own groups are: read from `/proc/self`.
fn own_group(controller: &str) -> Option<Group> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mi = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    cgroup::find(controller, &cg, &mi, &|p: &Path| {
        std::fs::read_to_string(p.join("cgroup.controllers")).ok()
    })
}

impl Confinement {
    /// Makes the groups of task `task` (its global id) for `contract`, under the worker's
    /// own groups. Never fails: what cannot be made is said in `warning`.
    pub(crate) fn create(task_name: &str, task: u32, contract: &Resources) -> Confinement {
        let wants_memory = contract.memory > 0;
        let wants_cpu = contract.cpus.is_finite() && contract.cpus > 0.0;
        // A worker may run several jobs at once (whose task ids repeat): a sequence
        // number makes each group its own.
        static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let seq = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("heddle-{}-{task}-{seq}", std::process::id());
        let mut c = Self::create_in(
            task_name,
            &name,
            contract,
            wants_memory.then(|| own_group("memory")).flatten(),
            wants_cpu.then(|| own_group("cpu")).flatten(),
            wants_memory,
        );
        if contract.io_bytes_per_s > 0 {
            // v2's controller is `io`, v1's hierarchy `blkio`.
            let parent = own_group("io").or_else(|| own_group("blkio"));
            c.limit_io(task_name, parent, &name, contract.io_bytes_per_s, &block_devices());
        }
        c
    }

    /// Limits reads and writes of each of `devices` (`major:minor`) to `rate` bytes per
    /// second: v2 `io.max` in the task's one group, v1 `blkio.throttle.*_bps_device` in a
    /// group of the blkio hierarchy. What cannot be done is added to the warning.
    pub(crate) fn limit_io(
        &mut self,
        task_name: &str,
        parent: Option<Group>,
        name: &str,
        rate: u64,
        devices: &[String],
    ) {
        let done = (|| -> Result<bool, String> {
            let parent =
                parent.ok_or("no io (v2) or blkio (v1) controller is mounted for this process")?;
            let dir = match self.made.first() {
                Some(d) if parent.v2 && self.v2 => d.clone(),
                _ => {
                    let d = make_group(&parent, name)?;
                    self.made.push(d.clone());
                    d
                }
            };
            if parent.v2 {
                let have = std::fs::read_to_string(parent.dir.join("cgroup.subtree_control"))
                    .unwrap_or_default();
                if !have.split_whitespace().any(|x| x == "io") {
                    write(&parent.dir, "cgroup.subtree_control", "+io")?;
                }
            }
            let mut limited = 0;
            let mut last = String::from("no block device found in /sys/block");
            for dev in devices {
                let set = if parent.v2 {
                    write(&dir, "io.max", &format!("{dev} rbps={rate} wbps={rate}"))
                } else {
                    write(&dir, "blkio.throttle.read_bps_device", &format!("{dev} {rate}"))
                        .and_then(|()| {
                            write(&dir, "blkio.throttle.write_bps_device", &format!("{dev} {rate}"))
                        })
                };
                match set {
                    Ok(()) => limited += 1,
                    Err(e) => last = e,
                }
            }
            if limited == 0 {
                return Err(last);
            }
            Ok(parent.v2)
        })();
        match done {
            Ok(v2) => {
                if self.enforcement == Enforcement::None {
                    self.enforcement = Enforcement::Cgroup { v2 };
                }
            }
            Err(e) => {
                let w = format!("task {task_name}: its I/O rate is not enforced: {e}");
                self.warning = Some(match self.warning.take() {
                    Some(earlier) => format!("{earlier}; {w}"),
                    None => w,
                });
            }
        }
    }

    /// As [`Confinement::create`], under the given parent groups (tests pass made-up
    /// trees).
    pub(crate) fn create_in(
        task_name: &str,
        name: &str,
        contract: &Resources,
        memory_parent: Option<Group>,
        cpu_parent: Option<Group>,
        wants_memory: bool,
    ) -> Confinement {
        let mut c = Confinement {
            memory: None,
            cpu: None,
            v2: false,
            made: Vec::new(),
            enforcement: Enforcement::None,
            warning: None,
        };
        let mut problems = Vec::new();
        if let Some(parent) = memory_parent.as_ref() {
            match make_group(parent, name) {
                Ok(dir) => {
                    let limit = contract.memory.to_string();
                    let set = if parent.v2 {
                        write(&dir, "memory.max", &limit).map(|()| {
                            let _ = write(&dir, "memory.swap.max", "0");
                        })
                    } else {
                        write(&dir, "memory.limit_in_bytes", &limit).map(|()| {
                            // Swap counts too where the kernel accounts it.
                            let _ = write(&dir, "memory.memsw.limit_in_bytes", &limit);
                        })
                    };
                    match set {
                        Ok(()) => c.memory = Some(dir.clone()),
                        Err(e) => problems.push(e),
                    }
                    c.v2 = parent.v2;
                    c.made.push(dir);
                }
                Err(e) => problems.push(e),
            }
        } else if wants_memory {
            problems.push("no memory controller is mounted for this process".into());
        }
        if let Some(parent) = cpu_parent.as_ref() {
            let quota = ((contract.cpus * PERIOD_US as f64).round() as u64).max(1000);
            // v2 has one group for both controllers.
            let dir = match c.made.first() {
                Some(d) if parent.v2 && c.v2 => Ok(d.clone()),
                _ => make_group(parent, name).inspect(|d| c.made.push(d.clone())),
            };
            let set = dir.and_then(|dir| {
                if parent.v2 {
                    write(&dir, "cpu.max", &format!("{quota} {PERIOD_US}"))?;
                } else {
                    write(&dir, "cpu.cfs_period_us", &PERIOD_US.to_string())?;
                    write(&dir, "cpu.cfs_quota_us", &quota.to_string())?;
                }
                Ok(dir)
            });
            match set {
                Ok(dir) => c.cpu = Some(dir),
                Err(e) => problems.push(e),
            }
        }
        c.enforcement = if c.memory.is_some() || c.cpu.is_some() {
            Enforcement::Cgroup { v2: c.v2 || cpu_parent.as_ref().is_some_and(|g| g.v2) }
        } else if wants_memory {
            Enforcement::Rlimit
        } else {
            Enforcement::None
        };
        if !problems.is_empty() {
            let fallback = match (&c.enforcement, wants_memory && c.memory.is_none()) {
                (_, true) => "its memory contract is enforced with setrlimit(RLIMIT_DATA) only",
                _ => "part of its contract is not enforced",
            };
            c.warning = Some(format!(
                "task {task_name}: {}; {fallback} (run as root or in a delegated control group)",
                problems.join("; ")
            ));
        }
        c
    }

    /// Whether memory is limited by a group (else the child sets its own rlimit).
    pub(crate) fn limits_memory(&self) -> bool {
        self.memory.is_some()
    }

    /// Moves process `pid` into the groups.
    ///
    /// # Errors
    /// The file system's, as a message naming the group.
    pub(crate) fn add(&self, pid: i32) -> Result<(), String> {
        for dir in &self.made {
            write(dir, "cgroup.procs", &pid.to_string())?;
        }
        Ok(())
    }

    /// The most memory the group's processes used, in bytes (if the kernel says).
    pub(crate) fn peak(&self) -> Option<u64> {
        let dir = self.memory.as_ref()?;
        let file = if self.v2 { "memory.peak" } else { "memory.max_usage_in_bytes" };
        std::fs::read_to_string(dir.join(file)).ok()?.trim().parse().ok()
    }

    /// Processes the kernel killed for going over the memory limit.
    pub(crate) fn oom_kills(&self) -> u64 {
        let Some(dir) = self.memory.as_ref() else { return 0 };
        let file = if self.v2 { "memory.events" } else { "memory.oom_control" };
        std::fs::read_to_string(dir.join(file))
            .ok()
            .and_then(|t| t.lines().find_map(|l| l.strip_prefix("oom_kill ")?.trim().parse().ok()))
            .unwrap_or(0)
    }

    /// The file that sets the memory limit, for messages.
    pub(crate) fn memory_file(&self) -> Option<PathBuf> {
        let file = if self.v2 { "memory.max" } else { "memory.limit_in_bytes" };
        self.memory.as_ref().map(|d| d.join(file))
    }
}

impl Drop for Confinement {
    fn drop(&mut self) {
        for dir in &self.made {
            remove_group(dir);
        }
    }
}

/// Makes group `name` under `parent` (v2: with the memory and CPU controllers delegated
/// to it), first removing groups of workers that are gone.
fn make_group(parent: &Group, name: &str) -> Result<PathBuf, String> {
    sweep(&parent.dir);
    if parent.v2 {
        let have =
            std::fs::read_to_string(parent.dir.join("cgroup.subtree_control")).unwrap_or_default();
        for c in ["memory", "cpu"] {
            if !have.split_whitespace().any(|x| x == c) {
                write(&parent.dir, "cgroup.subtree_control", &format!("+{c}"))?;
            }
        }
    }
    let dir = parent.dir.join(name);
    match std::fs::create_dir(&dir) {
        Ok(()) => Ok(dir),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(dir),
        Err(e) => Err(format!("cannot make control group {}: {e}", dir.display())),
    }
}

/// The block devices to throttle (`major:minor`), from `/sys/block` (memory-backed ones —
/// loop, ram, zram — left out).
fn block_devices() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/sys/block") else { return Vec::new() };
    let mut devices: Vec<String> = entries
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            !(n.starts_with("loop") || n.starts_with("ram") || n.starts_with("zram"))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("dev")).ok())
        .map(|d| d.trim().to_owned())
        .collect();
    devices.sort();
    devices
}

/// Removes the `heddle-<pid>-*` groups under `dir` whose worker is gone.
fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("heddle-")) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        // SAFETY: kill with signal 0 only checks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !alive {
            remove_group(&e.path());
        }
    }
}

/// Removes a group once its processes have left (a killed one takes a moment).
fn remove_group(dir: &Path) {
    for _ in 0..50 {
        match std::fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(2)),
        }
    }
    // A plain directory (the tests' made-up trees) holds files: remove them too.
    let _ = std::fs::remove_dir_all(dir);
}

fn write(dir: &Path, file: &str, value: &str) -> Result<(), String> {
    std::fs::write(dir.join(file), value)
        .map_err(|e| format!("cannot write {value:?} to {}: {e}", dir.join(file).display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(name: &str) -> PathBuf {
        let t = std::env::temp_dir().join(format!("heddle-confine-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&t);
        std::fs::create_dir_all(&t).unwrap();
        t
    }

    #[test]
    fn v2_delegates_the_controllers_and_writes_one_group() {
        let root = tree("v2");
        std::fs::write(root.join("cgroup.subtree_control"), "").unwrap();
        let g = Group { v2: true, dir: root.clone(), mount: root.clone() };
        let contract = Resources::new(0.5, 200 << 20);
        let c = Confinement::create_in(
            "hog[0]",
            "heddle-1-7",
            &contract,
            Some(g.clone()),
            Some(g),
            true,
        );
        assert_eq!(c.enforcement, Enforcement::Cgroup { v2: true }, "{:?}", c.warning);
        let dir = root.join("heddle-1-7");
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        assert_eq!(read("memory.max"), (200u64 << 20).to_string());
        assert_eq!(read("memory.swap.max"), "0");
        assert_eq!(read("cpu.max"), "50000 100000");
        // The made-up parent took the last "+controller" written.
        assert_eq!(std::fs::read_to_string(root.join("cgroup.subtree_control")).unwrap(), "+cpu");
        std::fs::write(dir.join("memory.peak"), "1234\n").unwrap();
        std::fs::write(dir.join("memory.events"), "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
            .unwrap();
        assert_eq!((c.peak(), c.oom_kills()), (Some(1234), 1));
        c.add(4242).unwrap();
        assert_eq!(read("cgroup.procs"), "4242");
        drop(c);
        assert!(!dir.exists(), "the group is removed");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn v1_writes_a_group_per_hierarchy_and_sweeps_dead_workers_groups() {
        let (mem, cpu) = (tree("v1mem"), tree("v1cpu"));
        // A group of a worker that is gone (pid far above pid_max) is swept.
        std::fs::create_dir(mem.join("heddle-2147483646-3")).unwrap();
        let mg = Group { v2: false, dir: mem.clone(), mount: mem.clone() };
        let cg = Group { v2: false, dir: cpu.clone(), mount: cpu.clone() };
        let c = Confinement::create_in(
            "t[1]",
            "heddle-1-9",
            &Resources::new(1.5, 1 << 30),
            Some(mg),
            Some(cg),
            true,
        );
        assert_eq!(c.enforcement, Enforcement::Cgroup { v2: false });
        assert!(!mem.join("heddle-2147483646-3").exists());
        let m = mem.join("heddle-1-9");
        let p = cpu.join("heddle-1-9");
        assert_eq!(std::fs::read_to_string(m.join("memory.limit_in_bytes")).unwrap(), "1073741824");
        assert_eq!(std::fs::read_to_string(p.join("cpu.cfs_quota_us")).unwrap(), "150000");
        assert_eq!(std::fs::read_to_string(p.join("cpu.cfs_period_us")).unwrap(), "100000");
        std::fs::write(
            m.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        )
        .unwrap();
        assert_eq!(c.oom_kills(), 2);
        drop(c);
        assert!(!m.exists() && !p.exists());
        std::fs::remove_dir_all(&mem).unwrap();
        std::fs::remove_dir_all(&cpu).unwrap();
    }

    #[test]
    fn io_rates_go_to_io_max_or_the_blkio_throttles() {
        let root = tree("io2");
        std::fs::write(root.join("cgroup.subtree_control"), "memory cpu").unwrap();
        let g = Group { v2: true, dir: root.clone(), mount: root.clone() };
        let contract = Resources::new(1.0, 1 << 30).io_bytes_per_s(8 << 20);
        let mut c =
            Confinement::create_in("t[0]", "heddle-1-2", &contract, Some(g.clone()), None, true);
        let devices = ["254:0".to_string(), "8:0".to_string()];
        c.limit_io("t[0]", Some(g), "heddle-1-2", 8 << 20, &devices);
        assert_eq!(c.warning, None);
        let dir = root.join("heddle-1-2");
        // One group for memory and I/O; the made-up file keeps the last device written.
        assert_eq!(
            std::fs::read_to_string(dir.join("io.max")).unwrap(),
            "8:0 rbps=8388608 wbps=8388608"
        );
        assert_eq!(std::fs::read_to_string(root.join("cgroup.subtree_control")).unwrap(), "+io");
        drop(c);
        std::fs::remove_dir_all(&root).unwrap();

        let blk = tree("io1");
        let g = Group { v2: false, dir: blk.clone(), mount: blk.clone() };
        let mut c = Confinement::create_in(
            "t[0]",
            "heddle-1-3",
            &Resources::new(1.0, 0),
            None,
            None,
            false,
        );
        c.limit_io("t[0]", Some(g), "heddle-1-3", 1000, &devices[..1]);
        assert_eq!(c.enforcement, Enforcement::Cgroup { v2: false });
        let dir = blk.join("heddle-1-3");
        for f in ["blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device"] {
            assert_eq!(std::fs::read_to_string(dir.join(f)).unwrap(), "254:0 1000");
        }
        drop(c);
        assert!(!dir.exists());
        std::fs::remove_dir_all(&blk).unwrap();

        let mut c = Confinement::create_in("t[0]", "x", &Resources::new(1.0, 0), None, None, false);
        c.limit_io("t[0]", None, "x", 1000, &devices);
        let w = c.warning.clone().unwrap();
        assert!(w.contains("its I/O rate is not enforced: no io (v2) or blkio"), "{w}");
    }

    #[test]
    fn without_a_group_memory_falls_back_to_rlimit_with_a_warning() {
        let contract = Resources::new(1.0, 64 << 20);
        let nowhere = Group { v2: false, dir: "/proc/nonexistent/x".into(), mount: "/proc".into() };
        let c = Confinement::create_in("t[0]", "heddle-1-1", &contract, Some(nowhere), None, true);
        assert_eq!(c.enforcement, Enforcement::Rlimit);
        let w = c.warning.clone().unwrap();
        assert!(w.contains("task t[0]") && w.contains("RLIMIT_DATA"), "{w}");
        let none = Confinement::create_in("t[0]", "x", &Resources::new(1.0, 0), None, None, false);
        assert_eq!((&none.enforcement, &none.warning), (&Enforcement::None, &None));
    }
}
