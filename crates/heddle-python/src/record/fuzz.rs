//! Fuzzing entry points of the record and key decoders: feature `fuzzing`, used only by the
//! `python_records` target under `fuzz/` (never part of the extension module).
//!
//! An input's first byte picks what its other bytes are (modulo 3):
//!
//! - 0: a record, deserialized as a [`PyObj`] arriving from a peer or a spill run is
//!   (its serde `Deserialize`, hence `decode_value`);
//! - 1: a key, deserialized as a [`PyKey`] is and then decoded (`decode_key`);
//! - 2: a keyed record laid out as heddle-comm's codec does (u32 LE key length, the key,
//!   the value), decoded and made the Python pair `(key, value)`.
//!
//! Whatever decodes is encoded again with the crate's own encoders, and that encoding must
//! decode to an equal object (Python `==`, unless the object holds a NaN, which equals nothing)
//! which encodes to the same bytes. Whatever does not decode must fail with
//! `heddle.CommError`. Any other outcome panics, which the fuzzer reports as a crash.
//!
//! No input is ever unpickled: unpickling arbitrary bytes can run arbitrary code. The one
//! place the decoders unpickle, `record::loads` (reached by the V_PICKLE and K_OTHER tags
//! at any depth, inside tuples too), raises `CommError` in `fuzzing` builds instead, and
//! [`init`] replaces `pickle.loads` with a tripwire that aborts the process, so a path
//! around that switch would be reported as a crash rather than run.

use std::path::Path;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyTuple};
use serde::de::value::{BytesDeserializer, Error as ValueError};
use serde::Deserialize;

use super::{decode_key, decode_value, encode_value, key_bytes, pair_from, pair_to, PyKey, PyObj};
use crate::failure;

/// Python run once by [`init`]: `heddle.errors` importable without the extension module
/// (a bare `heddle` package whose path is `python/heddle`, so that its `__init__`, which
/// imports `heddle._heddle`, does not run), and the pickle tripwire.
const SETUP: &std::ffi::CStr = c"
import os, sys, types
package = types.ModuleType('heddle')
package.__path__ = [heddle_dir]
sys.modules['heddle'] = package
sys.modules['heddle._heddle'] = native
package._heddle = native
import heddle.errors

import pickle
def _tripwire(*args, **kwargs):
    sys.stderr.write('heddle fuzzing: pickle.loads was reached from the record decoder\\n')
    sys.stderr.flush()
    os.abort()
pickle.loads = pickle._loads = _tripwire
";

/// Objects whose encodings seed the corpus: every tag's and the escapes' edge cases. The
/// second list only as keys (big ints are pickled as values).
const SEED_VALUES: &std::ffi::CStr = c"[
    None, True, False, 0, -1, 2**63 - 1, -2**63, 1.5, -0.0, float('inf'), float('nan'),
    '', 'text', 'h\\u00e9llo\\x00z', b'', b'\\x00\\xff\\x00', (), (1,), (None, 'a', b'b', 2.5),
    ((1, 2), ('x', (b'y', ()))), ((((),),),),
]";
const SEED_KEYS_ONLY: &std::ffi::CStr = c"[2**64, -2**70, 2**200 + 5, (2**64, 'k'), -2**63 - 1]";

/// Starts the embedded interpreter and prepares it (`heddle.errors`, the pickle tripwire);
/// idempotent.
pub fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        Python::attach(|py| {
            let heddle_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../python/heddle");
            // Its own globals, which the tripwire's `os` and `sys` are then looked up in.
            let globals = PyDict::new(py);
            globals.set_item("heddle_dir", heddle_dir).expect("a dict item");
            // `heddle.errors` re-exports the exception classes of the extension module,
            // which a fuzzing build is not: a module holding just those classes stands in.
            let native = PyModule::new(py, "heddle._heddle").expect("a module");
            crate::exceptions::register(&native).expect("the exception classes");
            globals.set_item("native", native).expect("a dict item");
            if let Err(e) = py.run(SETUP, Some(&globals), None) {
                e.print(py);
                panic!("cannot set up the interpreter for fuzzing");
            }
        });
    });
}

/// Decodes one fuzzer input (layout in the module documentation) and checks the outcome;
/// panics on a decoder bug.
pub fn decode_records(data: &[u8]) {
    init();
    let Some((&mode, body)) = data.split_first() else { return };
    Python::attach(|py| match mode % 3 {
        0 => {
            if let Some(value) = checked(py, "record", record(py, body)) {
                round_trip_value(py, &value);
            }
        }
        1 => {
            if let Some(key) = checked(py, "key", key(py, body)) {
                round_trip_key(py, &key);
            }
        }
        _ => {
            let Some(len) = body.get(..4) else { return };
            let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
            let Some(key_enc) = body.get(4..4 + len) else { return };
            let value_enc = &body[4 + len..];
            let key = PyKey::deserialize(BytesDeserializer::<ValueError>::new(key_enc))
                .expect("keys deserialize lazily");
            let Some(value) = checked(py, "pair value", record(py, value_enc)) else { return };
            let Some(pair) = checked(py, "pair key", pair_to(py, key, value)) else { return };
            round_trip_pair(py, &pair);
        }
    });
}

