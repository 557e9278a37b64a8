"""Frames of the Heddle wire format (spec/wire.md) as a bridge uses them (spec/bridge.md §2),
and the canonical JSON of control messages (rule B4)."""

from __future__ import annotations

import json
import struct
from typing import Any, Union

Bytes = Union[bytes, bytearray, memoryview]
HeaderFields = tuple[int, ...]

HEADER = struct.Struct("<HBBBBHIIIIQQII")
HEADER_LEN = HEADER.size
MAGIC = 0x4448
WIRE_VERSION = 1
PROTOCOL_VERSION = 1

DATA, CREDIT, BRIDGE_CONTROL = 1, 4, 7
KNOWN_KINDS = frozenset(range(1, 10))
FIRST, LAST, WHOLE = 1, 2, 3
TAG_DATA, TAG_RESULTS = 0, 1

RAW, UTF8, BINCODE, ARROW, PICKLE, JSON = 0, 1, 2, 3, 4, 5
DTYPES = ("u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64", "f32", "f64")
DTYPE_SIZE = (1, 1, 2, 2, 4, 4, 8, 8, 4, 8)
ARRAY_BASE = 0x10
MAX_FRAME_PAYLOAD = 16 << 20
MAX_MESSAGE = 1 << 40

# Member order of each control message, by (type, sender): spec/bridge.md §4.
ORDER = {
    ("INITIALIZE", "filter"): ("version", "token", "language"),
    ("INITIALIZE", "host"): (
        "version",
        "bridge",
        "task",
        "instance",
        "parallelism",
        "args",
        "max_record",
        "frame_payload",
        "credits",
    ),
    ("START_STOP", "filter"): ("state",),
    ("PAUSE_RESUME", "host"): ("paused",),
    ("PAUSE_RESUME", "filter"): ("paused",),
    ("STATUS", "host"): (),
    ("STATUS", "filter"): (
        "records_in",
        "records_out",
        "bytes_in",
        "bytes_out",
        "open_fds",
        "rss_bytes",
        "cpu_us",
    ),
    ("COMPLETE", "host"): (),
    ("COMPLETE", "filter"): ("records_in", "records_out"),
    ("ABORT", "host"): ("reason",),
    ("ABORT", "filter"): ("reason",),
    ("ERROR", "host"): ("code", "message", "record"),
    ("ERROR", "filter"): ("code", "message", "record"),
    ("CHANGE_BRIDGE_TYPE", "host"): ("epoch", "transport", "address"),
    ("CHANGE_BRIDGE_TYPE", "filter"): ("epoch", "token"),
}


class ProtocolError(Exception):
    """A frame or message that breaks the protocol; `code` is the ERROR code to report."""

    def __init__(self, code: str, message: str, record: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.record = record


def codec_valid(codec: int) -> bool:
    return codec <= JSON or ARRAY_BASE <= codec < ARRAY_BASE + len(DTYPES)


def encode_control(sender: str, msg: dict[str, Any]) -> bytes:
    """The canonical JSON of a control message sent by `sender` ('filter' or 'host')."""
    order = ORDER[(msg["type"], sender)]
    ordered = {"type": msg["type"]}
    ordered.update((k, msg[k]) for k in order if msg.get(k) is not None)
    # The standard library's compact, non-ASCII-preserving form is exactly rule B4.
    return json.dumps(ordered, ensure_ascii=False, separators=(",", ":")).encode()


def decode_control(payload: bytes) -> dict[str, Any]:
    try:
        msg = json.loads(payload)
    except ValueError as e:
        raise ProtocolError("PROTOCOL", f"a control message that is not JSON: {e}") from None
    if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
        raise ProtocolError("PROTOCOL", f"a control message without a type: {payload[:200]!r}")
    return msg


def header(
    kind: int,
    flags: int,
    codec: int,
    key_len: int,
    edge: int,
    tag: int,
    seq: int,
    msg_len: int,
    frag_len: int,
) -> bytes:
    return HEADER.pack(
        MAGIC, WIRE_VERSION, kind, flags, codec, key_len, edge, tag, 0, 0, seq, msg_len, frag_len, 0
    )


def message_frames(
    kind: int,
    codec: int,
    edge: int,
    tag: int,
    seq: int,
    payload: Bytes,
    key: bytes,
    frame_payload: int,
) -> list[Bytes]:
    """The frames (as a list of byte chunks) of one message, fragmented (B3)."""
    n = len(payload)
    if n <= frame_payload:
        return [header(kind, WHOLE, codec, len(key), edge, tag, seq, n, n), key, payload]
    view = memoryview(payload)
    out: list[Bytes] = []
    for at in range(0, n, frame_payload):
        chunk = view[at : at + frame_payload]
        flags = (FIRST if at == 0 else 0) | (LAST if at + frame_payload >= n else 0)
        k = key if at == 0 else b""
        out += [header(kind, flags, codec, len(k), edge, tag, seq, n, len(chunk)), k, chunk]
    return out


def check_header(fields: HeaderFields) -> None:
    """Wire rules V2–V13 on an unpacked header (spec/wire.md §7)."""
    (
        magic,
        version,
        kind,
        flags,
        codec,
        key_len,
        _edge,
        _tag,
        _src,
        _dst,
        _seq,
        msg_len,
        frag_len,
        reserved,
    ) = fields
    if magic != MAGIC:
        raise ProtocolError("PROTOCOL", f"not a Heddle frame (magic {magic:#06x})")
    if version != WIRE_VERSION:
        raise ProtocolError("PROTOCOL", f"wire version {version}, expected {WIRE_VERSION}")
    if kind not in KNOWN_KINDS:
        raise ProtocolError("PROTOCOL", f"unknown frame kind {kind}")
    if flags & 0xFC:
        raise ProtocolError("PROTOCOL", f"reserved flag bits set ({flags:#04x})")
    if not codec_valid(codec):
        raise ProtocolError("PROTOCOL", f"unknown codec {codec:#04x}")
    if reserved:
        raise ProtocolError("PROTOCOL", "reserved header word is not 0")
    if frag_len > MAX_FRAME_PAYLOAD or msg_len > MAX_MESSAGE or frag_len > msg_len:
        raise ProtocolError("PROTOCOL", f"bad lengths (frag_len {frag_len}, msg_len {msg_len})")
    if flags == WHOLE and frag_len != msg_len:
        raise ProtocolError("PROTOCOL", "a whole frame whose frag_len differs from msg_len")
    if key_len and not flags & FIRST:
        raise ProtocolError("PROTOCOL", "a key on a fragment that is not the first")
    if codec >= ARRAY_BASE and msg_len % DTYPE_SIZE[codec - ARRAY_BASE]:
        raise ProtocolError("PROTOCOL", "an array whose length is not a multiple of its element")
