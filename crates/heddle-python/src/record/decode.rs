//! Decoding records and keys from their encoding between workers. The bytes come from a
//! peer or a spill run: every length is checked against the input, nesting is bounded,
//! and nothing is allocated beyond what the input can hold, so malformed bytes are a
//! `heddle.CommError`, never a crash.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyFloat, PyInt, PyString, PyTuple};

use super::{float_from_order, loads, malformed, unescaped};
use super::{
    K_BIG_NEGATIVE, K_BIG_POSITIVE, K_BOOL, K_BYTES, K_FLOAT, K_INT, K_NONE, K_OTHER, K_STR,
    K_TUPLE,
};
use super::{V_BOOL, V_BYTES, V_FLOAT, V_INT, V_NONE, V_PICKLE, V_STR, V_TUPLE};

/// Deepest nesting of tuples a record or key may have: deeper input is malformed (a
/// decoder of untrusted bytes must not recurse without bound).
const MAX_DEPTH: usize = 512;

/// The object `bytes` encodes.
pub(super) fn decode_value<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    decode_value_at(py, bytes, 0)
}

fn decode_value_at<'py>(
    py: Python<'py>,
    bytes: &[u8],
    depth: usize,
) -> PyResult<Bound<'py, PyAny>> {
    if depth > MAX_DEPTH {
        return Err(malformed("tuples nested too deeply"));
    }
    let (&tag, rest) = bytes.split_first().ok_or_else(|| malformed("empty"))?;
    let eight = || -> PyResult<[u8; 8]> { rest.try_into().map_err(|_| malformed("number length")) };
    Ok(match tag {
        V_NONE => py.None().into_bound(py),
        V_BOOL => PyBool::new(py, rest.first() == Some(&1)).to_owned().into_any(),
        V_INT => i64::from_le_bytes(eight()?).into_pyobject(py)?.into_any(),
        V_FLOAT => PyFloat::new(py, f64::from_le_bytes(eight()?)).into_any(),
        V_STR => PyString::new(py, std::str::from_utf8(rest).map_err(|_| malformed("string"))?)
            .into_any(),
        V_BYTES => PyBytes::new(py, rest).into_any(),
        V_TUPLE => {
            let count = u32::from_le_bytes(
                rest.get(..4).ok_or_else(|| malformed("tuple"))?.try_into().expect("4 bytes"),
            ) as usize;
            // Every item takes at least 4 bytes: a count beyond that is malformed, and must
            // not be allocated for.
            let mut items = Vec::with_capacity(count.min(rest.len() / 4));
            let mut at = 4;
            for _ in 0..count {
                let len = u32::from_le_bytes(
                    rest.get(at..at + 4)
                        .ok_or_else(|| malformed("tuple"))?
                        .try_into()
                        .expect("4 bytes"),
                ) as usize;
                let item = rest.get(at + 4..at + 4 + len).ok_or_else(|| malformed("tuple item"))?;
                items.push(decode_value_at(py, item, depth + 1)?);
                at += 4 + len;
            }
            PyTuple::new(py, items)?.into_any()
        }
        V_PICKLE => loads(py, rest)?,
        _ => return Err(malformed("unknown tag")),
    })
}

/// Decodes the key starting at `at`; returns it and the position after it.
pub(super) fn decode_key<'py>(
    py: Python<'py>,
    bytes: &[u8],
    at: usize,
) -> PyResult<(Bound<'py, PyAny>, usize)> {
    decode_key_at(py, bytes, at, 0)
}

fn decode_key_at<'py>(
    py: Python<'py>,
    bytes: &[u8],
    at: usize,
    depth: usize,
) -> PyResult<(Bound<'py, PyAny>, usize)> {
    if depth > MAX_DEPTH {
        return Err(malformed("tuple keys nested too deeply"));
    }
    let tag = *bytes.get(at).ok_or_else(|| malformed("empty key"))?;
    let at = at + 1;
    let take = |n: usize| bytes.get(at..at + n).ok_or_else(|| malformed("key cut short"));
    Ok(match tag {
        K_NONE => (py.None().into_bound(py), at),
        K_BOOL => (PyBool::new(py, take(1)?[0] == 1).to_owned().into_any(), at + 1),
        K_INT => {
            let v = (u64::from_be_bytes(take(8)?.try_into().expect("8 bytes")) ^ (1 << 63)) as i64;
            (v.into_pyobject(py)?.into_any(), at + 8)
        }
        K_BIG_NEGATIVE | K_BIG_POSITIVE => {
            let raw = u32::from_be_bytes(take(4)?.try_into().expect("4 bytes"));
            let negative = tag == K_BIG_NEGATIVE;
            let len = if negative { !raw } else { raw } as usize;
            let mag = bytes.get(at + 4..at + 4 + len).ok_or_else(|| malformed("key cut short"))?;
            let mag: Vec<u8> =
                if negative { mag.iter().map(|b| !b).collect() } else { mag.to_vec() };
            let int = py
                .get_type::<PyInt>()
                .call_method1("from_bytes", (PyBytes::new(py, &mag), "big"))?;
            (if negative { int.neg()? } else { int }, at + 4 + len)
        }
        K_FLOAT => (
            PyFloat::new(
                py,
                float_from_order(u64::from_be_bytes(take(8)?.try_into().expect("8 bytes"))),
            )
            .into_any(),
            at + 8,
        ),
        K_STR => {
            let (text, next) = unescaped(bytes, at)?;
            (
                PyString::new(py, std::str::from_utf8(&text).map_err(|_| malformed("key string"))?)
                    .into_any(),
                next,
            )
        }
        K_BYTES => {
            let (b, next) = unescaped(bytes, at)?;
            (PyBytes::new(py, &b).into_any(), next)
        }
        K_TUPLE => {
            let mut items = Vec::new();
            let mut at = at;
            while *bytes.get(at).ok_or_else(|| malformed("tuple key"))? != 0 {
                let (item, next) = decode_key_at(py, bytes, at, depth + 1)?;
                items.push(item);
                at = next;
            }
            (PyTuple::new(py, items)?.into_any(), at + 1)
        }
        K_OTHER => {
            let (p, next) = unescaped(bytes, at)?;
            (loads(py, &p)?, next)
        }
        _ => return Err(malformed("unknown key tag")),
    })
}

/// Decodes one record (``key=False``) or key (``key=True``) from its encoding between
/// workers; raises ``heddle.CommError`` for malformed bytes. For tests and tools that check
/// the decoder on arbitrary input.
#[pyfunction]
#[pyo3(signature = (data, key = false))]
fn _decode_record<'py>(py: Python<'py>, data: &[u8], key: bool) -> PyResult<Bound<'py, PyAny>> {
    if key {
        let (k, used) = decode_key(py, data, 0)?;
        if used != data.len() {
            return Err(malformed("bytes after the key"));
        }
        Ok(k)
    } else {
        decode_value(py, data)
    }
}

/// Adds the decoder to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(pyo3::wrap_pyfunction!(_decode_record, m)?)?;
    Ok(())
}
