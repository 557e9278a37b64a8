//! The limits a process's control groups put on it, read from cgroup v2 (the unified
//! hierarchy, where it has controllers) or v1 (one hierarchy per controller). The
//! effective limit is the tightest along the path from the group up to its hierarchy's root.

use std::path::{Path, PathBuf};

/// Where the process's group of one controller is, and which cgroup version holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Group {
    /// `true` for the unified (v2) hierarchy.
    pub(crate) v2: bool,
    /// The group's directory.
    pub(crate) dir: PathBuf,
    /// The hierarchy's mount point (the walk up stops there).
    pub(crate) mount: PathBuf,
}

/// Finds the group of `controller` (`memory`, `cpu`) from the texts of `/proc/self/cgroup`
/// and `/proc/self/mountinfo`: the v2 hierarchy if it has the controller
/// (`cgroup.controllers` under its mount, read through `read`), else the v1 hierarchy
/// mounted with it.
pub(crate) fn find(
    controller: &str,
    cgroup: &str,
    mountinfo: &str,
    controllers_of: &dyn Fn(&Path) -> Option<String>,
) -> Option<Group> {
    let mounts: Vec<(String, PathBuf, String, String)> = mountinfo
        .lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let f: Vec<&str> = left.split(' ').collect();
            let r: Vec<&str> = right.split(' ').collect();
            let (root, point) = (f.get(3)?, f.get(4)?);
            let (fstype, opts) = (r.first()?, r.get(2).copied().unwrap_or(""));
            Some(((*root).to_owned(), PathBuf::from(point), (*fstype).to_owned(), opts.to_owned()))
        })
        .collect();
    let path_of = |hierarchy: &dyn Fn(&str) -> bool| {
        cgroup.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, names, path) = (parts.next()?, parts.next()?, parts.next()?);
            hierarchy(names).then(|| path.to_owned())
        })
    };
    let join = |root: &str, point: &Path, path: &str| {
        let rel = if root == "/" { path } else { path.strip_prefix(root).unwrap_or(path) };
        point.join(rel.trim_start_matches('/'))
    };
    // v2, if its hierarchy has the controller.
    if let Some((root, point, _, _)) = mounts.iter().find(|m| m.2 == "cgroup2") {
        let has =
            controllers_of(point).is_some_and(|c| c.split_whitespace().any(|x| x == controller));
        if has {
            if let Some(path) = path_of(&|names| names.is_empty()) {
                let dir = join(root, point, &path);
                return Some(Group { v2: true, dir, mount: point.clone() });
            }
        }
    }
    // v1: the hierarchy whose mount options name the controller.
    let (root, point, _, _) =
        mounts.iter().find(|m| m.2 == "cgroup" && m.3.split(',').any(|o| o == controller))?;
    let path = path_of(&|names| names.split(',').any(|n| n == controller))?;
    Some(Group { v2: false, dir: join(root, point, &path), mount: point.clone() })
}

/// Values above this are "no limit" (v1 writes a page-rounded `i64::MAX`).
const UNLIMITED: u64 = 1 << 62;

/// The tightest memory limit on `g` and its ancestors, in bytes, and the file that sets it.
pub(crate) fn memory_limit(g: &Group) -> Option<(u64, PathBuf)> {
    let file = if g.v2 { "memory.max" } else { "memory.limit_in_bytes" };
    walk(g, |dir| {
        let p = dir.join(file);
        let text = std::fs::read_to_string(&p).ok()?;
        let v: u64 = text.trim().parse().ok()?; // "max" (v2) does not parse: no limit
        (v < UNLIMITED).then_some((v as f64, p))
    })
    .map(|(v, p)| (v as u64, p))
}

