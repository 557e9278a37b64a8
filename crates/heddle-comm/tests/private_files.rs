//! Everything heddle-comm creates is private to its user, even under `umask 000`: another
//! user (`nobody`, through `setpriv`) can neither read nor write a shared-memory segment, a
//! scratch directory or a spill run, and a segment another user could write is refused.
//!
//! Needs root (to act as `nobody`) and `setpriv` (util-linux): without them the test fails
//! loudly instead of passing unchecked.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use heddle_comm::spill::{SpillConfig, SpillSorter};
use heddle_comm::{CommConfig, Error, WorldBuilder};

const NOBODY: u32 = 65534;

/// Runs `sh -c script` as `nobody`; returns whether it succeeded.
fn as_nobody(script: &str) -> bool {
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--", "sh", "-c", script])
        .output()
        .expect("setpriv (util-linux) must be installed for this test");
    out.status.success()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

#[test]
fn segments_and_spill_runs_are_private_under_umask_000() {
    // SAFETY: geteuid and umask have no memory effects; this file holds one test, so no
    // other thread of this process creates files meanwhile.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test acts as another user and must run as root (CI runs as root)");
    unsafe { libc::umask(0) };
    assert!(as_nobody("true"), "setpriv cannot switch to uid {NOBODY}");

    // A shared-memory segment.
    let seg_path = PathBuf::from(format!("/dev/shm/heddle-privtest-{}-0", std::process::id()));
    let _ = std::fs::remove_file(&seg_path);
    let builder = WorldBuilder::new(0, 2, CommConfig::default()).unwrap();
    let segment = builder.create_segment(&seg_path).unwrap();
    assert_eq!(mode(&seg_path), 0o600, "segment mode under umask 000");
    let q = shell_quote(&seg_path);
    assert!(!as_nobody(&format!("cat {q} >/dev/null")), "another user read the segment");
    assert!(!as_nobody(&format!("printf x | dd of={q} conv=notrunc 2>/dev/null")), "another user wrote the segment");

    // A peer's segment that others may write, or that another user owns, is refused.
    let peer_path = PathBuf::from(format!("/dev/shm/heddle-privtest-{}-1", std::process::id()));
    let _ = std::fs::remove_file(&peer_path);
    let peer = builder.create_segment(&peer_path).unwrap();
    for (uid, perm) in [(0, 0o666), (0, 0o640), (NOBODY, 0o600)] {
        std::fs::set_permissions(&peer_path, std::fs::Permissions::from_mode(perm)).unwrap();
        std::os::unix::fs::chown(&peer_path, Some(uid), None).unwrap();
        let mut b = WorldBuilder::new(0, 2, CommConfig::default()).unwrap();
        let err = b.add_shm(1, &segment, &peer_path).unwrap_err();
        assert!(matches!(err, Error::NotPrivate { .. }), "uid {uid} mode {perm:o}: {err}");
        assert!(err.to_string().contains(&peer_path.display().to_string()), "{err}");
    }
    std::fs::set_permissions(&peer_path, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(&peer_path, Some(0), None).unwrap();
    let mut b = WorldBuilder::new(0, 2, CommConfig::default()).unwrap();
    b.add_shm(1, &segment, &peer_path).expect("a private segment of ours is accepted");
    drop((b, peer, segment));
    assert!(!seg_path.exists() && !peer_path.exists(), "segments are unlinked when dropped");

    // Spill runs: a private scratch directory in a spill directory others may enter.
    let root = std::env::temp_dir().join(format!("heddle-privtest-spill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir(&root).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut sorter = SpillSorter::new(SpillConfig { dirs: vec![root.clone()], budget_bytes: 1024 }, None).unwrap();
    for i in 0..2000u32 {
        sorter.push(i.to_be_bytes().to_vec(), vec![7; 16]).unwrap();
    }
    assert!(sorter.runs() > 0);
    let scratch: Vec<PathBuf> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(scratch.len(), 1, "one scratch directory: {scratch:?}");
    assert_eq!(mode(&scratch[0]), 0o700, "scratch directory mode under umask 000");
    assert_eq!(std::fs::metadata(&scratch[0]).unwrap().uid(), 0);
    let runs: Vec<PathBuf> = std::fs::read_dir(&scratch[0]).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(!runs.is_empty());
    for run in &runs {
        assert_eq!(mode(run), 0o600, "run file {} mode under umask 000", run.display());
    }
    assert!(!as_nobody(&format!("ls {} >/dev/null 2>&1", shell_quote(&scratch[0]))), "another user listed the scratch directory");
    assert!(!as_nobody(&format!("cat {} >/dev/null 2>&1", shell_quote(&runs[0]))), "another user read a spill run");
    let sorted: Vec<_> = sorter.finish().unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(sorted.len(), 2000);
    assert!(std::fs::read_dir(&root).unwrap().next().is_none(), "the scratch directory is removed after the sort");
    std::fs::remove_dir(&root).unwrap();
}
