//! JSON values to Python objects and back (JSON-lines input and output of data sets).

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

use crate::errors::argument;

/// The Python object of a JSON value (objects become dicts, arrays lists).
pub(crate) fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(a) => {
            PyList::new(py, a.iter().map(|x| to_py(py, x)).collect::<PyResult<Vec<_>>>()?)?
                .into_any()
        }
        Value::Object(o) => {
            let d = PyDict::new(py);
            for (k, x) in o {
                d.set_item(k, to_py(py, x)?)?;
            }
            d.into_any()
        }
    })
}

/// The JSON value of a Python object: dicts (keys: str, or int/float/bool/None written as
/// text, as `json.dumps` does), lists and tuples, str, int, finite float, bool, None.
pub(crate) fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    if obj.is_none() {
        Ok(Value::Null)
    } else if let Ok(b) = obj.cast::<PyBool>() {
        Ok(Value::Bool(b.is_true()))
    } else if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            Ok(Value::Number(i.into()))
        } else if let Ok(u) = obj.extract::<u64>() {
            Ok(Value::Number(u.into()))
        } else {
            Err(argument("an int beyond 64 bits cannot be written as JSON here"))
        }
    } else if let Ok(f) = obj.cast::<PyFloat>() {
        Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| argument(format!("{} is not a JSON number", f.value())))
    } else if let Ok(s) = obj.cast::<PyString>() {
        Ok(Value::String(s.to_str()?.to_owned()))
    } else if let Ok(l) = obj.cast::<PyList>() {
        l.iter().map(|x| from_py(&x)).collect::<PyResult<Vec<_>>>().map(Value::Array)
    } else if let Ok(t) = obj.cast::<PyTuple>() {
        t.iter().map(|x| from_py(&x)).collect::<PyResult<Vec<_>>>().map(Value::Array)
    } else if let Ok(d) = obj.cast::<PyDict>() {
        let mut m = Map::new();
        for (k, v) in d.iter() {
            let key = if let Ok(s) = k.cast::<PyString>() {
                s.to_str()?.to_owned()
            } else if k.is_none() {
                "null".to_owned()
            } else if let Ok(b) = k.cast::<PyBool>() {
                if b.is_true() { "true" } else { "false" }.to_owned()
            } else if k.is_instance_of::<PyInt>() || k.is_instance_of::<PyFloat>() {
                k.str()?.to_str()?.to_owned()
            } else {
                return Err(argument(format!(
                    "JSON object keys must be str, int, float, bool or None, not {}",
                    k.get_type().name()?
                )));
            };
            m.insert(key, from_py(&v)?);
        }
        Ok(Value::Object(m))
    } else {
        Err(argument(format!("{} is not JSON serializable", obj.get_type().name()?)))
    }
}
