//! Spill runs are private to their user, even under `umask 000`: another user (`nobody`,
//! through `setpriv`) can neither list a scratch directory nor read a run.
//!
//! Needs root (to act as `nobody`) and `setpriv` (util-linux): without them the test fails
//! loudly instead of passing unchecked.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use heddle_dataflow::spill::{SpillConfig, SpillSorter};

/// Whether `nobody` succeeds in running `sh -c script`.
fn nobody_can(script: &str) -> bool {
    let args = ["--reuid=65534", "--regid=65534", "--clear-groups", "--", "sh", "-c", script];
    Command::new("setpriv")
        .args(args)
        .status()
        .expect("setpriv (util-linux) must be installed for this test")
        .success()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn quoted(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

#[test]
fn spill_runs_are_private_under_umask_000() {
    // SAFETY: geteuid and umask have no memory effects; this file holds one test, so no
    // other thread of this process creates files meanwhile.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test acts as another user and must run as root (CI runs as root)"
    );
    unsafe { libc::umask(0) };
    assert!(nobody_can("true"), "setpriv cannot switch to uid 65534");
    // Spill runs: a private scratch directory in a spill directory others may enter.
    let root = std::env::temp_dir().join(format!("heddle-privtest-spill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir(&root).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut sorter =
        SpillSorter::new(SpillConfig { dirs: vec![root.clone()], budget_bytes: 1024 }, None)
            .unwrap();
    for i in 0..2000u32 {
        sorter.push(i.to_be_bytes().to_vec(), vec![7; 16]).unwrap();
    }
    assert!(sorter.runs() > 0);
    let scratch: Vec<PathBuf> =
        std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(scratch.len(), 1, "one scratch directory: {scratch:?}");
    assert_eq!(mode(&scratch[0]), 0o700, "scratch directory mode under umask 000");
    assert_eq!(std::fs::metadata(&scratch[0]).unwrap().uid(), 0);
    let runs: Vec<PathBuf> =
        std::fs::read_dir(&scratch[0]).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(!runs.is_empty());
    for run in &runs {
        assert_eq!(mode(run), 0o600, "run file {} mode under umask 000", run.display());
    }
    assert!(
        !nobody_can(&format!("ls {} >/dev/null 2>&1", quoted(&scratch[0]))),
        "another user listed the scratch directory"
    );
    assert!(
        !nobody_can(&format!("cat {} >/dev/null 2>&1", quoted(&runs[0]))),
        "another user read a spill run"
    );
    let sorted: Vec<_> = sorter.finish().unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(sorted.len(), 2000);
    assert!(
        std::fs::read_dir(&root).unwrap().next().is_none(),
        "the scratch directory is removed after the sort"
    );
    std::fs::remove_dir(&root).unwrap();
}
