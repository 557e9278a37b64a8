#!/usr/bin/env python3
"""Writes Heddle's golden wire vectors (spec/vectors/*.bin, *.txt, index.json).

This generator is an independent reference: it builds every frame with
`struct.pack` straight from spec/wire.md and shares no code with any SDK or
with the Rust crate. Output is deterministic.

    python3 spec/vectors/generate.py           # (re)write the vectors
    python3 spec/vectors/generate.py --check   # exit 1 if the files on disk differ
"""

import json
import math
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
HEADER_LEN = 48
MAGIC = 0x4448
VERSION = 1
LIMITS = {"max_frame_payload": 16 << 20, "max_message": 1 << 40}

KINDS = {1: "data", 2: "end-of-stream", 3: "checkpoint barrier", 4: "credit",
         5: "control", 6: "heartbeat", 7: "bridge control", 8: "synchronous data",
         9: "ack"}
CODECS = {0: "raw", 1: "utf8", 2: "bincode", 3: "arrow ipc", 4: "pickle", 5: "json"}
DTYPES = ["u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64", "f32", "f64"]
DTYPE_FMT = {"u8": "B", "i8": "b", "u16": "H", "i16": "h", "u32": "I", "i32": "i",
             "u64": "Q", "i64": "q", "f32": "f", "f64": "d"}
FIRST, LAST, WHOLE, MIDDLE = 1, 2, 3, 0

# (name, offset, struct format) in wire order; spec/wire.md §2.
LAYOUT = [
    ("magic", 0, "H"), ("version", 2, "B"), ("kind", 3, "B"), ("flags", 4, "B"),
    ("codec", 5, "B"), ("key_len", 6, "H"), ("edge", 8, "I"), ("tag", 12, "I"),
    ("source", 16, "I"), ("target", 20, "I"), ("sequence", 24, "Q"),
    ("msg_len", 32, "Q"), ("frag_len", 40, "I"), ("reserved", 44, "I"),
]
HEADER_FMT = "<" + "".join(f for _, _, f in LAYOUT)
assert struct.calcsize(HEADER_FMT) == HEADER_LEN
# Fields a decoder exposes (magic, version and reserved are constants once valid).
DECODED = ["kind", "flags", "codec", "key_len", "edge", "tag", "source", "target",
           "sequence", "msg_len", "frag_len"]
MASTER = 0xFFFF_FFFF


def codec_name(c):
    if c in CODECS:
        return CODECS[c]
    if 0x10 <= c < 0x10 + len(DTYPES):
        return f"array<{DTYPES[c - 0x10]}>"
    return "unknown"


def array(dtype, values):
    return struct.pack(f"<{len(values)}{DTYPE_FMT[dtype]}", *values)


def array_codec(dtype):
    return 0x10 + DTYPES.index(dtype)


def frame(kind, flags=WHOLE, codec=0, edge=0, tag=0, source=0, target=0, sequence=0,
          key=b"", payload=b"", msg_len=None, **override):
    """Header fields plus key and payload; `override` replaces any raw header field."""
    h = {"magic": MAGIC, "version": VERSION, "kind": kind, "flags": flags, "codec": codec,
         "key_len": len(key), "edge": edge, "tag": tag, "source": source, "target": target,
         "sequence": sequence, "msg_len": len(payload) if msg_len is None else msg_len,
         "frag_len": len(payload), "reserved": 0}
    h.update(override)
    return h, key, payload


def encode(h, key, payload):
    return struct.pack(HEADER_FMT, *(h[n] for n, _, _ in LAYOUT)) + key + payload


def describe_value(name, v):
    if name == "magic":
        return f"{v:#06x}" + (' "HD"' if v == MAGIC else " (not \"HD\")")
    if name == "kind":
        return f"{v} ({KINDS.get(v, 'unknown')})"
    if name == "flags":
        parts = [p for bit, p in ((1, "FIRST"), (2, "LAST")) if v & bit]
        extra = v & ~3
        label = "|".join(parts) or "MIDDLE"
        if extra:
            label += f" + reserved bits {extra:#04x}"
        return f"{v:#04x} ({label})"
    if name == "codec":
        return f"{v:#04x} ({codec_name(v)})"
    return str(v)


def hexs(b):
    return " ".join(f"{x:02x}" for x in b)


