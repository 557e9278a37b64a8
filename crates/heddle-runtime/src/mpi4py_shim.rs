//! `heddle run --mpi4py`: programs written for mpi4py run on Heddle unchanged. The job's
//! workers find a package `mpi4py` first on their `PYTHONPATH`, in the job's private
//! directory, whose `MPI` is `heddle.MPI`; an mpi4py installed on the machine is not
//! shadowed anywhere else, and the package goes with the job directory when the job ends.

use std::io::Write;
use std::path::Path;

use heddle_comm::private;

use crate::{Error, Result};

/// The package's `__init__.py`: the work is done by `heddle._mpi4py`, in the installed
/// Heddle, so this text never changes with Heddle's versions.
const INIT_PY: &str = "\"\"\"mpi4py answered by Heddle for this job (heddle run --mpi4py): \
`from mpi4py import MPI` gives heddle.MPI.\"\"\"\n\nfrom heddle._mpi4py import install as \
_install\n\n_install(__name__)\n";

/// `mpi4py.futures`: `heddle.futures`, which has mpi4py's names too.
const FUTURES_INIT_PY: &str = "\"\"\"mpi4py.futures answered by Heddle for this job: \
heddle.futures.\"\"\"\n\nfrom heddle.futures import *  # noqa: F403\nfrom heddle.futures \
import MPICommExecutor, MPIPoolExecutor  # noqa: F401\n";

/// `python -m mpi4py.futures script.py`: `python -m heddle.futures script.py`.
const FUTURES_MAIN_PY: &str = "import sys\n\nfrom heddle.futures.__main__ import main\n\n\
sys.exit(main(sys.argv[1:]))\n";

/// Where the package goes in the job directory.
const SHIM_DIR: &str = "mpi4py-shim";

/// Writes the package into `job_dir` and returns the workers' `PYTHONPATH`: the package
/// first, then `inherited`.
///
/// # Errors
/// [`Error::Io`] naming the file that could not be written.
pub(crate) fn install(job_dir: &Path, inherited: Option<&str>) -> Result<Vec<(String, String)>> {
    let root = job_dir.join(SHIM_DIR);
    let package = root.join("mpi4py");
    let futures = package.join("futures");
    for dir in [&root, &package, &futures] {
        private::create_dir(dir)
            .map_err(|e| Error::io(format!("making {} for --mpi4py", dir.display()), e))?;
    }
    for (file, text) in [
        (package.join("__init__.py"), INIT_PY),
        (futures.join("__init__.py"), FUTURES_INIT_PY),
        (futures.join("__main__.py"), FUTURES_MAIN_PY),
    ] {
        private::create_file(&file)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(|e| Error::io(format!("writing {} for --mpi4py", file.display()), e))?;
    }
    let mut path = root.display().to_string();
    if let Some(rest) = inherited.filter(|p| !p.is_empty()) {
        path = format!("{path}:{rest}");
    }
    Ok(vec![("PYTHONPATH".into(), path)])
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn the_package_is_private_and_comes_first_on_the_path() {
        let dir = std::env::temp_dir().join(format!("heddle-shim-test-{}", std::process::id()));
        private::create_dir(&dir).unwrap();
        let env = install(&dir, Some("/opt/lib")).unwrap();
        let root = dir.join(SHIM_DIR);
        assert_eq!(env[0], ("PYTHONPATH".into(), format!("{}:/opt/lib", root.display())));
        let init = root.join("mpi4py/__init__.py");
        assert_eq!(std::fs::read_to_string(&init).unwrap(), INIT_PY);
        let main = root.join("mpi4py/futures/__main__.py");
        assert_eq!(std::fs::read_to_string(main).unwrap(), FUTURES_MAIN_PY);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&root), mode(&init)), (0o700, 0o600));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
