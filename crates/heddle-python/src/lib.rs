//! `heddle._heddle`: the native core of the Python package `heddle` (built by maturin from
//! the repository's `pyproject.toml`; the Python layer lives in `python/heddle`).
//!
//! Each area registers its classes and functions in [`_heddle`] (the version, exceptions,
//! launcher and record decoder) or in one of its submodules (see [`submodule`]):
//! `heddle._heddle.comm` — the communicator (`comm`, `comm_*`; `comm_objects` frames the
//! pickled objects of its lowercase calls) and reduction operators (`op`);
//! `heddle._heddle.task` — task graphs of Python tasks (`task_graph`, `task_context`,
//! `task_job`, with `task_adapters`, `task_records`, and the declarations `task_edge` and
//! `task_strategy`); `heddle._heddle.data` — data sets and streams of Python records
//! (`data_session`, `data_set`, `data_stream` with `data_stream_state` and `data_window`;
//! Parquet rows in `data_parquet`, written by `data_parquet_write` from the values of
//! `data_parquet_values`; checkpoints of streams and streaming task jobs in
//! `checkpointing`). Records are Python objects (`record`). Every call that may wait
//! releases the GIL through [`interrupt::blocking`] (Python callbacks inside native
//! runs take it back as they need it), Rust errors become the exception classes of
//! `heddle.errors` (made in `exceptions`, mapped by variant in `errors`, each variant's
//! mapping listed by `error_samples`), and a Python exception raised inside a native run
//! is raised as itself when the run returns (`failure`).

mod apps;
mod bridge;
mod buffer;
mod checkpointing;
mod comm;
mod comm_args;
mod comm_blocks;
mod comm_collectives;
mod comm_objects;
mod comm_p2p;
mod comm_requests;
mod comm_vector;
mod data_output;
mod data_parquet;
mod data_parquet_values;
mod data_parquet_write;
mod data_pipe;
mod data_session;
mod data_set;
mod data_stream;
mod data_stream_state;
mod data_text;
mod data_window;
mod error_samples;
mod errors;
mod exceptions;
mod failure;
mod interrupt;
mod json;
mod launcher;
mod ml;
mod op;
mod record;
mod task_adapters;
mod task_context;
mod task_edge;
mod task_graph;
mod task_job;
mod task_records;
mod task_strategy;

use pyo3::prelude::*;

/// Fuzzing entry points of the record and key decoders (feature `fuzzing`, for `fuzz/`).
#[cfg(feature = "fuzzing")]
pub use record::fuzz;

/// The extension's own (Rust) allocations — records, keys, buffers of native data-set
/// steps — use mimalloc, as the Rust examples do: glibc's malloc spent a fifth of a native
/// sort's time in `malloc_consolidate` and friends. Python objects keep Python's allocator.
/// (Not in fuzzing builds, where AddressSanitizer must see the allocations.)
#[cfg(not(feature = "fuzzing"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The extension module `heddle._heddle`: the version, the exception classes and a few
/// shared functions at the top; the rest in the submodules `comm`, `task` and `data`.
#[pymodule]
fn _heddle(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    heddle_task::set_fork_hooks(task_adapters::FORK_HOOKS);
    exceptions::register(m)?;
    error_samples::register(m)?;
    record::register(m)?;
    launcher::register(m)?;
    submodule(m, "comm", "Communicators, reduction operators and pickled-object framing.", |c| {
        op::register(c)?;
        comm::register(c)?;
        comm_requests::register(c)?;
        comm_objects::register(c)
    })?;
    submodule(m, "task", "Task graphs of Python tasks: declarations, plans and jobs.", |t| {
        task_context::register(t)?;
        task_strategy::register(t)?;
        task_edge::register(t)?;
        task_graph::register(t)?;
        task_job::register(t)
    })?;
    submodule(m, "bridge", "Bridged processes in other languages (spec/bridge.md).", |b| {
        bridge::register(b)
    })?;
    submodule(m, "ml", "Native kernels of machine-learning loops (heddle.ml).", ml::register)?;
    submodule(m, "apps", "Applications from the seeds (heddle.apps).", apps::register)?;
    submodule(m, "data", "Data sets and streams of Python records, and their writers.", |d| {
        data_session::register(d)?;
        data_set::register(d)?;
        data_output::register(d)?;
        data_pipe::register(d)?;
        data_parquet_write::register(d)?;
        data_stream::register(d)
    })?;
    Ok(())
}

/// Adds the submodule `heddle._heddle.<name>` (documented by `doc`, filled by `fill`) to
/// `m`, and to `sys.modules` under its full name, so that `import heddle._heddle.<name>`
/// (and unpickling a class it holds) finds it: an extension module is not a package.
fn submodule(
    m: &Bound<'_, PyModule>,
    name: &str,
    doc: &str,
    fill: impl FnOnce(&Bound<'_, PyModule>) -> PyResult<()>,
) -> PyResult<()> {
    let py = m.py();
    let full = format!("heddle._heddle.{name}");
    // Made under its full name, which its functions take as their `__module__`.
    let sub = PyModule::new(py, &full)?;
    sub.setattr("__doc__", doc)?;
    fill(&sub)?;
    m.add(name, &sub)?;
    py.import("sys")?.getattr("modules")?.set_item(full, sub)?;
    Ok(())
}
