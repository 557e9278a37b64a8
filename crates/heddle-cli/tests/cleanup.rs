//! Nothing is left behind: on every exit of `heddle run` (success, a worker killed or
//! terminated, SIGINT or SIGTERM to the launcher, the launcher killed) the job's spill
//! directories, job directory and shared-memory segments are gone within 2 s, and no
//! process of the job survives — workers nor what they started. Stale leftovers of dead
//! jobs are reaped at the next start.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use common::*;

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("heddle-cleanup-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

/// Heddle segments in /dev/shm whose owner process is gone: leaked by some job.
fn stale_segments() -> Vec<String> {
    let mut stale = Vec::new();
    for e in
        std::fs::read_dir("/dev/shm").map(|d| d.flatten().collect::<Vec<_>>()).unwrap_or_default()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(bytes) = std::fs::read(e.path()) else { continue };
        if !name.starts_with("heddle-") || bytes.len() < 40 || &bytes[..8] != b"HEDDLSHM" {
            continue;
        }
        let pid = u64::from_le_bytes(bytes[32..40].try_into().unwrap());
        if !Path::new(&format!("/proc/{pid}")).exists() {
            stale.push(name);
        }
    }
    stale
}

/// Pids of the processes whose parent is `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ppid ...
        let after = stat.rsplit_once(") ").map(|(_, rest)| rest).unwrap_or("");
        if after.split(' ').nth(1).and_then(|p| p.parse::<u32>().ok()) == Some(parent) {
            found.push(pid);
        }
    }
    found
}

