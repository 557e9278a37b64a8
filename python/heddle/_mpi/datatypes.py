"""mpi4py's ``Datatype`` for ``heddle.MPI``: the predefined types, derived contiguous and
vector types, and the buffer specifications (``buf``, ``[buf, TYPE]``,
``[buf, count, TYPE]``, ``[buf, (counts, displs), TYPE]``) turned into what Heddle's
native calls take: a flat, contiguous buffer of the base element type.

A datatype is a base numpy element type plus a *type map*: the positions, in base
elements, of the elements one item of the type covers, and its extent. A contiguous map
(the predefined types, ``Create_contiguous``) views the caller's memory without a copy; a
strided one (``Create_vector``) is packed into, or unpacked from, a contiguous copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from heddle._heddle.comm import IN_PLACE
from heddle._mpi.errors import ERR_ARG, ERR_BUFFER, ERR_COUNT, ERR_TYPE, Exception


class Datatype:
    """An element type of messages (mpi4py's ``Datatype``)."""

    _name: str
    _layout: np.ndarray
    _extent: int
    _predefined: bool

    def __init__(
        self,
        datatype: Datatype | None = None,
        *,
        name: str = "MPI_DATATYPE_NULL",
        base: Any = None,
        layout: np.ndarray | None = None,
        extent: int = 0,
        predefined: bool = False,
    ) -> None:
        if datatype is not None:
            name, base, layout = datatype._name, datatype._base, datatype._layout
            extent, predefined = datatype._extent, datatype._predefined
        self._name = name
        self._base: np.dtype[Any] | None = None if base is None else np.dtype(base)
        self._layout = np.arange(1) if layout is None else layout
        self._extent = extent if base is None or extent else 1
        self._predefined = predefined
        self._committed = predefined

    # -- properties as mpi4py names them ------------------------------------------------

    def Get_name(self) -> str:
        return self._name

    def Set_name(self, name: str) -> None:
        self._name = name

    name = property(Get_name, Set_name)

    def _require(self) -> np.dtype[Any]:
        if self._base is None:
            raise Exception(ERR_TYPE, "MPI_DATATYPE_NULL cannot describe data")
        return self._base

    def Get_size(self) -> int:
        """Bytes of data one item holds (gaps excluded)."""
        base = self._require()
        return len(self._layout) * _packed_size(base)

    size = property(Get_size)

    def Get_extent(self) -> tuple[int, int]:
        """``(lower bound, extent)`` in bytes: the span one item covers, gaps included."""
        return 0, self._extent * self._require().itemsize

    extent = property(lambda self: self.Get_extent()[1])
    lb = property(lambda self: 0)
    ub = property(lambda self: self.Get_extent()[1])

    def Get_true_extent(self) -> tuple[int, int]:
        base = self._require()
        return 0, (int(self._layout.max()) + 1) * base.itemsize

    def Commit(self) -> Datatype:
        self._committed = True
        return self

    def Free(self) -> None:
        if self._predefined:
            raise Exception(ERR_TYPE, f"cannot free the predefined datatype {self._name}")
        self._base = None

    def Dup(self) -> Datatype:
        return Datatype(self)

    @property
    def is_predefined(self) -> bool:
        return self._predefined

    def tocode(self) -> str:
        """The numpy type code of a predefined basic type."""
        base = self._require()
        if not self._contiguous() or len(self._layout) != 1 or base.fields:
            raise ValueError("cannot map to character code or type string")
        return base.char

    # -- derived types ------------------------------------------------------------------

    def Create_contiguous(self, count: int) -> Datatype:
        """``count`` items of this type, one after another."""
        return self.Create_vector(count, 1, 1)

    def Create_vector(self, count: int, blocklength: int, stride: int) -> Datatype:
        """``count`` blocks of ``blocklength`` items, block starts ``stride`` items apart."""
        self._require()
        if count < 0 or blocklength < 0:
            raise Exception(ERR_COUNT, f"Create_vector: negative count {count}/{blocklength}")
        items = [i * stride + j for i in range(count) for j in range(blocklength)]
        starts = np.asarray(items, dtype=np.int64) * self._extent
        layout = (starts[:, None] + self._layout[None, :]).reshape(-1)
        extent = ((count - 1) * stride + blocklength) * self._extent if count else 0
        return Datatype(
            name=f"vector({count}, {blocklength}, {stride}) of {self._name}",
            base=self._base,
            layout=layout,
            extent=extent,
        )

    def _contiguous(self) -> bool:
        n = len(self._layout)
        return n == self._extent and bool((self._layout == np.arange(n)).all())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Datatype):
            return NotImplemented
        return self is other or (
            self._predefined and other._predefined and self._name == other._name
        )

    def __hash__(self) -> int:
        return hash(self._name)

    def __bool__(self) -> bool:
        return self._base is not None

    def __repr__(self) -> str:
        return f"<heddle.MPI.Datatype {self._name}>"


