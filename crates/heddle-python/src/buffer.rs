//! Python buffers (numpy arrays, bytearray, memoryview, array.array, ...) seen as memory:
//! the buffer protocol hands out a pointer into the object's own storage, so collectives
//! read and write the caller's array directly, without copies.

use std::ffi::CStr;
use std::ptr::NonNull;

use pyo3::ffi;
use pyo3::prelude::*;

use crate::errors::argument;

/// The element type of a buffer, from its struct-module format and item size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dtype {
    /// `?` (numpy bool): moves and reduces as `u8` holding 0 or 1.
    Bool,
    /// Signed 8-bit integer.
    I8,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 16-bit integer.
    I16,
    /// Unsigned 16-bit integer.
    U16,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 64-bit integer.
    U64,
    /// IEEE single precision.
    F32,
    /// IEEE double precision.
    F64,
    /// Anything else (float16, complex, structs, big-endian data): movable as bytes, not
    /// reducible.
    Other,
}

impl Dtype {
    /// Parses a buffer-protocol format (`None` means unsigned bytes).
    fn parse(format: Option<&CStr>, itemsize: usize) -> Dtype {
        let Some(format) = format else { return Dtype::U8 };
        let mut f = format.to_bytes();
        if let [b'@' | b'=', rest @ ..] = f {
            f = rest;
        } else if let [b'<', rest @ ..] = f {
            if cfg!(target_endian = "big") && itemsize > 1 {
                return Dtype::Other;
            }
            f = rest;
        } else if let [b'>' | b'!', rest @ ..] = f {
            if cfg!(target_endian = "little") && itemsize > 1 {
                return Dtype::Other;
            }
            f = rest;
        }
        let &[code] = f else { return Dtype::Other };
        let signed = match code {
            b'?' if itemsize == 1 => return Dtype::Bool,
            b'f' if itemsize == 4 => return Dtype::F32,
            b'd' if itemsize == 8 => return Dtype::F64,
            b'b' | b'h' | b'i' | b'l' | b'q' | b'n' => true,
            b'B' | b'H' | b'I' | b'L' | b'Q' | b'N' => false,
            _ => return Dtype::Other,
        };
        match (signed, itemsize) {
            (true, 1) => Dtype::I8,
            (false, 1) => Dtype::U8,
            (true, 2) => Dtype::I16,
            (false, 2) => Dtype::U16,
            (true, 4) => Dtype::I32,
            (false, 4) => Dtype::U32,
            (true, 8) => Dtype::I64,
            (false, 8) => Dtype::U64,
            _ => Dtype::Other,
        }
    }

    /// Whether reductions are defined on it.
    /// The element type as frames carry it (`None`: bytes with no element type to check).
    pub(crate) fn wire(self) -> Option<heddle_comm::Dtype> {
        use heddle_comm::Dtype as W;
        Some(match self {
            Dtype::I8 => W::I8,
            Dtype::I16 => W::I16,
            Dtype::U16 => W::U16,
            Dtype::I32 => W::I32,
            Dtype::U32 => W::U32,
            Dtype::I64 => W::I64,
            Dtype::U64 => W::U64,
            Dtype::F32 => W::F32,
            Dtype::F64 => W::F64,
            Dtype::Bool | Dtype::U8 | Dtype::Other => return None,
        })
    }

    pub(crate) fn reducible(self) -> bool {
        self != Dtype::Other
    }

    /// Whether it is a floating-point type.
    pub(crate) fn is_float(self) -> bool {
        matches!(self, Dtype::F32 | Dtype::F64)
    }
}

/// An exported buffer, released when dropped (with the GIL held, as every caller does).
pub(crate) struct Buffer {
    view: Box<ffi::Py_buffer>,
    /// Element type.
    pub(crate) dtype: Dtype,
    /// Bytes of one element.
    pub(crate) itemsize: usize,
    /// Whether the memory may be written.
    pub(crate) writable: bool,
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer").field("dtype", &self.dtype).field("bytes", &self.bytes()).finish()
    }
}

