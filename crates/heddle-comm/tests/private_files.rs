//! Everything heddle-comm creates is private to its user, even under `umask 000`: another
//! user (`nobody`, through `setpriv`) can neither read nor write a shared-memory segment,
//! and a segment another user could write is refused. (Spill runs: heddle-dataflow's
//! `private_spill.rs`.)
//!
//! Needs root (to act as `nobody`) and `setpriv` (util-linux): without them the test fails
//! loudly instead of passing unchecked.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

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
fn segments_are_private_under_umask_000() {
    // SAFETY: geteuid and umask have no memory effects; this file holds one test, so no
    // other thread of this process creates files meanwhile.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test acts as another user and must run as root (CI runs as root)"
    );
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
    assert!(
        !as_nobody(&format!("printf x | dd of={q} conv=notrunc 2>/dev/null")),
        "another user wrote the segment"
    );

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
}