def txt_for(name, about, data, h, key, payload, expect):
    lines = [f"{name}: {about}", ""]
    if expect["valid"]:
        lines.append(f"valid frame, {len(data)} bytes")
    else:
        err = expect["error"]
        fields = ", ".join(f"{k}: {json.dumps(v)}" for k, v in err.get("fields", {}).items())
        lines.append(f"INVALID: expected error {err['variant']}"
                     + (f" {{ {fields} }}" if fields else "")
                     + f"  (spec rule {err['rule']})")
        lines.append(f"{len(data)} bytes in the file")
    lines += ["", "offset  width  field      bytes (hex)                 value"]
    for n, off, f in LAYOUT:
        width = struct.calcsize("<" + f)
        raw = data[off:off + width]
        if len(raw) < width:
            lines.append(f"{off:<7} {width:<6} {n:<10} {hexs(raw):<27} (missing: file ends)")
            continue
        lines.append(f"{off:<7} {width:<6} {n:<10} {hexs(raw):<27} {describe_value(n, h[n])}")
    pos = HEADER_LEN
    for label, body in (("key", key), ("payload", payload)):
        present = data[pos:pos + len(body)]
        pos += len(body)
        if not body:
            lines.append(f"{'-':<7} {0:<6} {label:<10} (none)")
            continue
        lines.append(f"{pos - len(body):<7} {len(body):<6} {label:<10} ({len(present)} bytes present)")
        for i in range(0, len(present), 16):
            lines.append(f"        {hexs(present[i:i + 16])}")
        if len(present) < len(body):
            lines.append(f"        (file ends: {len(body) - len(present)} declared bytes missing)")
    if expect.get("meaning"):
        lines += ["", "meaning: " + expect["meaning"]]
    lines += ["", "whole file:"]
    for i in range(0, len(data), 16):
        lines.append(f"  {i:04x}  {hexs(data[i:i + 16])}")
    return "\n".join(lines) + "\n"


