#!/usr/bin/env python3
"""Writes Heddle's bridge-protocol conformance vectors (spec/bridge/), see spec/bridge.md §9.

An independent reference: frames are built with `struct.pack` and control messages with a
canonical JSON writer made from spec/bridge.md B4; nothing is shared with any SDK or with
the Rust crates. Output is deterministic.

    python3 spec/bridge/generate.py           # (re)write the vectors
    python3 spec/bridge/generate.py --check   # exit 1 if the files on disk differ
"""

import json
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
HEADER_FMT = "<HBBBBHIIIIQQII"
MAGIC, WIRE_VERSION, BRIDGE_VERSION = 0x4448, 1, 1
DATA, CREDIT, BRIDGE_CONTROL = 1, 4, 7
RAW, UTF8, PICKLE, JSON_CODEC, F64 = 0, 1, 4, 5, 0x19
FIRST, LAST, WHOLE = 1, 2, 3
TOKEN = "00112233445566778899aabbccddeeff"
LANGUAGE = "test"
BRIDGE = 7

# Member order of every control message (spec/bridge.md §4), by (type, direction).
ORDER = {
    ("INITIALIZE", "filter"): ["version", "token", "language"],
    ("INITIALIZE", "host"): ["version", "bridge", "task", "instance", "parallelism", "args",
                             "max_record", "frame_payload", "credits"],
    ("START_STOP", "filter"): ["state"],
    ("PAUSE_RESUME", "host"): ["paused"],
    ("PAUSE_RESUME", "filter"): ["paused"],
    ("STATUS", "host"): [],
    ("STATUS", "filter"): ["records_in", "records_out", "bytes_in", "bytes_out", "open_fds",
                           "rss_bytes", "cpu_us"],
    ("COMPLETE", "host"): [],
    ("COMPLETE", "filter"): ["records_in", "records_out"],
    ("ABORT", "host"): ["reason"],
    ("ABORT", "filter"): ["reason"],
    ("ERROR", "host"): ["code", "message", "record"],
    ("ERROR", "filter"): ["code", "message", "record"],
    ("CHANGE_BRIDGE_TYPE", "host"): ["epoch", "transport", "address"],
    ("CHANGE_BRIDGE_TYPE", "filter"): ["epoch", "token"],
}
SHORT = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"}


def canon_str(s):
    out = ['"']
    for ch in s:
        c = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif c < 0x20:
            out.append(SHORT.get(c, f"\\u{c:04x}"))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def canon_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        assert abs(v) < 2**53
        return str(v)
    if isinstance(v, str):
        return canon_str(v)
    if isinstance(v, list):
        return "[" + ",".join(canon_value(x) for x in v) + "]"
    raise TypeError(v)


def control_json(direction, msg):
    keys = ORDER[(msg["type"], direction)]
    assert set(msg) - {"type"} <= set(keys), msg
    parts = [f'"type":{canon_str(msg["type"])}']
    parts += [f"{canon_str(k)}:{canon_value(msg[k])}" for k in keys if k in msg]
    text = "{" + ",".join(parts) + "}"
    # Cross-check against the standard library's compact form.
    assert text == json.dumps({"type": msg["type"], **{k: msg[k] for k in keys if k in msg}},
                              ensure_ascii=False, separators=(",", ":")), text
    return text.encode()


def frame(kind, flags, codec, edge, tag, sequence, msg_len, key, payload):
    head = struct.pack(HEADER_FMT, MAGIC, WIRE_VERSION, kind, flags, codec, len(key), edge,
                       tag, 0, 0, sequence, msg_len, len(payload), 0)
    return head + key + payload


def message(kind, codec, edge, tag, sequence, payload, key=b"", frame_payload=None):
    """One message as frames of at most `frame_payload` bytes (B3)."""
    step = frame_payload or max(len(payload), 1)
    chunks = [payload[i:i + step] for i in range(0, len(payload), step)] or [b""]
    out = b""
    for i, chunk in enumerate(chunks):
        flags = (FIRST if i == 0 else 0) | (LAST if i == len(chunks) - 1 else 0)
        out += frame(kind, flags, codec, edge, tag, sequence, len(payload),
                     key if i == 0 else b"", chunk)
    return out


def control(direction, msg, edge=BRIDGE, frame_payload=None):
    return message(BRIDGE_CONTROL, JSON_CODEC, edge, 0, 0, control_json(direction, msg),
                   frame_payload=frame_payload)


def credit(n, edge=BRIDGE):
    return frame(CREDIT, WHOLE, RAW, edge, 0, 0, 4, b"", struct.pack("<I", n))


def f64s(values):
    return struct.pack(f"<{len(values)}d", *values)


