"""The Python SDK against spec/bridge/ (spec/bridge.md §9): every control message and record
decoded and re-encoded byte for byte, and every session replayed byte for byte."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from heddle_bridge import Session, wire
from heddle_bridge.channel import Channel
from reference_filter import Reference

SPEC = Path(__file__).resolve().parents[3] / "spec" / "bridge"
INDEX = json.loads((SPEC / "index.json").read_text())


def read_all(data: bytes) -> list:
    """Every message in `data`, reassembled: (kind, codec, tag, seq, key, payload)."""
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.seek(0)
        ch = Channel(os.dup(f.fileno()), -1)
        out = []
        while (h := ch.read_header()) is not None:
            key, payload = ch.read_body(h[5], h[12])
            while not h[3] & wire.LAST:
                h2 = ch.read_header()
                assert h2 is not None
                payload += ch.read_body(0, h2[12])[1]
                h = h2
            out.append((h[2], h[4], h[7], h[10], key, payload))
        return out


@pytest.mark.parametrize("v", INDEX["control"], ids=lambda v: v["name"])
def test_control_vectors(v):
    data = (SPEC / v["file"]).read_bytes()
    [(kind, codec, _tag, _seq, key, payload)] = read_all(data)
    assert (kind, codec, key) == (wire.BRIDGE_CONTROL, wire.JSON, b"")
    assert wire.decode_control(payload) == v["message"]
    frames = wire.message_frames(
        wire.BRIDGE_CONTROL,
        wire.JSON,
        v["edge"],
        0,
        0,
        wire.encode_control(v["direction"], v["message"]),
        b"",
        1 << 20,
    )
    assert b"".join(bytes(c) for c in frames) == data


@pytest.mark.parametrize(
    "v", [r for r in INDEX["records"] if "codec" in r], ids=lambda v: v["name"]
)
def test_record_vectors(v):
    data = (SPEC / v["file"]).read_bytes()
    [(kind, codec, tag, seq, key, payload)] = read_all(data)
    assert (kind, codec, tag, seq) == (wire.DATA, v["codec"], v["tag"], v["sequence"])
    assert (key.hex(), payload.hex()) == (v["key_hex"], v["payload_hex"])
    frames = wire.message_frames(wire.DATA, codec, 7, tag, seq, payload, key, v["frame_payload"])
    assert b"".join(bytes(c) for c in frames) == data


def test_credit_vector():
    [(kind, _c, _t, _s, _k, payload)] = read_all((SPEC / "records/credit.bin").read_bytes())
    assert kind == wire.CREDIT and int.from_bytes(payload, "little") == 8


def replay(session_entry) -> tuple[int, bytes]:
    to_filter = (SPEC / session_entry["to_filter"]).read_bytes()
    with tempfile.TemporaryFile() as fin, tempfile.TemporaryFile() as fout:
        fin.write(to_filter)
        fin.seek(0)
        s = Session(
            Channel(os.dup(fin.fileno()), os.dup(fout.fileno())),
            INDEX["token"],
            language=INDEX["language"],
        )
        status = s.run(Reference())
        s.ch.close()
        fout.seek(0)
        return status, fout.read()


@pytest.mark.parametrize("v", INDEX["sessions"], ids=lambda v: v["name"])
def test_sessions(v):
    status, out = replay(v)
    expected = (SPEC / v["from_filter"]).read_bytes()
    assert status == v["exit_status"]
    if not v["invalid"]:
        assert out == expected
        return
    assert out.startswith(expected)
    [*_, (kind, _c, _t, _s, _k, payload)] = read_all(out)
    msg = wire.decode_control(payload)
    assert kind == wire.BRIDGE_CONTROL and msg["type"] == "ERROR", msg
    assert msg["code"] == v["error_code"], msg
