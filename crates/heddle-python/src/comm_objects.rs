//! The framing of the objects that `heddle.comm`'s lowercase calls move: Python pickles
//! and unpickles them (protocol 5, large buffers out of band); this module lays out and
//! parses the bytes around the pickles. Every integer is a little-endian `u64`.
//!
//! A *block* (`gather`, `allgather`, `scatter`, `alltoall`, `sendrecv`) holds one object,
//! self-describing; blocks of several objects follow one another:
//!
//! ```text
//! 0        8             16                 16 + 8n
//! +--------+-------------+------------------+--------+-----+----------+-----+---
//! | n      | len(pickle) | len(buf_i) × n   | pickle | pad | buf_0    | pad | ...
//! +--------+-------------+------------------+--------+-----+----------+-----+---
//! ```
//!
//! each buffer starting at a multiple of 16 bytes from the block's start, and the block's
//! size rounded up to 16. A *head* (`send`/`recv`) is the same without padding or buffers
//! (`n`, `len(pickle)`, `len(buf_i) × n`, pickle): the buffers follow as messages of their
//! own. A *broadcast head* (`bcast`) is `len(buf_i) × n` then the pickle, `len(pickle)`
//! and `n` having been broadcast before it.
//!
//! Nothing here unpickles: parsing only finds where the parts lie, checking that they lie
//! inside the bytes received.

use std::ops::Range;

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyMemoryView, PySlice, PyTuple};

use crate::buffer::Buffer;
use crate::errors::Kind;

/// Out-of-band buffers start at multiples of this many bytes within a block.
const ALIGN: usize = 16;
/// Bytes of one header word.
const WORD: usize = 8;

fn aligned(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// Where the pickle and the buffers of one object lie in its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Parts {
    pickle: Range<usize>,
    buffers: Vec<Range<usize>>,
}

/// Why bytes are not a framed object.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Malformed(String);

fn word(bytes: &[u8], at: usize, what: &str) -> Result<usize, Malformed> {
    let w = bytes.get(at..at + WORD).ok_or_else(|| {
        Malformed(format!("{what} ends inside its header ({} bytes)", bytes.len()))
    })?;
    let v = u64::from_le_bytes(w.try_into().expect("8 bytes"));
    usize::try_from(v).map_err(|_| Malformed(format!("{what} declares {v} bytes")))
}

/// `count` lengths from `at` on.
fn lengths(bytes: &[u8], at: usize, count: usize, what: &str) -> Result<Vec<usize>, Malformed> {
    if count > bytes.len() / WORD {
        return Err(Malformed(format!("{what} declares {count} buffers in {} bytes", bytes.len())));
    }
    (0..count).map(|i| word(bytes, at + WORD * i, what)).collect()
}

/// `start .. start + len` if it lies within `bytes`.
fn span(bytes: &[u8], start: usize, len: usize, what: &str) -> Result<Range<usize>, Malformed> {
    match start.checked_add(len) {
        Some(end) if end <= bytes.len() => Ok(start..end),
        _ => Err(Malformed(format!(
            "{what} declares {len} bytes at offset {start} of {}",
            bytes.len()
        ))),
    }
}

fn put(out: &mut [u8], at: usize, v: usize) {
    out[at..at + WORD].copy_from_slice(&(v as u64).to_le_bytes());
}

/// The size of the block of a pickle of `pickle` bytes with buffers of `buffers` bytes.
fn block_size(pickle: usize, buffers: &[usize]) -> usize {
    let mut size = aligned(2 * WORD + WORD * buffers.len() + pickle);
    for b in buffers {
        size = aligned(size + b);
    }
    size
}

/// Writes the block of `pickle` and `buffers` into `out` (of [`block_size`] bytes).
fn write_block(out: &mut [u8], pickle: &[u8], buffers: &[&[u8]]) {
    put(out, 0, buffers.len());
    put(out, WORD, pickle.len());
    for (i, b) in buffers.iter().enumerate() {
        put(out, 2 * WORD + WORD * i, b.len());
    }
    let mut at = 2 * WORD + WORD * buffers.len();
    out[at..at + pickle.len()].copy_from_slice(pickle);
    at = aligned(at + pickle.len());
    for b in buffers {
        out[at..at + b.len()].copy_from_slice(b);
        at = aligned(at + b.len());
    }
}