# ---- single control frames (§4) ---------------------------------------------------------
HOST_INIT = {"type": "INITIALIZE", "version": 1, "bridge": BRIDGE, "task": "upper",
             "instance": 0, "parallelism": 1, "args": ["records="], "max_record": 1 << 20,
             "frame_payload": 8, "credits": 4}
FILTER_INIT = {"type": "INITIALIZE", "version": BRIDGE_VERSION, "token": TOKEN,
               "language": LANGUAGE}

CONTROL = [
    ("initialize_filter", "filter", 0, FILTER_INIT),
    ("initialize_host", "host", BRIDGE,
     {**HOST_INIT, "task": "lower \"words\"", "instance": 3, "parallelism": 4,
      "args": ["--min", "3", "tab\there", "ünïcode"], "max_record": 16 << 20,
      "frame_payload": 1 << 20, "credits": 64}),
    ("start_stop", "filter", BRIDGE, {"type": "START_STOP", "state": "started"}),
    ("pause", "host", BRIDGE, {"type": "PAUSE_RESUME", "paused": True}),
    ("resume_ack", "filter", BRIDGE, {"type": "PAUSE_RESUME", "paused": False}),
    ("status_request", "host", BRIDGE, {"type": "STATUS"}),
    ("status_reply", "filter", BRIDGE,
     {"type": "STATUS", "records_in": 1000, "records_out": 999, "bytes_in": 2**40,
      "bytes_out": 0, "open_fds": 5, "rss_bytes": 12345678, "cpu_us": 2**53 - 1}),
    ("complete_host", "host", BRIDGE, {"type": "COMPLETE"}),
    ("complete_filter", "filter", BRIDGE,
     {"type": "COMPLETE", "records_in": 3, "records_out": 4}),
    ("abort_host", "host", BRIDGE, {"type": "ABORT", "reason": "job cancelled by the user"}),
    ("error_filter", "filter", BRIDGE,
     {"type": "ERROR", "code": "PROCESS", "message": "ValueError: bad\nline\u0001",
      "record": 17}),
    ("error_no_record", "host", BRIDGE,
     {"type": "ERROR", "code": "VERSION",
      "message": "host speaks bridge protocol version 1, the filter version 2"}),
    ("change_host", "host", BRIDGE,
     {"type": "CHANGE_BRIDGE_TYPE", "epoch": 2, "transport": "unix",
      "address": "/tmp/heddle-x/bridge-7/2.sock"}),
    ("change_ack_old", "filter", BRIDGE, {"type": "CHANGE_BRIDGE_TYPE", "epoch": 2}),
    ("change_hello_new", "filter", BRIDGE,
     {"type": "CHANGE_BRIDGE_TYPE", "epoch": 2, "token": TOKEN}),
]

# ---- records (§2) -------------------------------------------------------------------------
RECORDS = [
    ("data_utf8", "DATA record 0, UTF-8, whole", DATA, UTF8, 0, 0, b"hello", b"", None),
    ("data_keyed_fragmented", "DATA record 5, UTF-8 with key 'k', in fragments of 4 bytes",
     DATA, UTF8, 0, 5, "Grüße!".encode(), b"k", 4),
    ("results_f64", "RESULTS record 2, f64 array [3.0]", DATA, F64, 1, 2, f64s([3.0]), b"", None),
    ("results_empty", "RESULTS record 9, empty raw record", DATA, RAW, 1, 9, b"", b"", None),
]

# ---- sessions (§9) ------------------------------------------------------------------------


def session_upper():
    fp = HOST_INIT["frame_payload"]
    to_f = control("host", HOST_INIT)
    records = [(UTF8, b"k1", b"hello"), (UTF8, b"", "Grüße, world!".encode()),
               (F64, b"", f64s([1.5, 2.25, -0.75])), (RAW, b"", b"\x00\x01\xff"),
               (UTF8, b"", b"")]
    for seq, (codec, key, payload) in enumerate(records):
        to_f += message(DATA, codec, BRIDGE, 0, seq, payload, key, fp)
    to_f += credit(2)
    to_f += control("host", {"type": "PAUSE_RESUME", "paused": True}, frame_payload=fp)
    to_f += control("host", {"type": "PAUSE_RESUME", "paused": False}, frame_payload=fp)
    to_f += control("host", {"type": "COMPLETE"}, frame_payload=fp)

    from_f = control("filter", FILTER_INIT, edge=0)
    from_f += control("filter", {"type": "START_STOP", "state": "started"}, frame_payload=fp)
    outputs = [(UTF8, b"k1", b"HELLO"), (UTF8, b"", "GRüßE, WORLD!".encode()),
               (F64, b"", f64s([3.0])), (RAW, b"", b"\x00\x01\xff"), (UTF8, b"", b"")]
    for seq, (codec, key, payload) in enumerate(outputs):
        from_f += message(DATA, codec, BRIDGE, 1, seq, payload, key, fp)
        if seq in (1, 3):  # F1: credits 4 -> grants of 2 after every second record
            from_f += credit(2)
    from_f += control("filter", {"type": "PAUSE_RESUME", "paused": True}, frame_payload=fp)
    from_f += control("filter", {"type": "PAUSE_RESUME", "paused": False}, frame_payload=fp)
    from_f += message(DATA, UTF8, BRIDGE, 1, 5, b"records=5", b"", fp)
    from_f += control("filter", {"type": "COMPLETE", "records_in": 5, "records_out": 6},
                      frame_payload=fp)
    return to_f, from_f


