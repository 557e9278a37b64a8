"""Records to and from bridged programs (spec/bridge.md): each Python record becomes a
wire triple ``(codec, key, payload)`` for :meth:`heddle.data.DataSet.pipe`, and each
result comes back as the Python value its codec names.

==========================================  =======================  ==========================
Python record                               codec                    comes back as
==========================================  =======================  ==========================
``str``                                     utf8 (1)                 ``str``
``bytes``, ``bytearray``, ``memoryview``    raw (0)                  ``bytes``
``int`` / ``float``                         i64 / f64 array of one   numpy array (or
numpy array, ``array.array``                array of its dtype       ``array.array`` without
                                                                     numpy), no text
``(key, value)`` with a str or bytes key    value's codec, keyed     ``(key: str, value)``
==========================================  =======================  ==========================
"""

from __future__ import annotations

import array
import sys
from collections.abc import Sequence
from typing import Any

RAW, UTF8, JSON, ARRAY = 0, 1, 5, 0x10
DTYPES = ("u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64", "f32", "f64")
_NUMPY_KIND = {
    "u1": 0,
    "i1": 1,
    "u2": 2,
    "i2": 3,
    "u4": 4,
    "i4": 5,
    "u8": 6,
    "i8": 7,
    "f4": 8,
    "f8": 9,
}
_TYPECODE = {"B": 0, "b": 1, "H": 2, "h": 3, "I": 4, "i": 5, "Q": 6, "q": 7, "f": 8, "d": 9}
_NUMPY_DTYPE = ("<u1", "<i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8", "<f4", "<f8")
_ARRAY_CODE = {v: k for k, v in _TYPECODE.items()}


def _value(x: Any) -> tuple[int, bytes]:
    if isinstance(x, str):
        return UTF8, x.encode()
    if isinstance(x, (bytes, bytearray, memoryview)):
        return RAW, bytes(x)
    if isinstance(x, bool):
        raise TypeError("a bool cannot cross a bridge: send an int or a str")
    if isinstance(x, int):
        return ARRAY + 7, x.to_bytes(8, "little", signed=True)
    if isinstance(x, float):
        return ARRAY + 9, array.array("d", [x]).tobytes()
    if isinstance(x, array.array) and x.typecode in _TYPECODE:
        a = x
        if sys.byteorder == "big":
            a = array.array(x.typecode, x)
            a.byteswap()
        return ARRAY + _TYPECODE[x.typecode], a.tobytes()
    dtype = getattr(x, "dtype", None)
    if dtype is not None and f"{dtype.kind}{dtype.itemsize}" in _NUMPY_KIND:
        code = _NUMPY_KIND[f"{dtype.kind}{dtype.itemsize}"]
        return ARRAY + code, x.astype(_NUMPY_DTYPE[code], copy=False).tobytes()
    raise TypeError(
        f"a {type(x).__name__} cannot cross a bridge: send str, bytes, int, float, "
        "a numpy array, an array.array or a (key, value) pair of those"
    )


def command_line(command: str | Sequence[str]) -> list[str]:
    """A filter's command as a list: a string is split on whitespace (no quoting)."""
    return command.split() if isinstance(command, str) else [str(c) for c in command]


def to_wire(x: Any) -> tuple[int, bytes, bytes]:
    """The wire triple of a Python record."""
    if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], (str, bytes)):
        key = x[0].encode() if isinstance(x[0], str) else x[0]
        codec, payload = _value(x[1])
        return codec, key, payload
    codec, payload = _value(x)
    return codec, b"", payload


def from_wire(t: tuple[int, bytes, bytes]) -> Any:
    """The Python value of a result's wire triple."""
    codec, key, payload = t
    value: Any
    if codec in (UTF8, JSON):
        value = payload.decode()
    elif ARRAY <= codec < ARRAY + len(DTYPES):
        try:
            import numpy as np

            value = np.frombuffer(payload, dtype=_NUMPY_DTYPE[codec - ARRAY])
        except ImportError:
            value = array.array(_ARRAY_CODE[codec - ARRAY])
            value.frombytes(payload)
            if sys.byteorder == "big":
                value.byteswap()
    else:
        value = payload
    return (key.decode(errors="surrogateescape"), value) if key else value
