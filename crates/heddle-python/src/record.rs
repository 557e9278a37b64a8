//! Python objects as records of the task and data APIs.
//!
//! Within a worker a record is the Python object itself ([`PyObj`]): chained tasks hand it
//! over without copying. When it crosses workers it is encoded: `None`, `bool`, `int` (64
//! bits), `float`, `str`, `bytes` and tuples of these compactly, anything else with pickle
//! protocol 5. Keys of keyed operations ([`PyKey`]) carry a canonical, order-preserving
//! encoding instead, so that equal keys route, combine and sort alike on every worker
//! (Python's own `hash` of a `str` differs between processes).

use std::fmt;
use std::hash::{Hash, Hasher};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyFloat, PyInt, PyString, PyTuple};

mod decode;
#[cfg(feature = "fuzzing")]
pub mod fuzz;

pub(crate) use decode::register;
use decode::{decode_key, decode_value};
use serde::de::{self, Deserializer, Visitor};
use serde::ser::{self, Serializer};
use serde::{Deserialize, Serialize};

use crate::failure;

/// `pickle.dumps` and `pickle.loads`, imported once.
fn pickle<'py>(py: Python<'py>, name: &'static str) -> PyResult<&'py Bound<'py, PyAny>> {
    static DUMPS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    static LOADS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let cell = if name == "dumps" { &DUMPS } else { &LOADS };
    let f = cell.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        Ok(py.import("pickle")?.getattr(name)?.unbind())
    })?;
    Ok(f.bind(py))
}

/// `pickle.dumps(obj, 5)`.
pub(crate) fn dumps(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let b = pickle(obj.py(), "dumps")?.call1((obj, 5))?;
    Ok(b.cast::<PyBytes>()?.as_bytes().to_vec())
}

/// Unpickles `bytes`: the only place records, keys (tags `V_PICKLE` and `K_OTHER`, at any
/// depth) and task states (`ctx.state`, read back from the user's own private checkpoint
/// files) are unpickled. Fuzzing builds (feature `fuzzing`) refuse instead: their input
/// is arbitrary bytes, and unpickling arbitrary bytes can run arbitrary code.
pub(crate) fn loads<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    if cfg!(feature = "fuzzing") {
        return Err(malformed("a pickled object (never unpickled in fuzzing builds)"));
    }
    pickle(py, "loads")?.call1((PyBytes::new(py, bytes),))
}

/// A Python object as a record.
pub(crate) struct PyObj(pub(crate) Py<PyAny>);

impl PyObj {
    pub(crate) fn new(obj: Bound<'_, PyAny>) -> PyObj {
        PyObj(obj.unbind())
    }

    pub(crate) fn bind<'py>(&self, py: Python<'py>) -> &Bound<'py, PyAny> {
        self.0.bind(py)
    }

    pub(crate) fn into_bound(self, py: Python<'_>) -> Bound<'_, PyAny> {
        self.0.into_bound(py)
    }

    /// `None`, standing in for a record that could not be made (the failure is recorded).
    pub(crate) fn none(py: Python<'_>) -> PyObj {
        PyObj(py.None())
    }
}

impl Clone for PyObj {
    fn clone(&self) -> Self {
        Python::attach(|py| PyObj(self.0.clone_ref(py)))
    }
}

impl fmt::Debug for PyObj {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Python::attach(|py| write!(f, "{}", self.0.bind(py)))
    }
}

// Value encoding tags (see the module comment).
const V_NONE: u8 = 0;
const V_BOOL: u8 = 1;
const V_INT: u8 = 2;
const V_FLOAT: u8 = 3;
const V_STR: u8 = 4;
const V_BYTES: u8 = 5;
const V_TUPLE: u8 = 6;
const V_PICKLE: u8 = 0x7f;

/// Appends the encoding of `obj` to `out`.
fn encode_value(obj: &Bound<'_, PyAny>, out: &mut Vec<u8>) -> PyResult<()> {
    if obj.is_none() {
        out.push(V_NONE);
    } else if let Ok(b) = obj.cast_exact::<PyBool>() {
        out.extend_from_slice(&[V_BOOL, u8::from(b.is_true())]);
    } else if obj.is_exact_instance_of::<PyInt>() && obj.extract::<i64>().is_ok() {
        out.push(V_INT);
        out.extend_from_slice(&obj.extract::<i64>()?.to_le_bytes());
    } else if let Ok(f) = obj.cast_exact::<PyFloat>() {
        out.push(V_FLOAT);
        out.extend_from_slice(&f.value().to_le_bytes());
    } else if let Some(text) =
        obj.cast_exact::<PyString>().ok().as_ref().and_then(|s| s.to_str().ok())
    {
        out.push(V_STR);
        out.extend_from_slice(text.as_bytes());
    } else if let Ok(b) = obj.cast_exact::<PyBytes>() {
        out.push(V_BYTES);
        out.extend_from_slice(b.as_bytes());
    } else if let Ok(t) = obj.cast_exact::<PyTuple>() {
        out.push(V_TUPLE);
        out.extend_from_slice(&(t.len() as u32).to_le_bytes());
        for item in t.iter() {
            let at = out.len();
            out.extend_from_slice(&[0; 4]);
            encode_value(&item, out)?;
            let len = (out.len() - at - 4) as u32;
            out[at..at + 4].copy_from_slice(&len.to_le_bytes());
        }
    } else {
        out.push(V_PICKLE);
        out.extend_from_slice(&dumps(obj)?);
    }
    Ok(())
}