def vectors():
    """Yields (name, description, header, key, payload, cut, expectation)."""
    v = []

    def valid(name, about, fr, meaning="", values=None):
        v.append((name, about, *fr, None, {"valid": True, "meaning": meaning, "values": values}))

    def invalid(name, about, fr, variant, rule, fields=None, cut=None):
        err = {"variant": variant, "rule": rule}
        if fields:
            err["fields"] = fields
        v.append((name, about, *fr, cut, {"valid": False, "error": err}))

    # ---- valid frames ----------------------------------------------------------------
    valid("data_empty", "smallest valid frame: a whole data message with no payload",
          frame(1))
    text = "héllo, heddle".encode()
    valid("data_utf8", "whole data message, UTF-8 text payload, BSP point-to-point (tag 3)",
          frame(1, codec=1, edge=7, tag=3, source=1, target=2, sequence=42, payload=text),
          meaning=f"payload text {text.decode()!r}")
    f64s = [1.0, -2.5, math.pi]
    valid("data_f64_array", "whole data message, little-endian f64 array of 3 elements",
          frame(1, codec=array_codec("f64"), edge=11, source=4, target=5, sequence=0,
                payload=array("f64", f64s)),
          meaning="payload [1.0, -2.5, 3.141592653589793]", values={"dtype": "f64", "values": f64s})
    i64s = [-1, -(2**63), 2**63 - 1]
    valid("data_extreme_ids",
          "every id field at an unsigned extreme (catches signed-integer SDK bugs), i64 array",
          frame(1, codec=array_codec("i64"), edge=0xFFFF_FFFF, tag=0x8000_0000,
                source=0xFFFF_FFFE, target=0x7FFF_FFFF, sequence=0x0011_2233_4455_6677,
                payload=array("i64", i64s)),
          meaning="payload [-1, i64::MIN, i64::MAX]; sequence bytes are all distinct",
          values={"dtype": "i64", "values": [str(x) for x in i64s]})
    # One keyed message of 10 bytes in three fragments: "frag" + "men" + "ted".
    common = dict(codec=1, edge=9, source=3, target=6, sequence=17, msg_len=10)
    valid("fragment_first_keyed", "first of three fragments of a keyed 10-byte message",
          frame(1, flags=FIRST, key=b"user:42", payload=b"frag", **common),
          meaning="key 'user:42' (applies to the whole message), payload bytes 0..4 'frag'")
    valid("fragment_middle", "middle fragment of the same message",
          frame(1, flags=MIDDLE, payload=b"men", **common),
          meaning="payload bytes 4..7 'men'; no key")
    valid("fragment_last", "last fragment of the same message",
          frame(1, flags=LAST, payload=b"ted", **common),
          meaning="payload bytes 7..10 'ted'; the message is 'fragmented' with key 'user:42'")
    valid("end_of_stream", "source task 1 has no more data for target 2 on edge 7",
          frame(2, edge=7, source=1, target=2, sequence=43),
          meaning="sequence 43 = the sender's next unused data sequence number (data_utf8 was 42)")
    valid("checkpoint_barrier", "checkpoint barrier for checkpoint 5 on edge 7",
          frame(3, edge=7, source=1, target=2, sequence=5),
          meaning="sequence = checkpoint id 5")
    valid("credit", "receiver 2 grants sender 1 eight more buffers on edge 7",
          frame(4, edge=7, source=2, target=1, payload=struct.pack("<I", 8)),
          meaning="payload u32 LE = 8 buffers granted")
    ctl = b'{"op":"join","rank":0,"world_size":4}'
    valid("control", "rank 0 joins the job (worker -> job master), JSON payload",
          frame(5, codec=5, source=0, target=MASTER, sequence=0, payload=ctl),
          meaning="target 0xffffffff = the job master; payload " + ctl.decode())
    valid("heartbeat", "rank 3's 1000th heartbeat to the job master",
          frame(6, source=3, target=MASTER, sequence=1000))
    bctl = b'{"type":"INITIALIZE","task":"filter-0"}'
    valid("bridge_control", "runtime tells bridged task 12 to initialize, JSON payload",
          frame(7, codec=5, edge=2, source=0, target=12, sequence=0, payload=bctl),
          meaning="payload " + bctl.decode())
    valid("sync_data", "rank 1's synchronous send 42 to rank 2, tag 5, on context 9",
          frame(8, codec=array_codec("f64"), edge=9, tag=5, source=1, target=2, sequence=42,
                payload=array("f64", [1.5, -2.0])),
          meaning="sequence = the send's id 42, echoed by the ack; payload [1.5, -2.0]",
          values={"dtype": "f64", "values": [1.5, -2.0]})
    valid("ack", "rank 2 matched rank 1's synchronous send 42 (tag 5, context 9)",
          frame(9, edge=9, tag=5, source=2, target=1, sequence=42),
          meaning="sequence = the id of the matched send")

    # ---- invalid frames: each breaks exactly one rule of spec/wire.md §6 ---------------
    ok = frame(1, codec=1, edge=7, source=1, target=2, payload=b"hello")
    invalid("invalid_short_header", "only 20 bytes of a header", ok,
            "Truncated", "short-header", {"needed": 48, "available": 20}, cut=20)
    invalid("invalid_bad_magic", "magic bytes swapped ('DH')",
            frame(1, codec=1, payload=b"hello", magic=0x4844),
            "BadMagic", "magic", {"found": 0x4844})
    invalid("invalid_bad_version", "version 2",
            frame(1, codec=1, payload=b"hello", version=2),
            "UnsupportedVersion", "version", {"found": 2, "supported": 1})
    invalid("invalid_unknown_kind", "kind 10", frame(10), "UnknownKind", "kind", {"value": 10})
    invalid("invalid_unknown_codec", "codec 6 (between json and the array range)",
            frame(1, codec=6), "UnknownCodec", "codec", {"value": 6})
    invalid("invalid_unknown_dtype", "codec 0x1a: array of dtype 10, which does not exist",
            frame(1, codec=0x1A), "UnknownCodec", "codec", {"value": 0x1A})
    invalid("invalid_reserved_flags", "flags 0x07: FIRST|LAST plus reserved bit 2",
            frame(1, flags=0x07), "Reserved", "flags-reserved", {"field": "flags", "value": 7})
    invalid("invalid_reserved_word", "reserved header word is 1",
            frame(1, reserved=1), "Reserved", "reserved-word", {"field": "reserved", "value": 1})
    big = LIMITS["max_frame_payload"] + 1
    invalid("invalid_frag_len_over_limit", "frag_len one byte over the 16 MiB limit (header only)",
            frame(1, msg_len=big, frag_len=big), "TooLarge", "frag-limit",
            {"field": "frag_len", "value": big, "limit": LIMITS["max_frame_payload"]})
    huge = LIMITS["max_message"] + 1
    invalid("invalid_msg_len_over_limit", "first fragment of a message one byte over 1 TiB",
            frame(1, flags=FIRST, msg_len=huge), "TooLarge", "msg-limit",
            {"field": "msg_len", "value": huge, "limit": LIMITS["max_message"]})
    invalid("invalid_frag_len_gt_msg_len", "a middle fragment of 5 bytes claims a 4-byte message",
            frame(1, flags=MIDDLE, payload=b"hello", msg_len=4),
            "Inconsistent", "frag-exceeds-msg")
    invalid("invalid_whole_length_mismatch", "a whole-message frame with msg_len 6, frag_len 5",
            frame(1, payload=b"hello", msg_len=6), "Inconsistent", "whole-length")
    invalid("invalid_key_on_middle", "a middle fragment carrying a key",
            frame(1, flags=MIDDLE, key=b"k", payload=b"abc", msg_len=10),
            "Inconsistent", "key-not-first")
    invalid("invalid_array_length", "an f64 array message of 12 bytes (1.5 elements)",
            frame(1, codec=array_codec("f64"), payload=bytes(12)),
            "Inconsistent", "array-multiple")
    invalid("invalid_truncated_payload", "valid header declaring 5 payload bytes; file has 2",
            ok, "Truncated", "short-frame", {"needed": 53, "available": 50}, cut=50)
    invalid("invalid_truncated_key", "keyed first fragment cut inside its key",
            frame(1, flags=FIRST, key=b"user:42", payload=b"frag", msg_len=10),
            "Truncated", "short-frame", {"needed": 59, "available": 51}, cut=51)
    return v


