//! Native text steps of Python data sets: `words` and `value_counts`.
//!
//! A data set read from text files (`text_file`, `text_blocks`) remembers its source as
//! native blocks of whole lines ([`Native::Text`]). `words()` on such a data set splits the
//! blocks natively ([`Native::Words`]), and `value_counts()` on the words counts them into
//! each partition's table as they are split — no Python object is made for a word until
//! the counts are handed back as `(word, count)` tuples. This is what PySpark's
//! `split`/`explode`/`groupBy().count()` and polars' `str.split().explode().value_counts()`
//! do for their users. On any other data set the same methods work on the Python records:
//! `words()` splits `str` or `bytes` records, and `value_counts()` counts records by their
//! canonical key encoding, natively (no Python call per record).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use heddle_data::{Combiner, DataSet, Session, TextBlocks};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyString, PyTuple};

use crate::data_set::guarded;
use crate::errors::{argument, Kind};
use crate::failure;
use crate::record::{pair_to, PyKey, PyObj};

/// What is known natively about a data set's records.
#[derive(Clone, Debug)]
pub(crate) enum Native {
    /// The records are the lines (or blocks of lines) of this text: blocks of whole lines
    /// (valid UTF-8 unless `binary`).
    Text { blocks: DataSet<Vec<u8>>, binary: bool },
    /// The records are the words of this text.
    Words { blocks: DataSet<Vec<u8>>, binary: bool },
}

/// The bytes Python's `bytes.split()` splits at (ASCII whitespace, including `\v`).
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// The words of `text`: its runs of bytes other than ASCII whitespace. Splitting valid
/// UTF-8 there gives valid UTF-8 (a multi-byte character never contains an ASCII byte).
pub(crate) fn split_words(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    text.split(|&b| is_space(b)).filter(|w| !w.is_empty())
}

/// Blocks of whole lines of the files of `path`, about `block_bytes` each, as native
/// records; unless `binary`, a block that is not UTF-8 fails the run naming the file.
pub(crate) fn blocks(s: &Session, path: &Path, block_bytes: u64, binary: bool) -> heddle_data::Result<DataSet<Vec<u8>>> {
    let text = Arc::new(TextBlocks::new(path, block_bytes)?);
    let path: PathBuf = path.to_owned();
    let made = s.generate(text.count(), move |j| {
        if failure::failed() {
            return None;
        }
        let checked = text.read(j).map_err(|e| e.to_string()).and_then(|bytes| {
            if !binary && std::str::from_utf8(&bytes).is_err() {
                return Err(format!("{}: not UTF-8 text (read it with binary=True)", path.display()));
            }
            Ok(bytes)
        });
        match checked {
            // A block in which no line starts (inside a long line) gives no record.
            Ok(bytes) if bytes.is_empty() => None,
            Ok(bytes) => Some(bytes),
            Err(message) => {
                failure::record(Kind::Data.err(message));
                None
            }
        }
    });
    Ok(made.flat_map(|b: Option<Vec<u8>>| b))
}

/// `str` (or `bytes` if `binary`) of native text that is known to be valid.
fn text_object<'py>(py: Python<'py>, bytes: &[u8], binary: bool) -> Bound<'py, PyAny> {
    if binary {
        return PyBytes::new(py, bytes).into_any();
    }
    // Checked when read; a failure here would be a bug, so say so rather than guess.
    match std::str::from_utf8(bytes) {
        Ok(s) => PyString::new(py, s).into_any(),
        Err(_) => PyBytes::new(py, bytes).into_any(),
    }
}

/// Python records of native blocks: each block as one `str` (or `bytes`).
pub(crate) fn block_records(blocks: &DataSet<Vec<u8>>, binary: bool) -> DataSet<PyObj> {
    blocks.map(move |b: Vec<u8>| Python::attach(|py| PyObj::new(text_object(py, &b, binary))))
}

/// Python records of the words of native blocks.
pub(crate) fn word_records(blocks: &DataSet<Vec<u8>>, binary: bool) -> DataSet<PyObj> {
    blocks.flat_map(move |b: Vec<u8>| {
        Python::attach(|py| split_words(&b).map(|w| PyObj::new(text_object(py, w, binary))).collect::<Vec<_>>())
    })
}

/// `words()` of Python records: each `str` or `bytes` record split at ASCII whitespace.
pub(crate) fn split_records(ds: &DataSet<PyObj>) -> DataSet<PyObj> {
    ds.flat_map(|x: PyObj| -> Vec<PyObj> {
        guarded(|py| {
            let x = x.bind(py);
            if let Ok(s) = x.cast::<PyString>() {
                let text = s.to_str()?;
                return Ok(split_words(text.as_bytes()).map(|w| PyObj::new(text_object(py, w, false))).collect());
            }
            if let Ok(b) = x.cast::<PyBytes>() {
                return Ok(split_words(b.as_bytes()).map(|w| PyObj::new(PyBytes::new(py, w).into_any())).collect());
            }
            let kind = x.get_type().name()?;
            Err(pyo3::exceptions::PyTypeError::new_err(format!("words() splits str or bytes records, not {kind}: map them to text first")))
        })
        .unwrap_or_default()
    })
}

/// `(word, count)` tuples of the words of native blocks, counted as they are split.
pub(crate) fn count_words(blocks: &DataSet<Vec<u8>>, binary: bool) -> DataSet<PyObj> {
    let counts = blocks.flat_map_reduce_by_key(
        |b: Vec<u8>, c: &mut Combiner<'_, Vec<u8>, u64>| split_words(&b).for_each(|w| c.add(w, 1)),
        |a, b| a + b,
    );
    counts.flat_map(move |(w, n): (Vec<u8>, u64)| {
        Python::attach(|py| PyTuple::new(py, [text_object(py, &w, binary), PyInt::new(py, n).into_any()]).ok().map(|t| PyObj::new(t.into_any())))
    })
}

/// `(record, count)` tuples of Python records, counted by canonical key.
pub(crate) fn count_records(ds: &DataSet<PyObj>) -> DataSet<PyObj> {
    let ones = ds.flat_map(|x: PyObj| guarded(|py| Ok((PyKey::new(x.bind(py))?, 1u64))));
    ones.reduce_by_key(|a, b| a + b)
        .flat_map(|(k, n): (PyKey, u64)| guarded(|py| Ok(PyObj::new(pair_to(py, k, PyInt::new(py, n).into_any())?))))
}

/// Checks a block size argument.
pub(crate) fn block_size(block_bytes: u64) -> PyResult<u64> {
    if block_bytes == 0 {
        return Err(argument("block_bytes must be at least 1"));
    }
    Ok(block_bytes)
}