impl Buffer {
    /// Exports `obj`'s memory, which must be contiguous (C or Fortran order) and, when
    /// `writable`, writable. `what` names the argument in error messages.
    ///
    /// # Errors
    /// `heddle.ArgumentError` if `obj` has no buffer interface or the buffer is unsuitable.
    pub(crate) fn get(obj: &Bound<'_, PyAny>, writable: bool, what: &str) -> PyResult<Buffer> {
        let flags = ffi::PyBUF_ANY_CONTIGUOUS
            | ffi::PyBUF_FORMAT
            | if writable { ffi::PyBUF_WRITABLE } else { 0 };
        // SAFETY: an all-zero Py_buffer is a valid "empty" view for PyObject_GetBuffer to fill.
        let mut view: Box<ffi::Py_buffer> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: `obj` is a live object and `view` a writable Py_buffer; the GIL is held.
        let rc = unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), &mut *view, flags) };
        if rc != 0 {
            let py = obj.py();
            let cause = PyErr::take(py)
                .unwrap_or_else(|| pyo3::exceptions::PyBufferError::new_err("no buffer"));
            // SAFETY: plain type check on a live object.
            let has_buffer = unsafe { ffi::PyObject_CheckBuffer(obj.as_ptr()) } != 0;
            let type_name =
                obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
            let message = if !has_buffer {
                format!(
                    "{what} must be a buffer (a numpy array, bytearray, memoryview, array.array, \
                     ...), not {type_name}"
                )
            } else {
                let detail = cause.value(py).to_string();
                let hint = if writable {
                    "; it must be contiguous in memory and writable"
                } else {
                    "; it must be contiguous in memory"
                };
                format!("{what} ({type_name}) cannot be used: {detail}{hint}")
            };
            let err = argument(message);
            err.set_cause(py, Some(cause));
            return Err(err);
        }
        let itemsize = usize::try_from(view.itemsize).unwrap_or(1).max(1);
        // SAFETY: with PyBUF_FORMAT the exporter sets `format` to a NUL-terminated string or NULL.
        let format = (!view.format.is_null()).then(|| unsafe { CStr::from_ptr(view.format) });
        let dtype = Dtype::parse(format, itemsize);
        let writable_view = view.readonly == 0;
        Ok(Buffer { view, dtype, itemsize, writable: writable_view })
    }

    /// Bytes in the buffer.
    pub(crate) fn bytes(&self) -> usize {
        usize::try_from(self.view.len).unwrap_or(0)
    }

    /// Elements in the buffer.
    pub(crate) fn elements(&self) -> usize {
        self.bytes() / self.itemsize
    }

    /// The format string, for messages.
    pub(crate) fn format(&self) -> String {
        if self.view.format.is_null() {
            "B".into()
        } else {
            // SAFETY: as in `get`.
            unsafe { CStr::from_ptr(self.view.format) }.to_string_lossy().into_owned()
        }
    }

    /// The memory, as a region that may cross into a GIL-free section.
    pub(crate) fn region(&self) -> Region {
        Region { ptr: self.view.buf.cast(), len: self.bytes() }
    }

    /// Whether `other` has the same element type (format and size).
    pub(crate) fn same_type(&self, other: &Buffer) -> bool {
        self.itemsize == other.itemsize
            && (self.dtype == other.dtype && self.dtype != Dtype::Other
                || self.format() == other.format())
    }

    /// A description such as `float64[4]` for messages.
    pub(crate) fn describe(&self) -> String {
        let name = match self.dtype {
            Dtype::Bool => "bool",
            Dtype::I8 => "int8",
            Dtype::U8 => "uint8",
            Dtype::I16 => "int16",
            Dtype::U16 => "uint16",
            Dtype::I32 => "int32",
            Dtype::U32 => "uint32",
            Dtype::I64 => "int64",
            Dtype::U64 => "uint64",
            Dtype::F32 => "float32",
            Dtype::F64 => "float64",
            Dtype::Other => {
                return format!(
                    "format {:?} x {} bytes [{}]",
                    self.format(),
                    self.itemsize,
                    self.elements()
                )
            }
        };
        format!("{name}[{}]", self.elements())
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: the view was filled by a successful PyObject_GetBuffer and is released
        // once; every Buffer lives and dies with the GIL held (it is not Send).
        unsafe { ffi::PyBuffer_Release(&mut *self.view) }
    }
}

/// A span of memory owned by a Python object that stays exported (a live [`Buffer`]) for
/// as long as the region is used. It carries no lifetime so that it can cross into a
/// section that runs without the GIL.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Region {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
}