# Messages reassembled from fragment vectors (spec/wire.md §5).
MESSAGES = [{
    "name": "fragmented_keyed_message",
    "fragments": ["fragment_first_keyed", "fragment_middle", "fragment_last"],
    "key_hex": b"user:42".hex(),
    "payload_hex": b"fragmented".hex(),
}]


def build():
    files = {}
    index = {
        "about": "Heddle wire-format golden vectors; see spec/wire.md. Generated by generate.py.",
        "wire_version": VERSION,
        "header_len": HEADER_LEN,
        "limits": LIMITS,
        "vectors": [],
        "messages": MESSAGES,
    }
    for name, about, h, key, payload, cut, expect in vectors():
        data = encode(h, key, payload)
        if cut is not None:
            data = data[:cut]
        files[f"{name}.bin"] = data
        files[f"{name}.txt"] = txt_for(name, about, data, h, key, payload, expect).encode()
        entry = {"name": name, "file": f"{name}.bin", "about": about, "valid": expect["valid"],
                 "len": len(data)}
        if expect["valid"]:
            entry["header"] = {n: h[n] for n in DECODED}
            entry["key_hex"] = key.hex()
            entry["payload_hex"] = payload.hex()
            if expect["values"]:
                entry["values"] = expect["values"]
        else:
            entry["error"] = expect["error"]
        index["vectors"].append(entry)
    # Every integer must survive a JSON parser that reads numbers as doubles.
    for e in index["vectors"]:
        for val in list(e.get("header", {}).values()) + list(e.get("error", {}).get("fields", {}).values()):
            assert not isinstance(val, int) or val < 2**53, (e["name"], val)
    files["index.json"] = (json.dumps(index, indent=2, ensure_ascii=False) + "\n").encode()
    return files


def main():
    check = "--check" in sys.argv[1:]
    files = build()
    stale = []
    for fname, data in sorted(files.items()):
        path = HERE / fname
        if check:
            if not path.exists() or path.read_bytes() != data:
                stale.append(fname)
        else:
            path.write_bytes(data)
    known = set(files) | {"generate.py"}
    extra = sorted(p.name for p in HERE.iterdir() if p.is_file() and p.name not in known)
    if check:
        if stale or extra:
            print("stale: " + ", ".join(stale + [f"{x} (not generated)" for x in extra]))
            sys.exit(1)
        print(f"{len(files)} files up to date")
    else:
        print(f"wrote {len(files)} files to {HERE}")
        if extra:
            print("warning: files not made by this generator: " + ", ".join(extra))


if __name__ == "__main__":
    main()