def _packed_size(base: np.dtype[Any]) -> int:
    if base.fields:
        return sum(f[0].itemsize for f in base.fields.values())
    return base.itemsize


def _make(name: str, code: Any) -> Datatype:
    return Datatype(name=name, base=code, predefined=True)


def _pair(first: str) -> np.dtype[Any]:
    return np.dtype([("value", first), ("index", "i4")], align=True)


DATATYPE_NULL = Datatype()
BYTE = _make("MPI_BYTE", "u1")
PACKED = _make("MPI_PACKED", "u1")
CHAR = _make("MPI_CHAR", "S1")
WCHAR = _make("MPI_WCHAR", "U1")
SIGNED_CHAR = _make("MPI_SIGNED_CHAR", "i1")
UNSIGNED_CHAR = _make("MPI_UNSIGNED_CHAR", "u1")
SHORT = _make("MPI_SHORT", "h")
UNSIGNED_SHORT = _make("MPI_UNSIGNED_SHORT", "H")
INT = _make("MPI_INT", "i")
UNSIGNED = _make("MPI_UNSIGNED", "I")
UNSIGNED_INT = UNSIGNED
LONG = _make("MPI_LONG", "l")
UNSIGNED_LONG = _make("MPI_UNSIGNED_LONG", "L")
LONG_LONG = _make("MPI_LONG_LONG_INT", "q")
UNSIGNED_LONG_LONG = _make("MPI_UNSIGNED_LONG_LONG", "Q")
FLOAT = _make("MPI_FLOAT", "f")
DOUBLE = _make("MPI_DOUBLE", "d")
LONG_DOUBLE = _make("MPI_LONG_DOUBLE", "g")
C_BOOL = _make("MPI_C_BOOL", "?")
BOOL = C_BOOL
INT8_T = _make("MPI_INT8_T", "i1")
INT16_T = _make("MPI_INT16_T", "i2")
INT32_T = _make("MPI_INT32_T", "i4")
INT64_T = _make("MPI_INT64_T", "i8")
UINT8_T = _make("MPI_UINT8_T", "u1")
UINT16_T = _make("MPI_UINT16_T", "u2")
UINT32_T = _make("MPI_UINT32_T", "u4")
UINT64_T = _make("MPI_UINT64_T", "u8")
C_COMPLEX = _make("MPI_C_COMPLEX", "F")
C_FLOAT_COMPLEX = C_COMPLEX
C_DOUBLE_COMPLEX = _make("MPI_C_DOUBLE_COMPLEX", "D")
COMPLEX = _make("MPI_COMPLEX", "F")
DOUBLE_COMPLEX = _make("MPI_DOUBLE_COMPLEX", "D")
AINT = _make("MPI_AINT", "q")
OFFSET = _make("MPI_OFFSET", "q")
COUNT = _make("MPI_COUNT", "q")
SHORT_INT = _make("MPI_SHORT_INT", _pair("h"))
TWOINT = _make("MPI_2INT", _pair("i"))
INT_INT = TWOINT
LONG_INT = _make("MPI_LONG_INT", _pair("l"))
FLOAT_INT = _make("MPI_FLOAT_INT", _pair("f"))
DOUBLE_INT = _make("MPI_DOUBLE_INT", _pair("d"))
LONG_DOUBLE_INT = _make("MPI_LONG_DOUBLE_INT", _pair("g"))

