//! The keyed windows of `heddle._heddle.data.Stream` (`Stream.window`): the window kinds by
//! name, event times from a Python function, and results as ``heddle.data.Windowed``.

use std::time::Duration;

use heddle_data::{Window, Windowed};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

use crate::errors::argument;
use crate::record::{PyKey, PyObj};

/// An event time from `event_time`'s result: a non-negative int of milliseconds.
pub(crate) fn timestamp(t: &Bound<'_, PyAny>) -> PyResult<u64> {
    t.extract::<u64>().map_err(|_| {
        let shown =
            t.repr().map(|r| r.to_string()).unwrap_or_else(|_| "an unprintable object".into());
        argument(format!(
            "event_time must return a timestamp in milliseconds as a non-negative int \
             (e.g. int(time.time() * 1000)), got {shown}"
        ))
    })
}

/// A window result as a ``heddle.data.Windowed`` named tuple.
pub(crate) fn windowed(py: Python<'_>, w: Windowed<PyKey, PyObj>) -> PyResult<PyObj> {
    static CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let class = CLASS.import(py, "heddle.stream", "Windowed")?;
    Ok(PyObj::new(class.call1((
        w.key.into_py(py)?,
        w.start,
        w.end,
        w.value.into_bound(py),
        w.records,
        w.update,
    ))?))
}

/// The window `kind` names, with sizes in ms (count windows: in records).
pub(crate) fn window_of(
    kind: &str,
    size: u64,
    slide: u64,
    event: Option<(u64, u64)>,
) -> PyResult<Window> {
    if size == 0 || slide == 0 {
        return Err(argument(format!(
            "a {kind} window needs a size and slide of at least 1, got {size} and {slide}"
        )));
    }
    let ms = Duration::from_millis;
    let w = match kind {
        "tumbling_count" => Window::tumbling_count(size),
        "sliding_count" => Window::sliding_count(size, slide),
        "tumbling" => Window::tumbling(ms(size)),
        "sliding" => Window::sliding(ms(size), ms(slide)),
        "session" => Window::session(ms(size)),
        _ => {
            return Err(argument(format!(
                "unknown window kind {kind:?}: use tumbling, sliding, session, tumbling_count or \
                 sliding_count"
            )))
        }
    };
    Ok(match event {
        Some((out_of_orderness, lateness)) => w.event_time(ms(out_of_orderness), ms(lateness)),
        None => w,
    })
}