fn malformed(what: &str) -> PyErr {
    crate::errors::Kind::Comm.err(format!("malformed record encoding: {what}"))
}

/// Reports an encoding failure: recorded (so the Python exception is what the caller
/// sees), and returned as a serde error.
fn encoding_failed<E: ser::Error>(e: PyErr) -> E {
    let message = e.to_string();
    failure::record(e);
    E::custom(format!("cannot encode a record: {message}"))
}

impl Serialize for PyObj {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut out = Vec::new();
        Python::attach(|py| encode_value(self.0.bind(py), &mut out))
            .map_err(encoding_failed::<S::Error>)?;
        s.serialize_bytes(&out)
    }
}

struct ObjVisitor;

impl Visitor<'_> for ObjVisitor {
    type Value = PyObj;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an encoded Python object")
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<PyObj, E> {
        Python::attach(|py| decode_value(py, v).map(PyObj::new)).map_err(|e| {
            let message = e.to_string();
            failure::record(e);
            E::custom(format!("cannot decode a record: {message}"))
        })
    }

    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<PyObj, E> {
        self.visit_bytes(&v)
    }
}

impl<'de> Deserialize<'de> for PyObj {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_bytes(ObjVisitor)
    }
}

// Key encoding tags, in the order keys of different types sort.
const K_NONE: u8 = 0x01;
const K_BOOL: u8 = 0x02;
const K_BIG_NEGATIVE: u8 = 0x04;
const K_INT: u8 = 0x05;
const K_BIG_POSITIVE: u8 = 0x06;
const K_FLOAT: u8 = 0x07;
const K_STR: u8 = 0x08;
const K_BYTES: u8 = 0x09;
const K_TUPLE: u8 = 0x0a;
const K_OTHER: u8 = 0x0b;

/// Appends `bytes` so that no encoding is a prefix of another and byte order is kept:
/// 0x00 becomes 0x00 0xff, and 0x00 0x00 ends it.
fn escaped(bytes: &[u8], out: &mut Vec<u8>) {
    let mut rest = bytes;
    while let Some(z) = rest.iter().position(|&b| b == 0) {
        out.extend_from_slice(&rest[..z]);
        out.extend_from_slice(&[0, 0xff]);
        rest = &rest[z + 1..];
    }
    out.extend_from_slice(rest);
    out.extend_from_slice(&[0, 0]);
}

/// Reads an escaped run starting at `at`; returns the bytes and the position after it.
fn unescaped(bytes: &[u8], mut at: usize) -> PyResult<(Vec<u8>, usize)> {
    let mut out = Vec::new();
    loop {
        let z = bytes[at..].iter().position(|&b| b == 0).ok_or_else(|| malformed("key text"))? + at;
        out.extend_from_slice(&bytes[at..z]);
        match bytes.get(z + 1) {
            Some(0) => return Ok((out, z + 2)),
            Some(0xff) => {
                out.push(0);
                at = z + 2;
            }
            _ => return Err(malformed("key escape")),
        }
    }
}