def session_error(host_init, data_frames):
    to_f = control("host", host_init) + b"".join(data_frames)
    return to_f, control("filter", FILTER_INIT, edge=0)


def sessions():
    big = {**HOST_INIT, "max_record": 16, "frame_payload": 1024}
    wide = {**HOST_INIT, "frame_payload": 1024}
    return [
        ("upper", "the reference filter over five records: keys, fragments, f64, raw, empty; "
         "a host credit, pause and resume, finalize", session_upper(), None),
        ("version_mismatch", "the host speaks version 2: the filter refuses it",
         session_error({**HOST_INIT, "version": 2}, []), "VERSION"),
        ("record_too_large", "a 17-byte record where max_record is 16",
         session_error(big, [message(DATA, RAW, BRIDGE, 0, 0, b"x" * 17)]),
         "RECORD_TOO_LARGE"),
        ("pickle_refused", "a record in the pickle codec (B5)",
         session_error(wide, [message(DATA, PICKLE, BRIDGE, 0, 0, b"\x80\x04N.")]),
         "PROTOCOL"),
        ("sequence_gap", "records 0 then 2: record 1 was lost (B2)",
         session_error(wide, [message(DATA, UTF8, BRIDGE, 0, 0, b"a"),
                              message(DATA, UTF8, BRIDGE, 0, 2, b"b")]), "PROTOCOL"),
    ]


def build():
    files = {}
    index = {"about": "Heddle bridge-protocol vectors; see spec/bridge.md §9. "
                      "Generated by generate.py.",
             "bridge_version": BRIDGE_VERSION, "token": TOKEN, "language": LANGUAGE,
             "control": [], "records": [], "sessions": []}
    for name, direction, edge, msg in CONTROL:
        data = control(direction, msg, edge=edge)
        files[f"control/{name}.bin"] = data
        index["control"].append({"name": name, "file": f"control/{name}.bin",
                                 "direction": direction, "edge": edge, "message": msg})
    for name, about, kind, codec, tag, seq, payload, key, fp in RECORDS:
        data = message(kind, codec, BRIDGE, tag, seq, payload, key, fp)
        files[f"records/{name}.bin"] = data
        index["records"].append({"name": name, "file": f"records/{name}.bin", "about": about,
                                 "codec": codec, "tag": tag, "sequence": seq,
                                 "key_hex": key.hex(), "payload_hex": payload.hex(),
                                 "frame_payload": fp or 1 << 20})
    files["records/credit.bin"] = credit(8)
    index["records"].append({"name": "credit", "file": "records/credit.bin",
                             "about": "a grant of 8 records", "credit": 8})
    for name, about, (to_f, from_f), error in sessions():
        files[f"sessions/{name}/to_filter.bin"] = to_f
        files[f"sessions/{name}/from_filter.bin"] = from_f
        entry = {"name": name, "about": about, "to_filter": f"sessions/{name}/to_filter.bin",
                 "from_filter": f"sessions/{name}/from_filter.bin"}
        if error:
            entry.update({"invalid": True, "error_code": error, "exit_status": 2,
                          "from_filter_is_prefix": True})
        else:
            entry.update({"invalid": False, "exit_status": 0})
        index["sessions"].append(entry)
    files["index.json"] = (json.dumps(index, indent=2, ensure_ascii=False) + "\n").encode()
    return files


def main():
    check = "--check" in sys.argv[1:]
    files = build()
    stale = [f for f, d in sorted(files.items())
             if not (HERE / f).exists() or (HERE / f).read_bytes() != d]
    known = set(files) | {"generate.py"}
    extra = sorted(str(p.relative_to(HERE)) for p in HERE.rglob("*")
                   if p.is_file() and str(p.relative_to(HERE)) not in known)
    if check:
        if stale or extra:
            print("stale: " + ", ".join(stale + [f"{x} (not generated)" for x in extra]))
            sys.exit(1)
        print(f"{len(files)} bridge files up to date")
        return
    for f in stale:
        (HERE / f).parent.mkdir(parents=True, exist_ok=True)
        (HERE / f).write_bytes(files[f])
    print(f"wrote {len(stale)} of {len(files)} files to {HERE}")
    if extra:
        print("warning: files not made by this generator: " + ", ".join(extra))


if __name__ == "__main__":
    main()
