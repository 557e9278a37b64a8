//! Native text steps of Python data sets: `words`, `value_counts`, `sort` and writing lines.
//!
//! A data set read from text files (`text_file`, `text_blocks`) remembers its source
//! natively ([`Native`]). `words()` on such a data set splits its blocks natively, and
//! `value_counts()` on the words counts them into each partition's table as they are split
//! — no Python object is made for a word until the counts are handed back as
//! `(word, count)` tuples. `sort()` of `text_file` lines sorts them natively (an external
//! sort by their bytes, or a prefix of them), and `write_text` of native lines writes them
//! natively. This is what PySpark's DataFrame functions (`split`/`explode`/`groupBy().count()`,
//! `sort`) and polars' expressions do for their users. On any other data set the same
//! methods work on the Python records: `words()` splits `str` or `bytes` records,
//! `value_counts()` counts records by their canonical key encoding (no Python call per
//! record), `sort()` sorts them by canonical key.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use heddle_data::{BytesKey, Combiner, DataSet, Session, TextBlocks};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyString, PyTuple};

use crate::data_set::guarded;
use crate::errors::{argument, Kind};
use crate::failure;
use crate::record::{pair_to, PyKey, PyObj};

/// What is known natively about a data set's records. `blocks` are blocks of whole lines
/// of the source files (valid UTF-8 unless `binary`).
#[derive(Clone, Debug)]
pub(crate) enum Native {
    /// The records are these blocks (`text_blocks`).
    Blocks { blocks: DataSet<Vec<u8>>, binary: bool },
    /// The records are the lines of the blocks (`text_file`), natively `lines`.
    Lines { lines: DataSet<String>, blocks: DataSet<Vec<u8>> },
    /// The records are the words of the blocks.
    Words { blocks: DataSet<Vec<u8>>, binary: bool },
    /// The records are lines, sorted: `(key, line)` pairs in key order.
    Sorted { pairs: DataSet<(BytesKey, String)> },
}

impl Native {
    /// The blocks whose words the records hold or are split into, and whether binary.
    pub(crate) fn text(&self) -> Option<(&DataSet<Vec<u8>>, bool)> {
        match self {
            Native::Blocks { blocks, binary } => Some((blocks, *binary)),
            Native::Lines { blocks, .. } => Some((blocks, false)),
            Native::Words { .. } | Native::Sorted { .. } => None,
        }
    }

    /// The records as native lines, if they are lines.
    pub(crate) fn lines(&self) -> Option<DataSet<String>> {
        match self {
            Native::Lines { lines, .. } => Some(lines.clone()),
            Native::Sorted { pairs } => Some(pairs.map(|(_, line): (BytesKey, String)| line)),
            Native::Blocks { .. } | Native::Words { .. } => None,
        }
    }
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
pub(crate) fn blocks(
    s: &Session,
    path: &Path,
    block_bytes: u64,
    binary: bool,
) -> heddle_data::Result<DataSet<Vec<u8>>> {
    let text = Arc::new(TextBlocks::new(path, block_bytes)?);
    let path: PathBuf = path.to_owned();
    let made = s.generate(text.count(), move |j| {
        if failure::failed() {
            return None;
        }
        let checked = text.read(j).map_err(|e| e.to_string()).and_then(|bytes| {
            if !binary && std::str::from_utf8(&bytes).is_err() {
                return Err(format!(
                    "{}: not UTF-8 text (read it with binary=True)",
                    path.display()
                ));
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
    // Checked when read (see `blocks`), and split only at ASCII bytes; were it ever not
    // UTF-8, the bytes are handed over as they are rather than guessed at.
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
        Python::attach(|py| {
            split_words(&b).map(|w| PyObj::new(text_object(py, w, binary))).collect::<Vec<_>>()
        })
    })
}

/// `words()` of Python records: each `str` or `bytes` record split at ASCII whitespace.
pub(crate) fn split_records(ds: &DataSet<PyObj>) -> DataSet<PyObj> {
    ds.flat_map(|x: PyObj| -> Vec<PyObj> {
        guarded(|py| {
            let x = x.bind(py);
            if let Ok(s) = x.cast::<PyString>() {
                let text = s.to_str()?;
                return Ok(split_words(text.as_bytes())
                    .map(|w| PyObj::new(text_object(py, w, false)))
                    .collect());
            }
            if let Ok(b) = x.cast::<PyBytes>() {
                return Ok(split_words(b.as_bytes())
                    .map(|w| PyObj::new(PyBytes::new(py, w).into_any()))
                    .collect());
            }
            let kind = x.get_type().name()?;
            Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "words() splits str or bytes records, not {kind}: map them to text first"
            )))
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
        Python::attach(|py| {
            PyTuple::new(py, [text_object(py, &w, binary), PyInt::new(py, n).into_any()])
                .ok()
                .map(|t| PyObj::new(t.into_any()))
        })
    })
}

/// `(record, count)` tuples of Python records, counted by canonical key.
pub(crate) fn count_records(ds: &DataSet<PyObj>) -> DataSet<PyObj> {
    let ones = ds.flat_map(|x: PyObj| guarded(|py| Ok((PyKey::new(x.bind(py))?, 1u64))));
    ones.reduce_by_key(|a, b| a + b).flat_map(|(k, n): (PyKey, u64)| {
        guarded(|py| Ok(PyObj::new(pair_to(py, k, PyInt::new(py, n).into_any())?)))
    })
}

/// Native lines sorted by their bytes (or a prefix): an action (it samples the keys).
pub(crate) fn sort_lines(
    lines: &DataSet<String>,
    key_bytes: Option<usize>,
) -> heddle_data::Result<DataSet<(BytesKey, String)>> {
    lines.map(move |line: String| (BytesKey::new(line.as_bytes(), key_bytes), line)).sort_by_key()
}

/// Python `str` records of native lines.
pub(crate) fn line_records(lines: &DataSet<String>) -> DataSet<PyObj> {
    lines.map(|l: String| Python::attach(|py| PyObj::new(PyString::new(py, &l).into_any())))
}

/// `(key, record)` pairs for `sort()` of Python records: the key is the record (compared
/// canonically), or the first `key_bytes` bytes of a `str` (UTF-8) or `bytes` record.
pub(crate) fn sort_pairs(ds: &DataSet<PyObj>, key_bytes: Option<usize>) -> DataSet<(PyKey, PyObj)> {
    ds.flat_map(move |x: PyObj| {
        guarded(|py| {
            let obj = x.bind(py);
            let Some(n) = key_bytes else { return Ok((PyKey::new(obj)?, x.clone())) };
            let bytes: &[u8] = if let Ok(s) = obj.cast::<PyString>() {
                s.to_str()?.as_bytes()
            } else if let Ok(b) = obj.cast::<PyBytes>() {
                b.as_bytes()
            } else {
                let kind = obj.get_type().name()?;
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "sort(key_bytes=...) sorts str or bytes records, not {kind}"
                )));
            };
            let key = PyBytes::new(py, &bytes[..n.min(bytes.len())]);
            Ok((PyKey::new(key.as_any())?, x.clone()))
        })
    })
}

/// Checks a block size argument.
pub(crate) fn block_size(block_bytes: u64) -> PyResult<u64> {
    if block_bytes == 0 {
        return Err(argument("block_bytes must be at least 1"));
    }
    Ok(block_bytes)
}
