//! Keyed state of Python streams (`Stream.map_with_state`): each key's own Python object,
//! kept natively by `heddle_data::Stream::map_with_state` (pickled into checkpoints, as
//! records crossing workers are) and handed to a Python function with each of the key's
//! records.

use heddle_data::Stream;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::data_set::guarded;
use crate::errors::argument;
use crate::record::{pair_from, PyKey, PyObj};

/// `(out, new_state)` from what the state function returned.
fn out_and_state<'py>(
    r: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyAny>, Option<Bound<'py, PyAny>>)> {
    let Some(pair) = r.cast::<PyTuple>().ok().filter(|t| t.len() == 2) else {
        let shown =
            r.repr().map(|s| s.to_string()).unwrap_or_else(|_| "an unprintable object".into());
        return Err(argument(format!(
            "map_with_state: f(key, value, state) must return a pair (output, new_state), \
             got {shown}"
        )));
    };
    let state = pair.get_item(1)?;
    Ok((pair.get_item(0)?, (!state.is_none()).then_some(state)))
}

/// The stream of ``(key, value)`` records `st` through ``f(key, value, state)``, which
/// returns ``(output, new_state)``: each key's state is ``None`` before its first record,
/// and a ``None`` new state drops the key. A Python exception is recorded (the run ends
/// with it) and leaves the key's state as it was.
pub(crate) fn map_with_state(st: &Stream<PyObj>, f: Py<PyAny>) -> Stream<PyObj> {
    let pairs = st.flat_map(|x: PyObj| guarded(|py| pair_from(x.bind(py))));
    pairs.map_with_state(move |k: &PyKey, v: PyObj, state: &mut Option<PyObj>| {
        let stepped = guarded(|py| {
            let now =
                state.as_ref().map_or_else(|| py.None().into_bound(py), |s| s.bind(py).clone());
            let r = f.bind(py).call1((k.to_py(py)?, v.bind(py), now))?;
            let (out, next) = out_and_state(&r)?;
            Ok((PyObj::new(out), next.map(PyObj::new)))
        });
        match stepped {
            Some((out, next)) => {
                *state = next;
                out
            }
            // The run has failed: nothing more is written, and this record's state
            // is not committed (see `data_stream::PyStream::run_sink`).
            None => v,
        }
    })
}
