//! What a host offers, on made-up machines (cgroup v1 as here, v2 as on newer hosts, a
//! Slurm allocation, `heddle run` overrides), and on this machine inside a real v1 memory
//! cgroup made for the test.

use std::path::{Path, PathBuf};

use heddle_task::Offer;

/// A made-up root: `/proc/meminfo`, `/proc/self/{cgroup,mountinfo}` and cgroup files.
fn machine(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let root = std::env::temp_dir().join(format!("heddle-offer-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for (path, text) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    root
}

const MEMINFO: &str = "MemTotal:       24683104 kB\nMemFree:        1000 kB\n";
const NO_ENV: &dyn Fn(&str) -> Option<String> = &|_| None;

#[test]
fn a_v1_container_offers_its_memory_limit_and_cpu_quota() {
    let root = machine(
        "v1",
        &[
            ("proc/meminfo", MEMINFO),
            ("proc/self/cgroup", "4:memory:/box\n1:cpu,cpuacct:/box\n0::/\n"),
            (
                "proc/self/mountinfo",
                "\
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
            ),
            ("sys/fs/cgroup/unified/cgroup.controllers", ""),
            ("sys/fs/cgroup/memory/box/memory.limit_in_bytes", "536870912\n"),
            ("sys/fs/cgroup/cpu,cpuacct/box/cpu.cfs_quota_us", "50000\n"),
            ("sys/fs/cgroup/cpu,cpuacct/box/cpu.cfs_period_us", "100000\n"),
        ],
    );
    let o = Offer::detect(&root, NO_ENV).unwrap();
    assert_eq!(o.memory, 512 << 20);
    assert_eq!(o.memory_from, "/sys/fs/cgroup/memory/box/memory.limit_in_bytes");
    assert_eq!(o.cpus, 0.5);
    assert_eq!(o.cpus_from, "/sys/fs/cgroup/cpu,cpuacct/box/cpu.cfs_quota_us");
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn a_v2_pod_offers_its_limits_and_slurm_can_be_tighter() {
    let root = machine(
        "v2",
        &[
            ("proc/meminfo", MEMINFO),
            ("proc/self/cgroup", "0::/kubepods/pod1/app\n"),
            ("proc/self/mountinfo", "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
            ("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n"),
            ("sys/fs/cgroup/kubepods/pod1/memory.max", "2147483648\n"),
            ("sys/fs/cgroup/kubepods/pod1/app/memory.max", "max\n"),
            ("sys/fs/cgroup/kubepods/pod1/app/cpu.max", "25000 100000\n"),
        ],
    );
    let o = Offer::detect(&root, NO_ENV).unwrap();
    assert_eq!((o.cpus, o.memory), (0.25, 2 << 30), "{o}");
    assert_eq!(o.memory_from, "/sys/fs/cgroup/kubepods/pod1/memory.max");
    let slurm = |k: &str| match k {
        "SLURM_CPUS_ON_NODE" => Some("0.125".to_owned()),
        "SLURM_MEM_PER_NODE" => Some("1000".to_owned()),
        _ => None,
    };
    let o = Offer::detect(&root, &slurm).unwrap();
    assert_eq!((o.cpus, o.memory), (0.125, 1000 << 20));
    assert_eq!(
        (o.cpus_from.as_str(), o.memory_from.as_str()),
        ("SLURM_CPUS_ON_NODE", "SLURM_MEM_PER_NODE")
    );
    let bad = |k: &str| (k == "SLURM_MEM_PER_NODE").then(|| "lots".to_owned());
    let e = Offer::detect(&root, &bad).unwrap_err().to_string();
    assert!(e.contains("SLURM_MEM_PER_NODE") && e.contains("`lots`"), "{e}");
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn no_cgroup_files_leave_the_machine_figures() {
    let root = machine("bare", &[("proc/meminfo", MEMINFO)]);
    let o = Offer::detect(&root, NO_ENV).unwrap();
    assert_eq!(o.memory, 24_683_104 * 1024);
    assert_eq!(o.memory_from, "/proc/meminfo");
    assert_eq!(o.cpus_from, "cpu affinity");
    assert!(o.cpus >= 1.0);
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn workers_share_a_host_unless_told_otherwise() {
    let host = Offer { cpus: 2.0, memory: 8 << 30, cpus_from: "a".into(), memory_from: "b".into() };
    let w = host.per_worker(4, NO_ENV).unwrap();
    assert_eq!((w.cpus, w.memory), (0.5, 2 << 30));
    assert_eq!(w.memory_from, "b / 4 workers");
    let set = |k: &str| (k == heddle_task::CPUS_PER_WORKER_ENV).then(|| "3".to_owned());
    assert_eq!(host.per_worker(4, &set).unwrap().cpus, 3.0);
    let zero = |k: &str| (k == heddle_task::CPUS_PER_WORKER_ENV).then(|| "0".to_owned());
    let e = host.per_worker(1, &zero).unwrap_err().to_string();
    assert!(e.contains("HEDDLE_CPUS_PER_WORKER") && e.contains("above 0"), "{e}");
    let neg = |k: &str| (k == heddle_task::MEMORY_PER_WORKER_ENV).then(|| "-2GiB".to_owned());
    let e = host.per_worker(1, &neg).unwrap_err().to_string();
    assert!(e.contains("HEDDLE_MEMORY_PER_WORKER") && e.contains("negative"), "{e}");
}

/// This machine's real v1 memory hierarchy (or v2 where it has the controller): a child
/// moved into a new group with a 300 MiB limit sees that limit in its offer.
#[test]
fn a_process_in_a_real_memory_cgroup_offers_its_limit() {
    let base = Path::new("/sys/fs/cgroup/memory");
    let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers");
    let v2_has_memory = std::fs::read_to_string(v2).is_ok_and(|c| c.contains("memory"));
    let (parent, limit_file) = if v2_has_memory {
        (PathBuf::from("/sys/fs/cgroup"), "memory.max")
    } else {
        assert!(
            base.is_dir(),
            "no memory cgroup controller is mounted (v1 or v2): this test needs one, as CI has"
        );
        (base.to_owned(), "memory.limit_in_bytes")
    };
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test makes a cgroup and must run as root (CI does)"
    );
    let group = parent.join(format!("heddle-offer-test-{}", std::process::id()));
    std::fs::create_dir(&group).unwrap();
    std::fs::write(group.join(limit_file), format!("{}", 300u64 << 20)).unwrap();
    // The child joins the group before it reads its offer (it prints it as JSON).
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("echo $$ > {}/cgroup.procs && exec \"$0\" --exact print_offer --nocapture --include-ignored", group.display()))
        .arg(&exe)
        .env("HEDDLE_PRINT_OFFER", "1")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir(&group);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let line = text.lines().find(|l| l.starts_with("OFFER ")).expect(&text);
    let o: Offer = serde_json::from_str(&line[6..]).unwrap();
    assert_eq!(o.memory, 300 << 20, "{o}");
    assert!(o.memory_from.ends_with(limit_file), "{o}");
}

/// Run by the test above inside its cgroup.
#[test]
#[ignore = "run by a_process_in_a_real_memory_cgroup_offers_its_limit in its cgroup"]
fn print_offer() {
    if std::env::var("HEDDLE_PRINT_OFFER").is_ok() {
        println!("OFFER {}", serde_json::to_string(&Offer::host().unwrap()).unwrap());
    }
}