/// The parts of one block.
fn parse_block(block: &[u8]) -> Result<Parts, Malformed> {
    let what = "an object block";
    let n = word(block, 0, what)?;
    let pickle_len = word(block, WORD, what)?;
    let lens = lengths(block, 2 * WORD, n, what)?;
    let pickle = span(block, 2 * WORD + WORD * n, pickle_len, what)?;
    let mut at = aligned(pickle.end);
    let mut buffers = Vec::with_capacity(n);
    for len in lens {
        let b = span(block, at, len, what)?;
        at = aligned(b.end);
        buffers.push(b);
    }
    Ok(Parts { pickle, buffers })
}

/// The head of an object sent point to point: `n`, `len(pickle)`, the buffer lengths,
/// the pickle.
fn write_head(pickle: &[u8], buffers: &[usize]) -> Vec<u8> {
    let mut out = vec![0; 2 * WORD + WORD * buffers.len() + pickle.len()];
    put(&mut out, 0, buffers.len());
    put(&mut out, WORD, pickle.len());
    for (i, &b) in buffers.iter().enumerate() {
        put(&mut out, 2 * WORD + WORD * i, b);
    }
    out[2 * WORD + WORD * buffers.len()..].copy_from_slice(pickle);
    out
}

/// Where the pickle lies in a head, and the lengths of the buffers that follow it.
fn read_head(head: &[u8]) -> Result<(Range<usize>, Vec<usize>), Malformed> {
    let what = "an object message";
    let n = word(head, 0, what)?;
    let pickle_len = word(head, WORD, what)?;
    let lens = lengths(head, 2 * WORD, n, what)?;
    Ok((span(head, 2 * WORD + WORD * n, pickle_len, what)?, lens))
}

/// The head of a broadcast object: the buffer lengths, then the pickle.
fn write_bcast_head(pickle: &[u8], buffers: &[usize]) -> Vec<u8> {
    let mut out = vec![0; WORD * buffers.len() + pickle.len()];
    for (i, &b) in buffers.iter().enumerate() {
        put(&mut out, WORD * i, b);
    }
    out[WORD * buffers.len()..].copy_from_slice(pickle);
    out
}

/// Where the pickle lies in a broadcast head of `n` buffers, and the buffers' lengths.
fn read_bcast_head(head: &[u8], n: usize) -> Result<(Range<usize>, Vec<usize>), Malformed> {
    let what = "a broadcast object";
    let lens = lengths(head, 0, n, what)?;
    Ok((span(head, WORD * n, head.len() - WORD * n, what)?, lens))
}

// --- the Python functions -----------------------------------------------------------------

fn malformed(m: Malformed) -> PyErr {
    Kind::Comm.err(format!("malformed object framing: {}", m.0))
}

/// The exported buffers of `objs`.
fn exported(objs: &[Bound<'_, PyAny>], what: &str) -> PyResult<Vec<Buffer>> {
    objs.iter().map(|o| Buffer::get(o, false, what)).collect()
}

/// A memoryview of `view[range]`.
fn slice<'py>(view: &Bound<'py, PyAny>, range: &Range<usize>) -> PyResult<Bound<'py, PyAny>> {
    let py = view.py();
    view.get_item(PySlice::new(py, range.start as isize, range.end as isize, 1))
}

/// Packs pickled objects into one ``bytearray`` of blocks; ``pickled`` holds a ``(pickle,
/// buffers)`` pair per object. Returns the bytes and each block's size.
#[pyfunction]
fn pack_objects<'py>(
    py: Python<'py>,
    pickled: Vec<(Bound<'py, PyAny>, Vec<Bound<'py, PyAny>>)>,
) -> PyResult<(Bound<'py, PyByteArray>, Vec<usize>)> {
    let mut objects = Vec::with_capacity(pickled.len());
    for (pickle, buffers) in &pickled {
        objects.push((Buffer::get(pickle, false, "pickle")?, exported(buffers, "buffer")?));
    }
    let sizes: Vec<usize> = objects
        .iter()
        .map(|(p, bs)| block_size(p.bytes(), &bs.iter().map(Buffer::bytes).collect::<Vec<_>>()))
        .collect();
    let out = PyByteArray::new_with(py, sizes.iter().sum(), |out| {
        let mut at = 0;
        for ((p, bs), size) in objects.iter().zip(&sizes) {
            // SAFETY: every buffer stays exported (in `objects`) while it is read, and none
            // is the new bytearray.
            let pickle = unsafe { p.region().bytes() };
            let buffers: Vec<&[u8]> = bs.iter().map(|b| unsafe { b.region().bytes() }).collect();
            write_block(&mut out[at..at + size], pickle, &buffers);
            at += size;
        }
        Ok(())
    })?;
    Ok((out, sizes))
}