// SAFETY: a region is plain memory kept alive by its exported buffer, which outlives every
// use (the buffer is dropped only after the GIL-free section returns).
unsafe impl Send for Region {}
// SAFETY: sharing a region only shares the address; access is governed by the unsafe
// accessors' contracts.
unsafe impl Sync for Region {}

impl Region {
    /// A copy of this region's bytes in memory aligned for any element type; keep the
    /// returned words alive while the returned region is used.
    ///
    /// # Safety
    /// As [`Region::bytes`].
    pub(crate) unsafe fn to_temp(self) -> (Vec<u64>, Region) {
        let mut words = vec![0u64; self.len.div_ceil(8)];
        let region = Region { ptr: words.as_mut_ptr().cast(), len: self.len };
        region.copy_from(self);
        (words, region)
    }

    /// `self`, or (if it overlaps `other`) a copy of it, with the copy's memory, which must
    /// outlive every use of the region returned.
    ///
    /// # Safety
    /// As [`Region::bytes`].
    pub(crate) unsafe fn apart_from(self, other: Region) -> (Region, Option<Vec<u64>>) {
        if !self.overlaps(other) {
            return (self, None);
        }
        let (words, copy) = self.to_temp();
        (copy, Some(words))
    }

    /// Zeroed scratch memory of `len` bytes, aligned for any element type.
    pub(crate) fn scratch(len: usize) -> (Vec<u64>, Region) {
        let mut words = vec![0u64; len.div_ceil(8)];
        let region = Region { ptr: words.as_mut_ptr().cast(), len };
        (words, region)
    }

    fn base(self) -> *mut u8 {
        if self.len == 0 || self.ptr.is_null() {
            NonNull::<u64>::dangling().as_ptr().cast()
        } else {
            self.ptr
        }
    }

    /// The region's bytes.
    ///
    /// # Safety
    /// The memory must stay exported and not be written through another alias meanwhile.
    pub(crate) unsafe fn bytes<'a>(self) -> &'a [u8] {
        std::slice::from_raw_parts(self.base(), self.len)
    }

    /// The region's bytes, mutably.
    ///
    /// # Safety
    /// The memory must stay exported, be writable, and have no other live alias.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn bytes_mut<'a>(self) -> &'a mut [u8] {
        std::slice::from_raw_parts_mut(self.base(), self.len)
    }

    /// The region as elements of `T` (checked by [`Region::aligned_for`] beforehand).
    ///
    /// # Safety
    /// As [`Region::bytes_mut`], and the region must be aligned for `T`.
    pub(crate) unsafe fn typed_mut<'a, T: bytemuck::Pod>(self) -> &'a mut [T] {
        let n = self.len / std::mem::size_of::<T>();
        let base =
            if self.len == 0 { NonNull::<T>::dangling().as_ptr() } else { self.ptr.cast::<T>() };
        std::slice::from_raw_parts_mut(base, n)
    }

    /// The region as elements of `T`, read-only.
    ///
    /// # Safety
    /// As [`Region::bytes`], and the region must be aligned for `T`.
    pub(crate) unsafe fn typed<'a, T: bytemuck::Pod>(self) -> &'a [T] {
        self.typed_mut::<T>()
    }

    /// Whether the start is aligned to `align` bytes.
    pub(crate) fn aligned_for(self, align: usize) -> bool {
        self.len == 0 || (self.ptr as usize).is_multiple_of(align)
    }

    /// Whether the two regions share any byte.
    pub(crate) fn overlaps(self, other: Region) -> bool {
        let (a, b) = (self.ptr as usize, other.ptr as usize);
        self.len > 0 && other.len > 0 && a < b + other.len && b < a + self.len
    }

    /// Whether the two regions are the same memory.
    pub(crate) fn same(self, other: Region) -> bool {
        self.ptr == other.ptr && self.len == other.len
    }

    /// Copies `src` into this region (equal lengths; overlap allowed).
    ///
    /// # Safety
    /// Both regions must be exported and this one writable.
    pub(crate) unsafe fn copy_from(self, src: Region) {
        debug_assert_eq!(self.len, src.len);
        if self.len > 0 && !self.same(src) {
            std::ptr::copy(src.ptr, self.ptr, self.len);
        }
    }

    /// A sub-range `[start, start + len)` of this region.
    pub(crate) fn slice(self, start: usize, len: usize) -> Region {
        debug_assert!(start + len <= self.len);
        Region { ptr: self.base().wrapping_add(start), len }
    }
}
