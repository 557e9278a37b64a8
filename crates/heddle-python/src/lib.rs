//! `heddle._heddle`: the native core of the Python package `heddle` (built by maturin from
//! the repository's `pyproject.toml`; the Python layer lives in `python/heddle`).
//!
//! Each area registers its classes and functions in [`_heddle`]: the communicator
//! (`comm`), reduction operators (`op`) and the launcher (`launcher`). Later areas
//! (tasks, datasets) add a module here and a `register` call. Every call that may wait
//! releases the GIL through [`interrupt::blocking`], and Rust errors become the exception
//! classes of `heddle.errors` (`errors`).

mod buffer;
mod comm;
mod errors;
mod interrupt;
mod launcher;
mod op;

use pyo3::prelude::*;

/// The extension module `heddle._heddle`.
#[pymodule]
fn _heddle(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    op::register(m)?;
    comm::register(m)?;
    launcher::register(m)?;
    Ok(())
}