/// The tightest CPU quota on `g` and its ancestors, in cores, and the file that sets it.
pub(crate) fn cpu_limit(g: &Group) -> Option<(f64, PathBuf)> {
    walk(g, |dir| {
        if g.v2 {
            let p = dir.join("cpu.max");
            let text = std::fs::read_to_string(&p).ok()?;
            let mut it = text.split_whitespace();
            let quota: f64 = it.next()?.parse().ok()?; // "max": no quota
            let period: f64 = it.next()?.parse().ok()?;
            (quota > 0.0 && period > 0.0).then(|| (quota / period, p))
        } else {
            let p = dir.join("cpu.cfs_quota_us");
            let quota: f64 = std::fs::read_to_string(&p).ok()?.trim().parse().ok()?;
            let period: f64 =
                std::fs::read_to_string(dir.join("cpu.cfs_period_us")).ok()?.trim().parse().ok()?;
            (quota > 0.0 && period > 0.0).then(|| (quota / period, p))
        }
    })
}

/// The smallest `read(dir)` from `g.dir` up to its mount point.
fn walk(g: &Group, read: impl Fn(&Path) -> Option<(f64, PathBuf)>) -> Option<(f64, PathBuf)> {
    let mut best: Option<(f64, PathBuf)> = None;
    let mut dir = g.dir.as_path();
    loop {
        if let Some((v, p)) = read(dir) {
            if best.as_ref().is_none_or(|(b, _)| v < *b) {
                best = Some((v, p));
            }
        }
        if dir == g.mount {
            return best;
        }
        dir = match dir.parent() {
            Some(d) if d.starts_with(&g.mount) => d,
            _ => return best,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1_MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw";
    const V1_CGROUP: &str = "4:memory:/jobs/a\n2:cpu,cpuacct:/jobs\n0::/\n";

    #[test]
    fn v1_groups_are_found_by_their_mount_options() {
        let none = |_: &Path| Some(String::new());
        let m = find("memory", V1_CGROUP, V1_MOUNTS, &none).unwrap();
        assert_eq!(
            m,
            Group {
                v2: false,
                dir: "/sys/fs/cgroup/memory/jobs/a".into(),
                mount: "/sys/fs/cgroup/memory".into()
            }
        );
        let c = find("cpu", V1_CGROUP, V1_MOUNTS, &none).unwrap();
        assert_eq!(c.dir, PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/jobs"));
        assert_eq!(find("io", V1_CGROUP, V1_MOUNTS, &none), None);
    }

    #[test]
    fn v2_is_used_where_it_has_the_controller() {
        let mounts = "30 23 0:26 /pod7 /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate";
        let cgroup = "0::/pod7/app\n";
        let with = |_: &Path| Some("cpuset cpu io memory pids".to_owned());
        let g = find("memory", cgroup, mounts, &with).unwrap();
        assert!(g.v2);
        assert_eq!(g.dir, PathBuf::from("/sys/fs/cgroup/app"));
        let without = |_: &Path| Some("pids".to_owned());
        assert_eq!(find("memory", cgroup, mounts, &without), None);
    }

    #[test]
    fn the_tightest_limit_up_the_tree_counts() {
        let tmp = std::env::temp_dir().join(format!("heddle-cgroup-test-{}", std::process::id()));
        let leaf = tmp.join("a/b");
        std::fs::create_dir_all(&leaf).unwrap();
        std::fs::write(tmp.join("memory.max"), "max\n").unwrap();
        std::fs::write(tmp.join("a/memory.max"), "1073741824\n").unwrap();
        std::fs::write(leaf.join("memory.max"), "2147483648\n").unwrap();
        std::fs::write(tmp.join("a/cpu.max"), "150000 100000\n").unwrap();
        std::fs::write(leaf.join("cpu.max"), "max 100000\n").unwrap();
        let g = Group { v2: true, dir: leaf.clone(), mount: tmp.clone() };
        assert_eq!(memory_limit(&g), Some((1 << 30, tmp.join("a/memory.max"))));
        assert_eq!(cpu_limit(&g), Some((1.5, tmp.join("a/cpu.max"))));
        let v1 = Group { v2: false, dir: leaf.clone(), mount: tmp.clone() };
        std::fs::write(leaf.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        std::fs::write(leaf.join("cpu.cfs_quota_us"), "50000\n").unwrap();
        std::fs::write(leaf.join("cpu.cfs_period_us"), "100000\n").unwrap();
        assert_eq!(memory_limit(&v1), None, "v1's huge value is no limit");
        assert_eq!(cpu_limit(&v1), Some((0.5, leaf.join("cpu.cfs_quota_us"))));
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