/// A record as `PyObj`'s `Deserialize` makes it from bytes, as a run does (its failure is
/// kept by [`failure`], which is where the Python exception is then).
fn record<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    let (decoded, kept) =
        failure::scope(|| PyObj::deserialize(BytesDeserializer::<ValueError>::new(bytes)));
    match (decoded, kept) {
        (Ok(obj), None) => Ok(obj.into_bound(py)),
        (Err(_), Some(e)) => Err(e),
        (decoded, kept) => {
            panic!("a record's decoding and its kept exception disagree: {decoded:?}, {kept:?}")
        }
    }
}

/// A key as it arrives (`PyKey`'s `Deserialize` keeps the bytes) and is then made a Python
/// object.
fn key<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    let key = PyKey::deserialize(BytesDeserializer::<ValueError>::new(bytes))
        .expect("keys deserialize lazily");
    key.into_py(py)
}

/// The decoded object, or `None` after checking that the failure is a `heddle.CommError`.
fn checked<'py, T>(py: Python<'py>, what: &str, decoded: PyResult<T>) -> Option<T> {
    match decoded {
        Ok(t) => Some(t),
        Err(e) => {
            let comm_error = py
                .import("heddle.errors")
                .and_then(|m| m.getattr("CommError"))
                .expect("heddle.errors is importable");
            assert!(
                e.value(py).is_instance(&comm_error).expect("isinstance"),
                "decoding a {what} raised {e}, not heddle.CommError"
            );
            None
        }
    }
}

/// Whether `a == b` as Python says, or `a` holds a NaN, where only the encodings can be
/// compared (`a == a` is no test: tuples compare identical items equal, NaN too).
fn equal_or_unordered(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> bool {
    fn has_nan(x: &Bound<'_, PyAny>) -> bool {
        match (x.cast_exact::<PyFloat>(), x.cast_exact::<PyTuple>()) {
            (Ok(f), _) => f.value().is_nan(),
            (_, Ok(t)) => t.iter().any(|item| has_nan(&item)),
            _ => false,
        }
    }
    has_nan(a) || a.eq(b).expect("== of decoded objects")
}

fn value_bytes(obj: &Bound<'_, PyAny>) -> Vec<u8> {
    let mut out = Vec::new();
    encode_value(obj, &mut out).expect("a decoded record encodes");
    out
}

fn round_trip_value(py: Python<'_>, value: &Bound<'_, PyAny>) {
    let enc = value_bytes(value);
    let again = decode_value(py, &enc)
        .unwrap_or_else(|e| panic!("the encoding of decoded {value} does not decode: {e}"));
    assert!(equal_or_unordered(value, &again), "record {value} came back as {again}");
    assert_eq!(value_bytes(&again), enc, "record {value} encodes differently after a round trip");
}

fn round_trip_key(py: Python<'_>, key: &Bound<'_, PyAny>) {
    let enc = key_bytes(key).expect("a decoded key encodes");
    let (again, used) = decode_key(py, &enc, 0)
        .unwrap_or_else(|e| panic!("the encoding of decoded key {key} does not decode: {e}"));
    assert_eq!(used, enc.len(), "key {key}: bytes left after its encoding");
    assert!(equal_or_unordered(key, &again), "key {key} came back as {again}");
    assert_eq!(
        key_bytes(&again).expect("a decoded key encodes"),
        enc,
        "key {key} encodes differently after a round trip"
    );
}

fn round_trip_pair(py: Python<'_>, pair: &Bound<'_, PyAny>) {
    let (key, value) =
        pair_from(pair).unwrap_or_else(|e| panic!("decoded pair {pair} is not a pair: {e}"));
    let key = key.into_py(py).expect("a key made from an object");
    let item = |i: usize| {
        pair.cast::<PyTuple>().expect("pair_to makes a tuple").get_item(i).expect("2 items")
    };
    assert!(
        key.is(item(0)) && value.bind(py).is(item(1)),
        "pair_from does not take pair {pair} apart"
    );
    round_trip_key(py, &key);
    round_trip_value(py, value.bind(py));
}

/// Writes seed inputs (the encodings of a few objects, in every mode) into `dir`; returns
/// how many.
pub fn write_seeds(dir: &Path) -> std::io::Result<usize> {
    init();
    std::fs::create_dir_all(dir)?;
    let seeds = Python::attach(|py| -> PyResult<Vec<Vec<u8>>> {
        let values = py.eval(SEED_VALUES, None, None)?;
        let keys_only = py.eval(SEED_KEYS_ONLY, None, None)?;
        let mut seeds = Vec::new();
        for obj in values.try_iter()? {
            let obj = obj?;
            let mut value = Vec::new();
            encode_value(&obj, &mut value)?;
            let key = key_bytes(&obj)?;
            let pair = [&[2][..], &(key.len() as u32).to_le_bytes(), &key, &value].concat();
            let (value, key) = ([&[0][..], &value].concat(), [&[1][..], &key].concat());
            seeds.extend([value, key, pair]);
        }
        for obj in keys_only.try_iter()? {
            seeds.push([&[1][..], &key_bytes(&obj?)?].concat());
        }
        Ok(seeds)
    })
    .map_err(std::io::Error::other)?;
    for (i, seed) in seeds.iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i:02}")), seed)?;
    }
    Ok(seeds.len())
}
