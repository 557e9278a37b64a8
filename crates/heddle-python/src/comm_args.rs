//! The arguments of `heddle._heddle.comm.Comm`'s buffer methods: the `IN_PLACE` marker,
//! operators, matching buffer pairs and lengths, alignment, `[buffer, counts]` and tags.

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::buffer::{Buffer, Region};
use crate::errors::argument;
use crate::op::{OpCode, PyOp};

/// Marker for `sendbuf` (or, for `Scatter` at the root, `recvbuf`): the data is already in
/// the other buffer (mpi4py's `MPI.IN_PLACE`).
#[pyclass(frozen, module = "heddle._heddle.comm", name = "InPlace")]
#[derive(Debug)]
pub(crate) struct InPlace;

#[pymethods]
impl InPlace {
    fn __repr__(&self) -> &'static str {
        "heddle.IN_PLACE"
    }

    fn __reduce__(&self) -> &'static str {
        "IN_PLACE"
    }
}

/// Whether `obj` is `heddle.IN_PLACE`.
pub(crate) fn in_place(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_instance_of::<InPlace>()
}

/// The operator argument (SUM when absent).
pub(crate) fn op_code(op: Option<&Bound<'_, PyAny>>) -> PyResult<OpCode> {
    match op {
        None => Ok(OpCode::Sum),
        Some(o) => match o.cast::<PyOp>() {
            Ok(op) => Ok(op.get().code),
            Err(_) => Err(argument(format!(
                "op must be one of heddle.SUM, PROD, MAX, MIN, LAND, LOR, BAND, BOR, BXOR, not {}",
                o.repr().map(|r| r.to_string()).unwrap_or_else(|_| "?".into())
            ))),
        },
    }
}

/// Fails unless the two buffers have the same element type.
pub(crate) fn check_pair(
    what: &str,
    send: &Buffer,
    send_name: &str,
    recv: &Buffer,
    recv_name: &str,
) -> PyResult<()> {
    if !send.same_type(recv) {
        return Err(argument(format!(
            "{what}: {send_name} ({}) and {recv_name} ({}) have different element types",
            send.describe(),
            recv.describe()
        )));
    }
    Ok(())
}

/// Fails unless `buf` holds `expected_bytes` (`why` says how many that is).
pub(crate) fn check_len(
    what: &str,
    name: &str,
    buf: &Buffer,
    expected_bytes: usize,
    why: &str,
) -> PyResult<()> {
    if buf.bytes() != expected_bytes {
        return Err(argument(format!(
            "{what}: {name} is {} but must hold {} elements ({why})",
            buf.describe(),
            expected_bytes / buf.itemsize
        )));
    }
    Ok(())
}

/// A typed region of `buf`, checked for alignment.
pub(crate) fn aligned(buf: &Buffer, name: &str) -> PyResult<Region> {
    let r = buf.region();
    if !r.aligned_for(buf.itemsize.min(8)) {
        return Err(argument(format!(
            "{name} is not aligned for its {}-byte elements; copy it first",
            buf.itemsize
        )));
    }
    Ok(r)
}

/// A vector collective's buffer spec, as mpi4py takes it: `[buffer, counts]`,
/// `[buffer, (counts, displs)]` or `[buffer, counts, displs]` (counts and displacements in
/// elements, one per rank). Returns the buffer, the counts and the displacements if any.
pub(crate) fn vspec<'py>(
    obj: &Bound<'py, PyAny>,
    name: &str,
) -> PyResult<(Bound<'py, PyAny>, Vec<usize>, Option<Vec<usize>>)> {
    let forms = "[buffer, counts], [buffer, (counts, displs)] or [buffer, counts, displs] \
                 (in elements, one per rank; the type is the buffer's)";
    let parts: Vec<Bound<'py, PyAny>> = if let Ok(l) = obj.cast::<PyList>() {
        l.iter().collect()
    } else if let Ok(t) = obj.cast::<PyTuple>() {
        t.iter().collect()
    } else {
        return Err(argument(format!("{name} must be {forms}")));
    };
    let numbers = |o: &Bound<'py, PyAny>, what: &str| -> PyResult<Vec<usize>> {
        let values: Vec<i64> = o.extract().map_err(|_| {
            argument(format!("{name}: {what} must be a sequence of integers, one per rank"))
        })?;
        values
            .into_iter()
            .map(|v| {
                usize::try_from(v)
                    .map_err(|_| argument(format!("{name}: {what} must not be negative")))
            })
            .collect()
    };
    match parts.as_slice() {
        [buf, counts] if counts.extract::<Vec<i64>>().is_ok() => {
            Ok((buf.clone(), numbers(counts, "counts")?, None))
        }
        [buf, pair] => {
            let (counts, displs): (Bound<'py, PyAny>, Bound<'py, PyAny>) =
                pair.extract().map_err(|_| argument(format!("{name} must be {forms}")))?;
            Ok((buf.clone(), numbers(&counts, "counts")?, Some(numbers(&displs, "displs")?)))
        }
        [buf, counts, displs] if displs.extract::<Vec<i64>>().is_ok() => {
            Ok((buf.clone(), numbers(counts, "counts")?, Some(numbers(displs, "displs")?)))
        }
        _ => Err(argument(format!("{name} must be {forms}; datatypes are not supported yet"))),
    }
}

/// A message tag.
pub(crate) fn tag_arg(tag: i64) -> PyResult<u32> {
    u32::try_from(tag).map_err(|_| argument(format!("tag {tag} is not in 0..=4294967295")))
}