#: The datatype of a buffer with no type given, by numpy type character.
_BY_CHAR = {
    t._base.char: t  # type: ignore[union-attr]
    for t in (
        *(BYTE, SIGNED_CHAR, SHORT, UNSIGNED_SHORT, INT, UNSIGNED, LONG, UNSIGNED_LONG),
        *(LONG_LONG, UNSIGNED_LONG_LONG, FLOAT, DOUBLE, LONG_DOUBLE, C_BOOL, C_COMPLEX),
        C_DOUBLE_COMPLEX,
    )
}


def of_array(a: np.ndarray) -> Datatype:
    """The predefined datatype of an array's elements (``BYTE`` for other types)."""
    return _BY_CHAR.get(a.dtype.char, BYTE)


class Message:
    """A buffer specification resolved: ``data`` (a flat numpy array of the base type,
    viewing the caller's memory when the type map is contiguous) and, for strided types,
    the ``index`` of the items' elements in the caller's flat memory."""

    __slots__ = ("datatype", "count", "data", "flat", "index")

    def __init__(
        self, datatype: Datatype, count: int, data: np.ndarray, flat: np.ndarray, index: Any
    ) -> None:
        self.datatype, self.count, self.data, self.flat, self.index = (
            datatype,
            count,
            data,
            flat,
            index,
        )

    def unpack(self) -> None:
        """After a receive into a strided type's copy: scatters it into the caller's memory."""
        if self.index is not None:
            self.flat[self.index] = self.data


def flat_view(buf: Any, base: np.dtype[Any], writable: bool, what: str) -> np.ndarray:
    """The whole of ``buf``'s memory as a 1-D array of ``base`` elements, without a copy."""
    try:
        mv = memoryview(buf)
    except TypeError:
        raise Exception(
            ERR_BUFFER,
            f"{what} must be a buffer (numpy array, bytearray, array.array, ...), "
            f"not {type(buf).__name__}",
        ) from None
    if not mv.contiguous:
        raise Exception(ERR_BUFFER, f"{what} must be contiguous in memory")
    if writable and mv.readonly:
        raise Exception(ERR_BUFFER, f"{what} is read-only; a receive needs a writable buffer")
    if mv.nbytes % base.itemsize:
        raise Exception(
            ERR_BUFFER,
            f"{what} holds {mv.nbytes} bytes, not a whole number of {base.itemsize}-byte elements",
        )
    if mv.nbytes == 0:
        return np.empty(0, dtype=base)
    return np.frombuffer(mv.cast("B"), dtype=base)


def resolve(spec: Any, writable: bool, what: str) -> Message:
    """A point-to-point buffer specification: ``buf``, ``[buf, TYPE]``, ``[buf, count]``,
    ``[buf, count, TYPE]`` or ``[buf, (count, displ), TYPE]``."""
    buf, count, displ, dtype = _split_spec(spec, what)
    if dtype is None:
        arr = flat_view(buf, np.dtype("u1"), writable, what)
        dtype = _infer(buf)
        arr = arr.view(dtype._require()) if dtype is not BYTE else arr
    else:
        arr = flat_view(buf, dtype._require(), writable, what)
    start = displ * dtype._extent
    if count is None:
        count = (len(arr) - start) // dtype._extent if dtype._extent else 0
    if count < 0:
        raise Exception(ERR_COUNT, f"{what}: negative count {count}")
    if dtype._contiguous():
        end = start + count * dtype._extent
        if end > len(arr):
            raise Exception(
                ERR_BUFFER,
                f"{what}: {count} items of {dtype.name} need {end} elements; "
                f"the buffer holds {len(arr)}",
            )
        return Message(dtype, count, arr[start:end], arr, None)
    items = np.arange(count, dtype=np.int64)[:, None] * dtype._extent
    index = (items + dtype._layout[None, :]).reshape(-1) + start
    if len(index) and int(index.max()) >= len(arr):
        raise Exception(
            ERR_BUFFER,
            f"{what}: {count} items of {dtype.name} reach past the buffer's {len(arr)} elements",
        )
    return Message(dtype, count, np.ascontiguousarray(arr[index]), arr, index)


