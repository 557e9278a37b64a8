"""Records: bytes, text or typed arrays, with an optional key."""

from __future__ import annotations

import array
import sys
from typing import Any

from . import wire

_ARRAY_TYPECODES = {"b": 1, "B": 0, "h": 3, "H": 2, "i": 5, "I": 4, "q": 7, "Q": 6, "f": 8, "d": 9}
_DTYPE_TYPECODE = {v: k for k, v in _ARRAY_TYPECODES.items()}


class Record:
    """One record crossing the bridge: `payload` bytes read as `codec`, and a `key`.

    >>> Record.of("hé").text
    'hé'
    >>> Record.of([1.5, 2.5]).values().tolist()
    [1.5, 2.5]
    """

    __slots__ = ("codec", "key", "payload")

    def __init__(
        self, payload: bytes | bytearray | memoryview, codec: int = wire.RAW, key: bytes = b""
    ) -> None:
        self.payload = payload
        self.codec = codec
        self.key = key

    @classmethod
    def of(cls, value: Any, key: bytes = b"") -> Record:
        """A record from a str (utf8), bytes (raw), a list of floats (f64), an `array.array`
        or a numpy array (its dtype, without a copy)."""
        if isinstance(value, Record):
            return value
        if isinstance(value, str):
            return cls(value.encode(), wire.UTF8, key)
        if isinstance(value, (bytes, bytearray, memoryview)):
            return cls(value, wire.RAW, key)
        if isinstance(value, array.array):
            return cls(_le(value), wire.ARRAY_BASE + _ARRAY_TYPECODES[value.typecode], key)
        if isinstance(value, list) and all(isinstance(x, float) for x in value):
            return cls(_le(array.array("d", value)), wire.ARRAY_BASE + 9, key)
        dtype = getattr(value, "dtype", None)
        if dtype is not None and dtype.kind in "iuf":
            code = wire.DTYPES.index(f"{dtype.kind}{dtype.itemsize * 8}")
            data = value.astype(dtype.newbyteorder("<"), copy=False)
            return cls(memoryview(data.reshape(-1)).cast("B"), wire.ARRAY_BASE + code, key)
        raise TypeError(
            f"cannot send a {type(value).__name__} over a bridge: use str, bytes, "
            "a list of floats, array.array or a numpy array"
        )

    @property
    def text(self) -> str:
        """The payload as text (utf8 and json records)."""
        return bytes(self.payload).decode()

    @property
    def dtype(self) -> str | None:
        """The element type of an array record (`'f64'`, …), else None."""
        if self.codec >= wire.ARRAY_BASE:
            return wire.DTYPES[self.codec - wire.ARRAY_BASE]
        return None

    def values(self) -> array.array[Any]:
        """The elements of an array record."""
        dt = self.dtype
        if dt is None:
            raise TypeError(f"record codec {self.codec} is not an array")
        a = array.array(_DTYPE_TYPECODE[wire.DTYPES.index(dt)])
        a.frombytes(bytes(self.payload))
        if sys.byteorder == "big":
            a.byteswap()
        return a

    def __repr__(self) -> str:
        return f"Record(codec={self.codec}, key={self.key!r}, {len(self.payload)} bytes)"


def _le(a: array.array[Any]) -> bytes:
    if sys.byteorder == "big":
        a = array.array(a.typecode, a)
        a.byteswap()
    return a.tobytes()