/// A float's bits, ordered as the floats are (negative zero and NaNs folded).
fn float_order(f: f64) -> u64 {
    let f = if f == 0.0 {
        0.0
    } else if f.is_nan() {
        f64::NAN
    } else {
        f
    };
    let bits = f.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

fn float_from_order(bits: u64) -> f64 {
    f64::from_bits(if bits >> 63 == 1 { bits & !(1 << 63) } else { !bits })
}

/// Appends an int key (Python ints of any size).
fn encode_int(n: &Bound<'_, PyAny>, out: &mut Vec<u8>) -> PyResult<()> {
    if let Ok(v) = n.extract::<i64>() {
        out.push(K_INT);
        out.extend_from_slice(&((v as u64) ^ (1 << 63)).to_be_bytes());
        return Ok(());
    }
    let negative = n.lt(0)?;
    let magnitude = n.call_method0("__abs__")?;
    let bits: usize = magnitude.call_method0("bit_length")?.extract()?;
    let len = bits.div_ceil(8);
    let bytes = magnitude.call_method1("to_bytes", (len, "big"))?;
    let bytes = bytes.cast::<PyBytes>()?.as_bytes();
    if negative {
        out.push(K_BIG_NEGATIVE);
        out.extend_from_slice(&(!(len as u32)).to_be_bytes());
        out.extend(bytes.iter().map(|b| !b));
    } else {
        out.push(K_BIG_POSITIVE);
        out.extend_from_slice(&(len as u32).to_be_bytes());
        out.extend_from_slice(bytes);
    }
    Ok(())
}

/// Appends the canonical encoding of key `obj` to `out`.
fn encode_key(obj: &Bound<'_, PyAny>, out: &mut Vec<u8>) -> PyResult<()> {
    if obj.is_none() {
        out.push(K_NONE);
    } else if let Ok(b) = obj.cast::<PyBool>() {
        out.extend_from_slice(&[K_BOOL, u8::from(b.is_true())]);
    } else if let Ok(s) = obj.cast_exact::<PyString>() {
        match s.to_str() {
            Ok(text) => {
                out.push(K_STR);
                escaped(text.as_bytes(), out);
            }
            Err(_) => other_key(obj, out)?,
        }
    } else if obj.is_instance_of::<PyInt>() {
        encode_int(obj, out)?;
    } else if let Ok(f) = obj.cast::<PyFloat>() {
        out.push(K_FLOAT);
        out.extend_from_slice(&float_order(f.value()).to_be_bytes());
    } else if let Ok(b) = obj.cast_exact::<PyBytes>() {
        out.push(K_BYTES);
        escaped(b.as_bytes(), out);
    } else if let Ok(t) = obj.cast_exact::<PyTuple>() {
        out.push(K_TUPLE);
        for item in t.iter() {
            encode_key(&item, out)?;
        }
        out.push(0);
    } else if obj.get_type().hasattr("__index__")? && !obj.is_instance_of::<PyString>() {
        // numpy integers and other exact integers
        encode_int(&obj.call_method0("__index__")?, out)?;
    } else {
        other_key(obj, out)?;
    }
    Ok(())
}

fn other_key(obj: &Bound<'_, PyAny>, out: &mut Vec<u8>) -> PyResult<()> {
    out.push(K_OTHER);
    escaped(&dumps(obj)?, out);
    Ok(())
}

/// The canonical bytes of key `obj` (also used to hash records to partitions).
pub(crate) fn key_bytes(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let mut out = Vec::with_capacity(16);
    encode_key(obj, &mut out)?;
    Ok(out)
}

/// A key of a keyed operation: its canonical encoding (which decides equality, hashing,
/// order and routing) and, where known, the object it came from.
pub(crate) struct PyKey {
    enc: Box<[u8]>,
    obj: Option<PyObj>,
}

impl PyKey {
    pub(crate) fn new(obj: &Bound<'_, PyAny>) -> PyResult<PyKey> {
        Ok(PyKey { enc: key_bytes(obj)?.into_boxed_slice(), obj: Some(PyObj::new(obj.clone())) })
    }

    /// The key as a Python object, borrowed (decoded if it arrived from another worker).
    pub(crate) fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &self.obj {
            Some(o) => Ok(o.bind(py).clone()),
            None => Ok(decode_key(py, &self.enc, 0)?.0),
        }
    }

    /// The key as a Python object (decoded if it arrived from another worker).
    pub(crate) fn into_py(self, py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
        match self.obj {
            Some(o) => Ok(o.into_bound(py)),
            None => Ok(decode_key(py, &self.enc, 0)?.0),
        }
    }
}

impl Clone for PyKey {
    fn clone(&self) -> Self {
        PyKey { enc: self.enc.clone(), obj: self.obj.clone() }
    }
}

impl fmt::Debug for PyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PyKey({:?})", self.enc)
    }
}

impl PartialEq for PyKey {
    fn eq(&self, other: &Self) -> bool {
        self.enc == other.enc
    }
}
impl Eq for PyKey {}

impl Hash for PyKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.enc.hash(state);
    }
}

impl PartialOrd for PyKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for PyKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.enc.cmp(&other.enc)
    }
}

impl Serialize for PyKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.enc)
    }
}

struct KeyVisitor;

impl Visitor<'_> for KeyVisitor {
    type Value = PyKey;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an encoded key")
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<PyKey, E> {
        Ok(PyKey { enc: v.into(), obj: None })
    }

    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<PyKey, E> {
        Ok(PyKey { enc: v.into_boxed_slice(), obj: None })
    }
}

impl<'de> Deserialize<'de> for PyKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_bytes(KeyVisitor)
    }
}

/// FNV-1a of bytes: partitions records by their key encoding on every worker alike.
pub(crate) fn stable_hash(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// `(key, value)` from a Python pair (a 2-tuple or 2-list).
pub(crate) fn pair_from(obj: &Bound<'_, PyAny>) -> PyResult<(PyKey, PyObj)> {
    if let Ok(t) = obj.cast_exact::<PyTuple>() {
        if t.len() == 2 {
            return Ok((PyKey::new(&t.get_item(0)?)?, PyObj::new(t.get_item(1)?)));
        }
    } else if let Ok(l) = obj.cast::<pyo3::types::PyList>() {
        if l.len() == 2 {
            return Ok((PyKey::new(&l.get_item(0)?)?, PyObj::new(l.get_item(1)?)));
        }
    }
    Err(crate::errors::argument(format!(
        "a keyed operation needs (key, value) pairs, got {}",
        obj.repr().map(|r| r.to_string()).unwrap_or_else(|_| "an unprintable object".into())
    )))
}

/// The Python tuple `(key, value)`.
pub(crate) fn pair_to<'py>(
    py: Python<'py>,
    key: PyKey,
    value: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyTuple::new(py, [key.into_py(py)?, value])?.into_any())
}