/// The ``(pickle, [buffers])`` of every block in ``blocks`` (of ``sizes`` bytes each), as
/// memoryviews of ``blocks``: unpickled arrays are views of the received memory.
#[pyfunction]
fn unpack_objects<'py>(
    blocks: &Bound<'py, PyAny>,
    sizes: Vec<usize>,
) -> PyResult<Bound<'py, PyList>> {
    let py = blocks.py();
    let b = Buffer::get(blocks, false, "blocks")?;
    // SAFETY: `blocks` stays exported (in `b`) while read, and nothing writes it meanwhile.
    let bytes = unsafe { b.region().bytes() };
    let view = PyMemoryView::from(blocks)?.into_any();
    let out = PyList::empty(py);
    let mut at = 0usize;
    for size in sizes {
        let range = span(bytes, at, size, "the received objects").map_err(malformed)?;
        let parts = parse_block(&bytes[range.clone()]).map_err(malformed)?;
        let shift = |r: &Range<usize>| r.start + at..r.end + at;
        let buffers = PyList::empty(py);
        for r in &parts.buffers {
            buffers.append(slice(&view, &shift(r))?)?;
        }
        out.append(PyTuple::new(py, [slice(&view, &shift(&parts.pickle))?, buffers.into_any()])?)?;
        at = range.end;
    }
    Ok(out)
}

/// The head of an object sent point to point (the buffers are sent after it).
#[pyfunction]
fn object_head<'py>(
    py: Python<'py>,
    pickle: &Bound<'py, PyAny>,
    buffers: Vec<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let p = Buffer::get(pickle, false, "pickle")?;
    let lens: Vec<usize> = exported(&buffers, "buffer")?.iter().map(Buffer::bytes).collect();
    // SAFETY: `pickle` stays exported (in `p`) while read.
    Ok(PyBytes::new(py, &write_head(unsafe { p.region().bytes() }, &lens)))
}

/// The pickle (a memoryview of ``head``) and the buffer lengths of a received head.
#[pyfunction]
fn parse_object_head<'py>(head: &Bound<'py, PyAny>) -> PyResult<(Bound<'py, PyAny>, Vec<usize>)> {
    let b = Buffer::get(head, false, "head")?;
    // SAFETY: `head` stays exported (in `b`) while read.
    let (pickle, lens) = read_head(unsafe { b.region().bytes() }).map_err(malformed)?;
    Ok((slice(&PyMemoryView::from(head)?.into_any(), &pickle)?, lens))
}

/// The head a root broadcasts: the lengths of ``buffers``, then the pickle.
#[pyfunction]
fn bcast_head<'py>(
    py: Python<'py>,
    pickle: &Bound<'py, PyAny>,
    buffers: Vec<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyByteArray>> {
    let p = Buffer::get(pickle, false, "pickle")?;
    let lens: Vec<usize> = exported(&buffers, "buffer")?.iter().map(Buffer::bytes).collect();
    // SAFETY: `pickle` stays exported (in `p`) while read.
    Ok(PyByteArray::new(py, &write_bcast_head(unsafe { p.region().bytes() }, &lens)))
}

/// The pickle (a memoryview of ``head``) and the lengths of the ``n`` buffers of a
/// received broadcast head.
#[pyfunction]
fn parse_bcast_head<'py>(
    head: &Bound<'py, PyAny>,
    n: usize,
) -> PyResult<(Bound<'py, PyAny>, Vec<usize>)> {
    let b = Buffer::get(head, false, "head")?;
    // SAFETY: `head` stays exported (in `b`) while read.
    let (pickle, lens) = read_bcast_head(unsafe { b.region().bytes() }, n).map_err(malformed)?;
    Ok((slice(&PyMemoryView::from(head)?.into_any(), &pickle)?, lens))
}

/// Adds the framing functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(pyo3::wrap_pyfunction!(pack_objects, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(unpack_objects, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(object_head, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(parse_object_head, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(bcast_head, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(parse_bcast_head, m)?)?;
    Ok(())
}
