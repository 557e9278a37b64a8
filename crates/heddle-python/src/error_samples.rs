//! One sample of every variant of every layer's error, mapped to its exception class by
//! `errors` (`_heddle._error_mapping()`, for `tests/python/test_errors.py`): the variants
//! are listed from each error enum (its strum-derived `ErrorVariant`), so a variant added
//! without a sample here shows up with no class and fails the test.

use std::io;
use std::time::Duration;

use heddle_comm::AbortCause;
use pyo3::prelude::*;
use pyo3::types::PyType;
use strum::IntoEnumIterator;

use crate::errors;

/// `(layer, variant, class)`: the class is `None` for a variant without a sample.
type Row<'py> = (&'static str, &'static str, Option<Bound<'py, PyType>>);

fn comm() -> Vec<heddle_comm::Error> {
    use heddle_comm::Error as E;
    vec![
        E::Io { context: "cannot connect to rank 1".into(), source: io::Error::other("refused") },
        E::Wire { rank: 1, source: heddle_wire::Error::UnknownKind(99) },
        E::PeerLost { rank: 1, detail: "connection reset".into() },
        E::Timeout { op: "recv", waited: Duration::from_secs(3), detail: "rank 1".into() },
        E::Truncated { rank: 1, got: 64, capacity: 8 },
        E::CollectiveMismatch { rank: 1, theirs: "bcast".into(), ours: "allreduce".into() },
        E::TypeMismatch { rank: 1, sent: "f64".into(), expected: "i32".into() },
        E::InvalidArgument("root 9 of 2 ranks".into()),
        E::Config("HEDDLE_TIMEOUT_S: not a number".into()),
        E::NotPrivate { path: "/tmp/heddle-x".into(), detail: "owned by uid 0".into() },
        E::Aborted(AbortCause::new(1, "Timeout", "recv timed out").in_task("sum[1]")),
        E::Serialization(Box::new(bincode::ErrorKind::Custom("bad record".into()))),
    ]
}

fn dataflow() -> Vec<heddle_dataflow::Error> {
    use heddle_dataflow::Error as E;
    vec![
        E::Comm(heddle_comm::Error::PeerLost { rank: 1, detail: "gone".into() }),
        E::InvalidArgument("a record of 4 GiB".into()),
        E::Serialization(Box::new(bincode::ErrorKind::Custom("bad record".into()))),
        E::Io { context: "spill file /tmp/s".into(), source: io::Error::other("disk full") },
    ]
}

fn runtime() -> Vec<heddle_runtime::Error> {
    use heddle_runtime::Error as E;
    vec![
        E::Io { context: "bind".into(), source: io::Error::other("address in use") },
        E::Comm(heddle_comm::Error::Config("HEDDLE_TRANSPORT: unknown".into())),
        E::Env("HEDDLE_RANK is missing".into()),
        E::Auth("wrong token".into()),
        E::Refused("rank 1 joined twice".into()),
        E::Protocol("unexpected message".into()),
        E::Timeout("workers did not all join within 60 s".into()),
        E::Spawn { program: "no-such-program".into(), source: io::Error::other("not found") },
    ]
}

/// A malformed row, as a data source reports it.
fn parse_error() -> heddle_data::Error {
    heddle_data::Error::Parse { path: "rows.csv".into(), line: 4, message: "2 fields".into() }
}

fn task() -> Vec<heddle_task::Error> {
    use heddle_task::Error as E;
    vec![
        E::Graph("a cycle".into()),
        E::Plan("no worker has 3 GPUs".into()),
        E::Task { task: "sum[0]".into(), message: "out of range".into() },
        // A data source's error carried out of the job: itself again.
        E::Raised { task: "read[0]".into(), kind: "Parse", source: Box::new(parse_error()) },
        E::Aborted("interrupted (Ctrl-C)".into()),
        E::Checkpoint { path: "/ckpt/stream-000000000004.ckpt".into(), message: "damaged".into() },
        E::Comm(heddle_comm::Error::Timeout {
            op: "barrier",
            waited: Duration::from_secs(3),
            detail: "rank 1".into(),
        }),
        E::Dataflow(heddle_dataflow::Error::InvalidArgument("no targets".into())),
    ]
}

fn data() -> Vec<heddle_data::Error> {
    use heddle_data::Error as E;
    vec![
        E::InvalidArgument("no paths".into()),
        E::Io { path: "rows.csv".into(), source: io::Error::other("permission denied") },
        parse_error(),
        E::Changed { path: "rows.csv".into(), detail: "it grew".into() },
        E::Task(heddle_task::Error::Plan("no worker has 3 GPUs".into())),
        E::Comm(heddle_comm::Error::Aborted(AbortCause::new(1, "Parse", "rows.csv line 4"))),
    ]
}

/// The rows of one layer: for each variant of `V` (in declaration order), the class of
/// its sample's exception, or `None` without a sample.
fn layer<'py, E, V>(
    py: Python<'py>,
    name: &'static str,
    samples: Vec<E>,
    map: fn(E) -> PyErr,
) -> Vec<Row<'py>>
where
    V: IntoEnumIterator + Copy + PartialEq + Into<&'static str> + for<'a> From<&'a E>,
{
    let mapped: Vec<(V, Bound<'py, PyType>)> =
        samples.into_iter().map(|e| (V::from(&e), map(e).get_type(py))).collect();
    let mut rows = Vec::new();
    for variant in V::iter() {
        let classes: Vec<_> = mapped.iter().filter(|(v, _)| *v == variant).collect();
        if classes.is_empty() {
            rows.push((name, variant.into(), None));
        }
        for (_, class) in classes {
            rows.push((name, variant.into(), Some(class.clone())));
        }
    }
    rows
}

/// `[(layer, variant, class)]` for every variant of every layer's error: the exception
/// class a sample of it maps to, or `None` for a variant without a sample (a bug).
#[pyfunction]
fn _error_mapping(py: Python<'_>) -> Vec<Row<'_>> {
    let mut rows = layer::<_, heddle_comm::ErrorVariant>(py, "comm", comm(), errors::comm);
    rows.extend(layer::<_, heddle_dataflow::ErrorVariant>(
        py,
        "dataflow",
        dataflow(),
        errors::dataflow,
    ));
    rows.extend(layer::<_, heddle_runtime::ErrorVariant>(
        py,
        "runtime",
        runtime(),
        errors::runtime,
    ));
    rows.extend(layer::<_, heddle_task::ErrorVariant>(py, "task", task(), errors::task));
    rows.extend(layer::<_, heddle_data::ErrorVariant>(py, "data", data(), errors::data));
    rows
}

/// Adds `_error_mapping` to `m`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_error_mapping, m)?)
}
