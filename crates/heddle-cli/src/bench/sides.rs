//! The two sides of the comparison: where their programs are and the command line of each.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::args::Transport;
use super::child::run_captured;
use super::BoxError;

/// Where the MPI peer lives, relative to the repository root.
pub(super) const MPI_SETUP: &str = "benches/mpi/setup.sh";
const MPI_SCRIPT: &str = "benches/mpi/bench_collectives.py";

/// Name of the cargo example that is the Heddle side.
const HEDDLE_EXAMPLE: &str = "bench_collectives";

/// Extra `mpirun` flags, always passed (measured on the 2-core dev VM with Open MPI 4.1.4 from
/// Debian; see `benches/mpi/README.md` for the numbers).
///
/// * `--mca pml ob1 --mca btl self,vader`: the shared-memory transport. Open MPI picks it
///   anyway on one host (UCX/OFI find no hardware here); forcing it skips probing the TCP,
///   openib and OFI components and makes the choice explicit.
/// * `--mca btl_vader_single_copy_mechanism none`: copy-in/copy-out through the shared
///   segment instead of the default CMA single copy (`process_vm_readv`). CMA works in this
///   container, but is slower here: with it, allreduce/broadcast/allgather/alltoall at 64 KiB
///   take 1.9-2.7x longer, allreduce 1 MiB 108 vs 72 µs, broadcast 1 MiB 69 vs 22 µs and
///   16 MiB point-to-point runs at 22 instead of 31 GB/s; only alltoall 1 MiB at 2 ranks is
///   better with CMA (47 vs 67 µs). So this is Open MPI's fastest configuration on this machine.
/// * `--bind-to none`: Open MPI binds each rank to a core by default when ranks <= cores;
///   Heddle workers are not pinned, and on a shared 2-core VM pinning gives no faster medians
///   but much worse tails whenever another process wants a core the rank is pinned to.
///
/// `--oversubscribe` is added only when there are more ranks than cores (Open MPI then also
/// yields the CPU while it polls).
pub(super) const MPIRUN_FLAGS: &[&str] = &[
    "--bind-to",
    "none",
    "--mca",
    "pml",
    "ob1",
    "--mca",
    "btl",
    "self,vader",
    "--mca",
    "btl_vader_single_copy_mechanism",
    "none",
];

/// Everything needed to launch either side at any world size.
#[derive(Debug)]
pub(super) struct SideCommands {
    /// The repository root, the working directory of both sides.
    pub(super) root: PathBuf,
    /// This `heddle` executable, which launches the Heddle side with `heddle run`.
    pub(super) heddle_exe: PathBuf,
    /// The `bench_collectives` example binary.
    pub(super) example: PathBuf,
    /// The virtualenv python that runs the MPI script.
    pub(super) python: PathBuf,
    /// The arguments both benchmark programs receive.
    pub(super) program_args: Vec<String>,
    /// Transport forced on the Heddle side, if any.
    pub(super) transport: Option<Transport>,
    /// Cores on this machine (`mpirun` oversubscribes beyond them).
    pub(super) cores: usize,
}

impl SideCommands {
    /// `heddle run -n <n> -- <example> <program args>`, with `HEDDLE_TRANSPORT` when forced.
    pub(super) fn heddle(&self, n: usize) -> Command {
        let mut cmd = Command::new(&self.heddle_exe);
        cmd.arg("run")
            .arg("-n")
            .arg(n.to_string())
            .arg("--")
            .arg(&self.example)
            .args(&self.program_args);
        cmd.current_dir(&self.root);
        if let Some(t) = self.transport {
            cmd.env("HEDDLE_TRANSPORT", t.as_str());
        }
        cmd
    }

    /// `mpirun <mpirun args> <python> benches/mpi/bench_collectives.py <program args>`.
    pub(super) fn mpi(&self, n: usize) -> Command {
        let mut cmd = Command::new("mpirun");
        cmd.args(mpirun_args(n, self.cores))
            .arg(&self.python)
            .arg(self.root.join(MPI_SCRIPT))
            .args(&self.program_args);
        cmd.current_dir(&self.root)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        cmd
    }
}

/// The `mpirun` arguments before the program, for `n` ranks on a machine with `cores` cores.
fn mpirun_args(n: usize, cores: usize) -> Vec<String> {
    let mut v = vec!["-n".to_string(), n.to_string()];
    if n > cores {
        v.push("--oversubscribe".to_string());
    }
    v.extend(MPIRUN_FLAGS.iter().map(|s| (*s).to_string()));
    v
}

/// Finds the repository: the first ancestor of the current directory, then of the current
/// executable, that contains `benches/mpi/setup.sh`.
pub(super) fn find_repo_root() -> Result<PathBuf, BoxError> {
    let mut starts = Vec::new();
    if let Ok(dir) = std::env::current_dir() {
        starts.push(dir);
    }
    if let Some(dir) = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf))
    {
        starts.push(dir);
    }
    for start in &starts {
        for dir in start.ancestors() {
            if dir.join(MPI_SETUP).is_file() {
                return Ok(dir.to_path_buf());
            }
        }
    }
    Err(format!(
        "cannot find the Heddle repository (a directory with {MPI_SETUP}) above {}: \
         run this from inside the repository",
        starts.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" or ")
    )
    .into())
}

/// `<target>/release/examples/bench_collectives`, where `<target>` is `$CARGO_TARGET_DIR` or
/// `<repo>/target`.
pub(super) fn find_heddle_example(root: &Path) -> Result<PathBuf, BoxError> {
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => root.join(dir),
        _ => root.join("target"),
    };
    let exe = target.join("release").join("examples").join(HEDDLE_EXAMPLE);
    if exe.is_file() {
        Ok(exe)
    } else {
        Err(format!(
            "the Heddle side of the benchmark is missing: {} does not exist.\n\
             Build it first with: cargo build --release --examples",
            exe.display()
        )
        .into())
    }
}

/// Runs `benches/mpi/setup.sh` and returns the venv python it prints on its last line.
pub(super) fn run_setup(root: &Path, timeout: Duration) -> Result<PathBuf, BoxError> {
    let setup = root.join(MPI_SETUP);
    let mut cmd = Command::new("bash");
    cmd.arg(&setup).current_dir(root);
    let out = run_captured(&mut cmd, timeout, false)
        .map_err(|e| format!("cannot run {}: {e}", setup.display()))?;
    if out.timed_out || !out.status.success() {
        return Err(format!(
            "{} failed ({}); see its messages above",
            setup.display(),
            if out.timed_out { "timed out".to_string() } else { out.status.to_string() }
        )
        .into());
    }
    let python = out
        .lines
        .iter()
        .rev()
        .map(|l| l.trim())
        .find(|l| !l.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| format!("{} printed no python path", setup.display()))?;
    if !python.is_file() {
        return Err(format!(
            "{} printed {}, which is not a file",
            setup.display(),
            python.display()
        )
        .into());
    }
    Ok(python)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpirun_oversubscribes_only_beyond_cores() {
        let two = mpirun_args(2, 2);
        assert_eq!(&two[..2], &["-n", "2"]);
        assert!(!two.iter().any(|a| a == "--oversubscribe"));
        assert!(mpirun_args(4, 2).iter().any(|a| a == "--oversubscribe"));
    }
}
