"""The native framing of pickled objects (heddle._heddle.comm.pack_objects and friends, under
heddle.comm's lowercase calls) against a reference built here with ``struct`` from the
format's description: ``<Q n><Q len(pickle)><Q len(buf)>*``, the pickle, then each
out-of-band buffer at a 16-byte boundary of the block, the block padded to 16 bytes."""

from __future__ import annotations

import pickle
import struct

import numpy as np
import pytest

import heddle
from heddle._heddle import comm as _comm


def reference_block(data: bytes, buffers: list[bytes]) -> bytes:
    out = bytearray(struct.pack(f"<QQ{len(buffers)}Q", len(buffers), len(data), *map(len, buffers)))
    out += data
    for b in buffers:
        out += bytes(-len(out) % 16)
        out += b
    out += bytes(-len(out) % 16)
    return bytes(out)


def oob(obj: object) -> tuple[bytes, list[memoryview]]:
    """``obj`` pickled with every contiguous buffer out of band."""
    buffers: list[memoryview] = []
    data = pickle.dumps(obj, protocol=5, buffer_callback=lambda pb: buffers.append(pb.raw()))
    return data, buffers


OBJECTS = [
    None,
    {"a": 1, "b": "text"},
    np.arange(7, dtype=np.int16),  # 14 bytes: the next part needs padding
    [np.arange(1000, dtype=np.float64), b"x" * 5000, np.ones((3, 3), dtype=np.float32)],
    np.arange(0, dtype=np.uint8),  # an empty buffer
]


def test_blocks_are_the_reference_bytes_and_unpack_to_equal_objects() -> None:
    pickled = [oob(o) for o in OBJECTS]
    blob, sizes = _comm.pack_objects(pickled)
    want = [reference_block(d, [bytes(b) for b in bs]) for d, bs in pickled]
    assert sizes == [len(w) for w in want]
    assert bytes(blob) == b"".join(want)
    parts = _comm.unpack_objects(blob, sizes)
    got = [pickle.loads(d, buffers=bs) for d, bs in parts]
    for g, o in zip(got, OBJECTS):
        assert pickle.dumps(g, protocol=5) == pickle.dumps(o, protocol=5)
    # Out-of-band arrays are writable views of the received block, not copies.
    arr = got[2]
    assert isinstance(arr, np.ndarray) and arr.flags.writeable
    assert np.shares_memory(arr, np.frombuffer(blob, dtype=np.uint8))


def test_heads_are_the_reference_bytes() -> None:
    data, buffers = oob([np.arange(600, dtype=np.int64), b"y" * 4096])
    lens = [b.nbytes for b in buffers]
    head = _comm.object_head(data, buffers)
    assert head == struct.pack(f"<QQ{len(lens)}Q", len(lens), len(data), *lens) + data
    view, got_lens = _comm.parse_object_head(head)
    assert bytes(view) == data and got_lens == lens
    bhead = _comm.bcast_head(data, buffers)
    assert bytes(bhead) == struct.pack(f"<{len(lens)}Q", *lens) + data
    view, got_lens = _comm.parse_bcast_head(bhead, len(lens))
    assert bytes(view) == data and got_lens == lens


@pytest.mark.parametrize(
    "call",
    [
        lambda: _comm.parse_object_head(struct.pack("<QQ", 0, 100) + b"short"),
        lambda: _comm.parse_object_head(b"\x01\x02"),
        lambda: _comm.parse_bcast_head(b"\x00" * 4, 1),
        lambda: _comm.unpack_objects(bytearray(struct.pack("<QQQ", 1, 0, 1 << 40)), [24]),
        lambda: _comm.unpack_objects(bytearray(32), [48]),
    ],
)
def test_lengths_beyond_the_bytes_are_refused(call: object) -> None:
    with pytest.raises(heddle.CommError, match="malformed object framing"):
        call()  # type: ignore[operator]


def test_lowercase_calls_round_trip_in_a_world_of_one() -> None:
    comm = heddle.init()
    obj = {"x": np.arange(10_000, dtype=np.float64), "s": "z" * 10}
    for got in (
        comm.allgather(obj)[0],
        comm.scatter([obj]),
        comm.bcast(obj),
        comm.alltoall([obj])[0],
        comm.sendrecv(obj, 0, source=0),
    ):
        assert np.array_equal(got["x"], obj["x"]) and got["s"] == obj["s"]