/// What is still in `dir` (names, one level down too) once it is empty or `limit` passed.
fn left_after(dir: &Path, limit: Duration) -> Vec<String> {
    let until = Instant::now() + limit;
    loop {
        let mut names = Vec::new();
        for n in entries(dir) {
            names.extend(entries(&dir.join(&n)).into_iter().map(|i| format!("{n}/{i}")));
            names.push(n);
        }
        if names.is_empty() || Instant::now() >= until {
            return names;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < until, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How the job is ended.
#[derive(Debug, Clone, Copy)]
enum Ending {
    KillWorker,
    TermWorker,
    TermLauncher,
    IntLauncher,
}

/// Starts a spilling sort on 2 workers, ends it as `ending` says once it has spilled, and
/// checks that everything is gone within 2 s of `heddle run` exiting.
fn end_a_spilling_sort(ending: Ending) {
    let name = format!("{ending:?}").to_lowercase();
    let (spill, runtime) =
        (fresh_dir(&format!("{name}-spill")), fresh_dir(&format!("{name}-runtime")));
    let mark = marker(&name);
    let ts = example("terasort_dataflow");
    let args = [
        "run",
        "-n",
        "2",
        "--",
        &ts,
        "--records",
        "30000000",
        "--mem-budget",
        "200000",
        "--spill-dir",
        spill.to_str().unwrap(),
    ];
    let mut cmd = command(&mark, &args);
    cmd.env("XDG_RUNTIME_DIR", &runtime);
    let child: Child = cmd.spawn().expect("spawn heddle");
    let launcher = child.id();
    wait_until("the sort spills", Duration::from_secs(60), || {
        entries(&spill).iter().any(|n| n.starts_with("heddle-scratch-"))
    });
    assert_eq!(entries(&runtime).len(), 1, "one job directory: {:?}", entries(&runtime));
    let job_dir = runtime.join(&entries(&runtime)[0]);
    assert_eq!(std::fs::metadata(&job_dir).unwrap().permissions().mode() & 0o777, 0o700);
    // The launcher's children are its guardian (a fork of the launcher) and the workers.
    let is_worker = |p: &u32| {
        std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e.ends_with("terasort_dataflow"))
    };
    let workers: Vec<u32> = children_of(launcher).into_iter().filter(is_worker).collect();
    assert_eq!(workers.len(), 2, "workers {workers:?}");
    let (target, sig) = match ending {
        Ending::KillWorker => (*workers.last().unwrap(), 9),
        Ending::TermWorker => (*workers.last().unwrap(), 15),
        Ending::TermLauncher => (launcher, 15),
        Ending::IntLauncher => (launcher, 2),
    };
    // SAFETY: signalling a process of this test.
    unsafe { libc_kill(target as i32, sig) };
    let out = wait_bounded(child, Duration::from_secs(30));
    assert!(!out.status.success(), "{ending:?}: the job must fail: {}", text(&out.stderr));
    let exited = Instant::now();
    let left = left_after(&spill, Duration::from_secs(2));
    assert!(
        left.is_empty(),
        "{ending:?}: left in the spill directory 2 s after the exit: {left:?}"
    );
    wait_until("the job directory is removed", Duration::from_secs(2), || {
        entries(&runtime).is_empty()
    });
    assert!(exited.elapsed() < Duration::from_secs(2));
    assert_no_survivors(&mark);
    assert_eq!(stale_segments(), Vec::<String>::new(), "segments of dead processes in /dev/shm");
    std::fs::remove_dir_all(&spill).unwrap();
    std::fs::remove_dir_all(&runtime).unwrap();
}

#[test]
fn a_killed_worker_leaves_no_spill_files() {
    end_a_spilling_sort(Ending::KillWorker);
}

#[test]
fn a_terminated_worker_leaves_no_spill_files() {
    end_a_spilling_sort(Ending::TermWorker);
}

#[test]
fn sigterm_to_the_launcher_leaves_no_spill_files() {
    end_a_spilling_sort(Ending::TermLauncher);
}

#[test]
fn ctrl_c_to_the_launcher_leaves_no_spill_files() {
    end_a_spilling_sort(Ending::IntLauncher);
}

#[test]
fn a_successful_job_leaves_nothing_and_kills_what_workers_left_running() {
    let runtime = fresh_dir("success-runtime");
    let mark = marker("success");
    // Each worker starts a background sleeper and exits 0 at once.
    let mut cmd = command(
        &mark,
        &[
            "run",
            "-n",
            "2",
            "--",
            "sh",
            "-c",
            "stat -c '%a' \"$HEDDLE_JOB_DIR\"; sleep 300 & exit 0",
        ],
    );
    cmd.env("XDG_RUNTIME_DIR", &runtime);
    let out = wait_bounded(cmd.spawn().expect("spawn"), Duration::from_secs(30));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_eq!(stdout.matches("] 700").count(), 2, "the job directory is private: {stdout}");
    assert_no_survivors(&mark);
    wait_until("the job directory is removed", Duration::from_secs(2), || {
        entries(&runtime).is_empty()
    });
    std::fs::remove_dir_all(&runtime).unwrap();
}

#[test]
fn what_workers_started_dies_with_a_killed_launcher() {
    let runtime = fresh_dir("sigkill-runtime");
    let mark = marker("grandchildren");
    let mut cmd =
        command(&mark, &["run", "-n", "2", "--", "sh", "-c", "sleep 300 & sleep 300 & wait"]);
    cmd.env("XDG_RUNTIME_DIR", &runtime);
    let mut child = cmd.spawn().expect("spawn");
    // The launcher, its guardian, 2 shells and 4 sleepers carry the mark.
    wait_until("the sleepers start", Duration::from_secs(20), || survivors(&mark).len() >= 8);
    child.kill().expect("SIGKILL the launcher");
    let _ = child.wait();
    assert_no_survivors(&mark);
    // The next job reaps the dead launcher's job directory.
    assert_eq!(entries(&runtime).len(), 1, "{:?}", entries(&runtime));
    let mark = marker("next");
    let mut cmd = command(&mark, &["run", "-n", "1", "--", "true"]);
    cmd.env("XDG_RUNTIME_DIR", &runtime);
    let out = wait_bounded(cmd.spawn().expect("spawn"), Duration::from_secs(30));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        entries(&runtime).is_empty(),
        "stale job directory not reaped: {:?}",
        entries(&runtime)
    );
    std::fs::remove_dir_all(&runtime).unwrap();
}

#[test]
fn stale_segments_and_scratch_dirs_of_dead_processes_are_reaped() {
    let spill = fresh_dir("stale-spill");
    // A pid above the kernel's limit (2^22) is never alive.
    let dead: u64 = (1 << 22) + 11;
    let segment = PathBuf::from(format!("/dev/shm/heddle-staletest{}-0", std::process::id()));
    let mut preamble = Vec::new();
    for w in [u64::from_le_bytes(*b"HEDDLSHM"), 2, 4, 4096, dead] {
        preamble.extend_from_slice(&w.to_le_bytes());
    }
    std::fs::write(&segment, &preamble).unwrap();
    std::fs::set_permissions(&segment, std::fs::Permissions::from_mode(0o600)).unwrap();
    let scratch = spill.join(format!("heddle-scratch-{dead}-0-0"));
    std::fs::create_dir(&scratch).unwrap();
    std::fs::write(scratch.join("heddle-spill-0.run"), b"old").unwrap();
    let mark = marker("reap");
    let ts = example("terasort_dataflow");
    let (out, _) = run(
        &mark,
        &[
            "run",
            "-n",
            "2",
            "--",
            &ts,
            "--records",
            "20000",
            "--mem-budget",
            "100000",
            "--spill-dir",
            spill.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!segment.exists(), "the stale segment was not reaped");
    assert!(
        entries(&spill).is_empty(),
        "stale scratch directory not reaped: {:?}",
        entries(&spill)
    );
    std::fs::remove_dir_all(&spill).unwrap();
}

/// Under `umask 000` the job directory is still private: mode 0700, and another user
/// (`nobody`, through `setpriv`; this test runs as root, as CI does) cannot list it.
#[test]
fn the_job_directory_is_private_under_umask_000() {
    assert!(
        std::process::Command::new("setpriv").arg("--version").output().is_ok(),
        "setpriv (util-linux) is needed"
    );
    let runtime = fresh_dir("umask-runtime");
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mark = marker("umask");
    let heddle = heddle().display().to_string();
    let worker = "stat -c '%a' \"$HEDDLE_JOB_DIR\"; \
                  if setpriv --reuid=65534 --regid=65534 --clear-groups ls \"$HEDDLE_JOB_DIR\" \
                  >/dev/null 2>&1; then echo readable; else echo refused; fi";
    let script =
        format!("umask 000; exec {heddle} run -n 2 -- sh -c '{}'", worker.replace('\'', r"'\''"));
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", &script]).env("HDTEST_MARK", &mark).env("XDG_RUNTIME_DIR", &runtime);
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = wait_bounded(cmd.spawn().expect("spawn"), Duration::from_secs(30));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert_eq!(stdout.matches("] 700").count(), 2, "{stdout}");
    assert_eq!(
        stdout.matches("] refused").count(),
        2,
        "another user could list the job directory: {stdout}"
    );
    assert_no_survivors(&mark);
    std::fs::remove_dir_all(&runtime).unwrap();
}

/// Every file and directory under `roots`, and the shared-memory segments mapped by the
/// processes `owners`: (path, mode, is_dir).
fn job_files(roots: &[&Path], owners: &[u32]) -> Vec<(PathBuf, u32, bool)> {
    fn walk(p: &Path, out: &mut Vec<(PathBuf, u32, bool)>) {
        // A run merged away is gone; a map_files entry is a link to follow.
        let meta = if p.starts_with("/proc") {
            std::fs::metadata(p)
        } else {
            std::fs::symlink_metadata(p)
        };
        let Ok(meta) = meta else { return };
        out.push((p.to_path_buf(), meta.permissions().mode() & 0o777, meta.is_dir()));
        if meta.is_dir() {
            for e in
                std::fs::read_dir(p).map(|d| d.flatten().collect::<Vec<_>>()).unwrap_or_default()
            {
                walk(&e.path(), out);
            }
        }
    }
    let mut out = Vec::new();
    for root in roots {
        for e in std::fs::read_dir(root).unwrap().flatten() {
            walk(&e.path(), &mut out);
        }
    }
    // A worker unlinks its segment once its peers have mapped it: the mappings of the
    // owners' segments stay reachable (for root) through /proc/PID/map_files.
    for pid in owners {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        for line in maps.lines().filter(|l| l.contains("/dev/shm/heddle-")) {
            let range = line.split(' ').next().unwrap_or_default();
            walk(Path::new(&format!("/proc/{pid}/map_files/{range}")), &mut out);
        }
    }
    out
}

/// Under `umask 000`, a spilling sort's shared-memory rings, spill runs and their
/// directories, and its job directory are private: files 0600, directories 0700, and
/// another user (`nobody`, through `setpriv`; this test runs as root, as CI does) can
/// open none of them.
#[test]
fn segments_and_spill_runs_of_a_job_are_private_under_umask_000() {
    assert!(
        std::process::Command::new("setpriv").arg("--version").output().is_ok(),
        "setpriv (util-linux) is needed"
    );
    let (spill, runtime) = (fresh_dir("umask-job-spill"), fresh_dir("umask-job-runtime"));
    for d in [&spill, &runtime] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let mark = marker("umask-job");
    let (heddle, ts) = (heddle().display().to_string(), example("terasort_dataflow"));
    let script = format!(
        "umask 000; exec {heddle} run -n 2 -- {ts} --records 30000000 --mem-budget 200000 \
         --spill-dir {}",
        spill.display()
    );
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", &script]).env("HDTEST_MARK", &mark).env("XDG_RUNTIME_DIR", &runtime);
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().expect("spawn");
    let launcher = child.id();
    wait_until("the sort spills", Duration::from_secs(60), || {
        job_files(&[&spill], &[])
            .iter()
            .any(|(p, _, dir)| !dir && p.to_string_lossy().contains("heddle-scratch-"))
    });
    let is_worker = |p: &u32| {
        std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e.ends_with("terasort_dataflow"))
    };
    let workers: Vec<u32> = children_of(launcher).into_iter().filter(is_worker).collect();
    let found = job_files(&[&spill, &runtime], &workers);
    let segments = found.iter().filter(|(p, _, _)| p.starts_with("/proc")).count();
    assert!(segments >= 2, "the workers' rings in /dev/shm: {found:?}");
    let mut opened = Vec::new();
    for (path, mode, dir) in &found {
        assert_eq!(*mode, if *dir { 0o700 } else { 0o600 }, "{} under umask 000", path.display());
        let probe = if *dir {
            format!("ls {}", path.display())
        } else {
            format!("cat {} >/dev/null", path.display())
        };
        let other = std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", &probe])
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        if other.success() && path.exists() {
            opened.push(path.clone());
        }
    }
    assert!(opened.is_empty(), "another user opened {opened:?}");
    // SAFETY: signalling a process of this test.
    unsafe { libc_kill(launcher as i32, 15) };
    let _ = wait_bounded(child, Duration::from_secs(30));
    assert_no_survivors(&mark);
    wait_until("the spill directory is empty", Duration::from_secs(2), || {
        entries(&spill).is_empty()
    });
    std::fs::remove_dir_all(&spill).unwrap();
    std::fs::remove_dir_all(&runtime).unwrap();
}