def _infer(buf: Any) -> Datatype:
    if isinstance(buf, np.ndarray):
        return of_array(buf)
    try:
        fmt = memoryview(buf).format
    except TypeError:
        return BYTE
    return _BY_CHAR.get(np.dtype(fmt.lstrip("@=<>!")).char, BYTE) if fmt != "B" else BYTE


def _split_spec(spec: Any, what: str) -> tuple[Any, int | None, int, Datatype | None]:
    """``(buf, count, displacement, datatype)`` of a point-to-point specification."""
    if not isinstance(spec, (list, tuple)):
        return spec, None, 0, None
    items = list(spec)
    dtype = items.pop() if items and isinstance(items[-1], Datatype) else None
    if len(items) == 1:
        return items[0], None, 0, dtype
    if len(items) == 2:
        buf, c = items
        if isinstance(c, int):
            return buf, c, 0, dtype
        if isinstance(c, (list, tuple)) and len(c) == 2 and all(isinstance(x, int) for x in c):
            return buf, c[0], c[1], dtype
    if len(items) == 3 and all(isinstance(x, int) for x in items[1:]):
        return items[0], items[1], items[2], dtype
    raise Exception(
        ERR_ARG,
        f"{what}: a message is buf, [buf, TYPE], [buf, count, TYPE] or "
        f"[buf, (count, displ), TYPE], not {_describe(spec)}",
    )


def _describe(spec: Any) -> str:
    if isinstance(spec, (list, tuple)):
        return "[" + ", ".join(type(x).__name__ for x in spec) + "]"
    return type(spec).__name__


def resolve_v(spec: Any, writable: bool, what: str) -> tuple[Message, Any]:
    """A vector-collective specification ``[buf, counts, displs, TYPE]`` (or with
    ``(counts, displs)``, or counts only): the message and what Heddle's native
    v-collectives take (``[flat, counts]`` or ``[flat, (counts, displs)]``)."""
    if spec is None or spec is IN_PLACE:
        return Message(BYTE, 0, np.empty(0, np.uint8), np.empty(0, np.uint8), None), spec
    if not isinstance(spec, (list, tuple)):
        m = resolve(spec, writable, what)
        return m, m.data
    items = list(spec)
    dtype = items.pop() if isinstance(items[-1], Datatype) else None
    buf, rest = items[0], items[1:]
    counts: Sequence[int] | None = None
    displs: Sequence[int] | None = None
    if len(rest) == 1 and isinstance(rest[0], tuple) and len(rest[0]) == 2:
        counts, displs = rest[0]
    elif len(rest) == 1:
        counts = rest[0]
    elif len(rest) == 2:
        counts, displs = rest
    m = resolve([buf, dtype] if dtype is not None else buf, writable, what)
    if not m.datatype._contiguous():
        raise Exception(ERR_TYPE, f"{what}: vector collectives take contiguous datatypes only")
    if counts is None or isinstance(counts, int):
        return m, m.data
    scale = m.datatype._extent
    counts = [int(c) * scale for c in counts]
    if displs is None:
        return m, [m.data, counts]
    return m, [m.data, (counts, [int(d) * scale for d in displs])]
