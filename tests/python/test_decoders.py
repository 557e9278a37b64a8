"""The record and key decoder (the bytes of records between workers and in spill runs) on
arbitrary input: every input decodes to an object or raises ``heddle.CommError`` — never a
crash, another exception, a hang, or an allocation the input cannot justify.

A fixed number of seeded random inputs (a short fuzzing run, the same in every CI run),
shaped like real encodings: valid tags, plausible and absurd lengths, deep nesting. Pickle
tags are left out: unpickling arbitrary bytes is never safe, which is why only
authenticated and private channels carry records (docs/security.md).
"""

import random
import struct

import pytest

import heddle
from heddle import _heddle

VALUE_TAGS = [0, 1, 2, 3, 4, 5, 6]  # none, bool, int, float, str, bytes, tuple (0x7f: pickle)
KEY_TAGS = [0x01, 0x02, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A]  # 0x0b: pickled key
PICKLE_VALUE, PICKLE_KEY = 0x7F, 0x0B


def random_value(rng: random.Random, depth: int = 0) -> bytes:
    tag = rng.choice(VALUE_TAGS)
    if tag == 6 and depth < 6:
        items = [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
        count = len(items) if rng.random() < 0.8 else rng.choice([len(items) + 1, 2**32 - 1, 2**31])
        body = b"".join(
            struct.pack("<I", len(i) if rng.random() < 0.9 else rng.randrange(2**32)) + i
            for i in items
        )
        return bytes([6]) + struct.pack("<I", count) + body
    body = rng.randbytes(rng.choice([0, 1, 7, 8, 9, rng.randrange(40)]))
    return bytes([tag]) + body


def random_key(rng: random.Random, depth: int = 0) -> bytes:
    tag = rng.choice(KEY_TAGS)
    if tag == 0x0A and depth < 6:
        return (
            bytes([0x0A])
            + b"".join(random_key(rng, depth + 1) for _ in range(rng.randrange(4)))
            + (b"\0" if rng.random() < 0.8 else b"")
        )
    if tag in (0x04, 0x06):
        length = rng.choice([0, 1, 3, 2**32 - 1, rng.randrange(2**32)])
        return bytes([tag]) + struct.pack(">I", length) + rng.randbytes(rng.randrange(12))
    return bytes([tag]) + rng.randbytes(rng.choice([0, 1, 8, rng.randrange(20)]))


def mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randrange(4)):
        op = rng.randrange(3)
        if op == 0 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 1 and b:
            del b[rng.randrange(len(b)) :]
        else:
            b.insert(rng.randrange(len(b) + 1), rng.randrange(256))
    return bytes(b)


def decode(data: bytes, key: bool) -> None:
    try:
        _heddle._decode_record(data, key=key)
    except heddle.CommError as e:
        assert "malformed record encoding" in str(e), e


@pytest.mark.parametrize("key", [False, True])
def test_random_encodings_decode_or_raise_comm_error(key):
    rng = random.Random(20261124 + key)
    avoid = PICKLE_KEY if key else PICKLE_VALUE
    for _ in range(20_000):
        data = mutate(rng, random_key(rng) if key else random_value(rng))
        decode(data.replace(bytes([avoid]), bytes([avoid + 1])), key)


def test_deep_nesting_and_absurd_counts_are_malformed_not_fatal():
    nested = b"\x00"
    for _ in range(2000):
        nested = b"\x06" + struct.pack("<II", 1, len(nested)) + nested
    with pytest.raises(heddle.CommError, match="nested too deeply"):
        _heddle._decode_record(nested, key=False)
    with pytest.raises(heddle.CommError, match="nested too deeply"):
        _heddle._decode_record(b"\x0a" * 100_000, key=True)
    # A tuple claiming 4 billion items in a few bytes: an error, not a 32 GB allocation.
    with pytest.raises(heddle.CommError):
        _heddle._decode_record(b"\x06\xff\xff\xff\xff\x00\x00\x00\x00", key=False)
    assert _heddle._decode_record(
        b"\x06\x02\x00\x00\x00\x01\x00\x00\x00\x00\x02\x00\x00\x00\x01\x01"
    ) == (None, True)
