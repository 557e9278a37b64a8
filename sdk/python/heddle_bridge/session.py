"""The filter side of the bridge protocol (spec/bridge.md §4–§6): handshake, records
within credits, pause, status, transport switches, finalize, errors."""

from __future__ import annotations

import collections
import os
import resource
import sys
import traceback
from typing import Any, Callable

from . import wire
from .channel import Channel, Pipes, open_channel
from .record import Record

EXIT_OK, EXIT_ERROR, EXIT_ABORT = 0, 2, 3


class Filter:
    """A DataCutter filter: override `init`, `process` and `finalize`.

    `process(record, emit)` is called once per input record in order; `emit(value, key=b"")`
    sends a result (a Record, str, bytes, list of floats, array.array or numpy array).
    """

    def init(self, args: list[str], context: dict[str, Any]) -> None:
        """Called once with the task's arguments and {task, instance, parallelism}."""

    def process(self, record: Record, emit: Callable[..., None]) -> None:
        raise NotImplementedError

    def finalize(self, emit: Callable[..., None]) -> None:
        """Called once after the last record; may emit."""


class _Message:
    __slots__ = ("kind", "codec", "seq", "key", "payload")

    def __init__(self, kind: int, codec: int, seq: int, key: bytes, payload: bytes) -> None:
        self.kind, self.codec, self.seq, self.key, self.payload = kind, codec, seq, key, payload


class Session:
    """One bridge, from the filter's side."""

    def __init__(
        self, channel: Channel, token: str, pipes: Pipes | None = None, language: str = "python"
    ) -> None:
        self.ch = channel
        self.token = token
        self.pipes = pipes
        self.language = language
        # Tests of version refusal make the SDK claim another version.
        self.version = int(os.environ.get("HEDDLE_BRIDGE_TEST_VERSION", wire.PROTOCOL_VERSION))
        self.edge = 0
        self.frame_payload = 1 << 20
        self.max_record = 64 << 20
        self.credits = 0
        self.grant = 1
        self.next_in = 0
        self.seen_in = 0
        self.next_out = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.paused = False
        self.pending: collections.deque[_Message] = collections.deque()
        self.deferred: collections.deque[_Message] = collections.deque()

    # ---- frames ----------------------------------------------------------------------
    def _read(self) -> _Message | None:
        """The next message: one read ahead while waiting for credit, else from the wire."""
        if self.pending:
            return self.pending.popleft()
        return self._read_wire()

    def _read_wire(self) -> _Message | None:
        first = self.ch.read_header()
        if first is None:
            return None
        _m, _v, kind, flags, codec, key_len, _e, tag, _s, _t, seq, msg_len, frag_len, _r = first
        if not flags & wire.FIRST:
            raise wire.ProtocolError("PROTOCOL", "a message that does not start with a FIRST frame")
        if kind not in (wire.DATA, wire.CREDIT, wire.BRIDGE_CONTROL):
            raise wire.ProtocolError("PROTOCOL", f"a frame of kind {kind} on a bridge")
        if kind == wire.DATA:
            if tag != wire.TAG_DATA:
                raise wire.ProtocolError("PROTOCOL", f"a record with tag {tag} from the host")
            if codec == wire.PICKLE:
                raise wire.ProtocolError("PROTOCOL", f"record {seq} is a pickle (B5)", seq)
            if seq != self.seen_in:
                raise wire.ProtocolError(
                    "PROTOCOL",
                    f"record {seq} arrived where record {self.seen_in} was due (B2)",
                    seq,
                )
            self.seen_in += 1
        if msg_len > self.max_record:
            raise wire.ProtocolError(
                "RECORD_TOO_LARGE",
                f"record {seq} is {msg_len} bytes, above max_record {self.max_record}",
                seq,
            )
        key, payload = self.ch.read_body(key_len, frag_len)
        if not flags & wire.LAST:
            parts = [payload]
            got = len(payload)
            while True:
                h = self.ch.read_header()
                if h is None:
                    raise wire.ProtocolError(
                        "PROTOCOL", "the host closed the channel inside a message"
                    )
                if h[3] & wire.FIRST or h[2] != kind or h[10] != seq or h[11] != msg_len or h[5]:
                    raise wire.ProtocolError(
                        "PROTOCOL", "a fragment that does not continue its message"
                    )
                parts.append(self.ch.read_body(0, h[12])[1])
                got += h[12]
                if h[3] & wire.LAST:
                    break
            payload = b"".join(parts)
        if len(payload) != msg_len:
            raise wire.ProtocolError(
                "PROTOCOL", f"a message of {len(payload)} bytes declared {msg_len}"
            )
        return _Message(kind, codec, seq, key, payload)

    def _send_control(self, msg: dict[str, Any]) -> None:
        payload = wire.encode_control("filter", msg)
        self.ch.write(
            wire.message_frames(
                wire.BRIDGE_CONTROL, wire.JSON, self.edge, 0, 0, payload, b"", self.frame_payload
            )
        )

    def emit(self, value: Any, key: bytes = b"") -> None:
        """Sends one result, waiting for credit (F2) if the host has granted none."""
        r = Record.of(value, key) if not isinstance(value, Record) else value
        if key and isinstance(value, Record):
            r = Record(value.payload, value.codec, key)
        if r.codec == wire.PICKLE:
            raise ValueError("pickled records cannot cross a bridge")
        if len(r.payload) > self.max_record:
            raise wire.ProtocolError(
                "RECORD_TOO_LARGE",
                f"result {self.next_out} is {len(r.payload)} bytes, "
                f"above max_record {self.max_record}",
            )
        while self.credits == 0:
            m = self._read_wire()
            if m is None:
                raise wire.ProtocolError(
                    "PROTOCOL", "the host closed the channel while waiting for credit"
                )
            if m.kind == wire.CREDIT:
                self._credit(m)
            else:
                if (
                    m.kind == wire.BRIDGE_CONTROL
                    and wire.decode_control(m.payload)["type"] == "COMPLETE"
                ):
                    self.credits = 1 << 62  # F3: the host sends no more credit
                self.pending.append(m)
        self.credits -= 1
        self.ch.write(
            wire.message_frames(
                wire.DATA,
                r.codec,
                self.edge,
                wire.TAG_RESULTS,
                self.next_out,
                r.payload,
                r.key,
                self.frame_payload,
            )
        )
        self.next_out += 1
        self.bytes_out += len(r.payload)

    def _credit(self, m: _Message) -> None:
        if len(m.payload) != 4:
            raise wire.ProtocolError("PROTOCOL", f"a credit of {len(m.payload)} bytes")
        self.credits += int.from_bytes(m.payload, "little")

    # ---- the session -----------------------------------------------------------------
    def run(self, flt: Filter) -> int:
        """Runs the whole session; returns the exit status (§4)."""
        stage = "PROTOCOL"
        try:
            self._send_control(
                {
                    "type": "INITIALIZE",
                    "version": self.version,
                    "token": self.token,
                    "language": self.language,
                }
            )
            m = self._read()
            if m is None or m.kind != wire.BRIDGE_CONTROL:
                raise wire.ProtocolError("PROTOCOL", "the host did not answer INITIALIZE")
            init = wire.decode_control(m.payload)
            if init.get("type") == "ERROR":
                # The host refused this filter (another version, a wrong token).
                print(
                    f"heddle bridge: the host refused this filter: {init.get('message')}",
                    file=sys.stderr,
                )
                return EXIT_ERROR
            if init.get("type") != "INITIALIZE":
                raise wire.ProtocolError("PROTOCOL", f"expected INITIALIZE, got {init.get('type')}")
            if init.get("version") != self.version:
                raise wire.ProtocolError(
                    "VERSION",
                    f"host speaks bridge protocol version {init.get('version')}, "
                    f"this filter version {self.version}",
                )
            self.edge = int(init["bridge"])
            self.frame_payload = max(1, int(init["frame_payload"]))
            self.max_record = int(init["max_record"])
            self.credits = int(init["credits"])
            self.grant = max(1, self.credits // 2)
            stage = "INIT"
            flt.init(
                list(init.get("args", [])),
                {
                    "task": init.get("task"),
                    "instance": init.get("instance"),
                    "parallelism": init.get("parallelism"),
                },
            )
            stage = "PROTOCOL"
            self._send_control({"type": "START_STOP", "state": "started"})
            return self._loop(flt)
        except wire.ProtocolError as e:
            return self._fail(e.code, str(e), e.record)
        except Exception as e:  # the author's code failed
            code = stage if stage != "PROTOCOL" else "PROCESS"
            if getattr(e, "_heddle_stage", None):
                code = e._heddle_stage  # type: ignore[attr-defined]
            detail = "".join(traceback.format_exception_only(type(e), e)).strip()
            traceback.print_exc(file=sys.stderr)
            return self._fail(code, detail, getattr(e, "_heddle_record", None))

    def _fail(self, code: str, message: str, record: int | None) -> int:
        try:
            self._send_control(
                {"type": "ERROR", "code": code, "message": message, "record": record}
            )
            self.ch.flush()
        except OSError:
            pass
        return EXIT_ERROR

    def _loop(self, flt: Filter) -> int:
        emit = self.emit
        while True:
            m: _Message | None
            if self.deferred and not self.paused:
                m = self.deferred.popleft()
            else:
                m = self._read()
            if m is None:
                raise wire.ProtocolError("PROTOCOL", "the host closed the channel before COMPLETE")
            if m.kind == wire.DATA:
                if self.paused:
                    self.deferred.append(m)
                    continue
                self.next_in += 1
                self.bytes_in += len(m.payload)
                try:
                    flt.process(Record(m.payload, m.codec, m.key), emit)
                except wire.ProtocolError:
                    raise
                except Exception as e:
                    e._heddle_stage = "PROCESS"  # type: ignore[attr-defined]
                    e._heddle_record = m.seq  # type: ignore[attr-defined]
                    raise
                if self.next_in % self.grant == 0:
                    self.ch.write(
                        [
                            wire.header(
                                wire.CREDIT, wire.WHOLE, wire.RAW, 0, self.edge, 0, 0, 4, 4
                            ),
                            self.grant.to_bytes(4, "little"),
                        ]
                    )
                continue
            if m.kind == wire.CREDIT:
                self._credit(m)
                continue
            msg = wire.decode_control(m.payload)
            kind = msg["type"]
            if kind == "PAUSE_RESUME":
                self.paused = bool(msg["paused"])
                self._send_control({"type": "PAUSE_RESUME", "paused": self.paused})
            elif kind == "STATUS":
                self._send_control(self._status())
            elif kind == "COMPLETE":
                if self.paused:
                    raise wire.ProtocolError("PROTOCOL", "COMPLETE while the filter is paused")
                self.credits = 1 << 62  # F3: finalize needs no credit
                try:
                    flt.finalize(emit)
                except Exception as e:
                    e._heddle_stage = "FINALIZE"  # type: ignore[attr-defined]
                    raise
                self._send_control(
                    {"type": "COMPLETE", "records_in": self.next_in, "records_out": self.next_out}
                )
                self.ch.flush()
                return EXIT_OK
            elif kind == "ABORT":
                print(
                    f"heddle bridge: aborted by the host: {msg.get('reason', '')}", file=sys.stderr
                )
                return EXIT_ABORT
            elif kind == "ERROR":
                print(f"heddle bridge: the host failed: {msg.get('message', '')}", file=sys.stderr)
                return EXIT_ERROR
            elif kind == "CHANGE_BRIDGE_TYPE":
                self._switch(msg)
            else:
                raise wire.ProtocolError("PROTOCOL", f"unknown control message {kind!r}")

    def _switch(self, msg: dict[str, Any]) -> None:
        """§6: last frame on the old channel, then the token as the first on the new one."""
        epoch = int(msg["epoch"])
        if self.pending:
            raise wire.ProtocolError("PROTOCOL", "the host sent frames after CHANGE_BRIDGE_TYPE")
        self._send_control({"type": "CHANGE_BRIDGE_TYPE", "epoch": epoch})
        self.ch.close()
        if self.pipes is None:
            raise wire.ProtocolError("PROTOCOL", "this session cannot switch transports")
        spec = (
            msg["transport"]
            if msg["transport"] == "pipe"
            else f"{msg['transport']}:{msg['address']}"
        )
        self.ch = open_channel(spec, self.pipes)
        self._send_control({"type": "CHANGE_BRIDGE_TYPE", "epoch": epoch, "token": self.token})

    def _status(self) -> dict[str, Any]:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        try:
            fds = len(os.listdir("/proc/self/fd"))
            with open("/proc/self/statm") as f:
                rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            fds, rss = 0, 0
        return {
            "type": "STATUS",
            "records_in": self.next_in,
            "records_out": self.next_out,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "open_fds": fds,
            "rss_bytes": rss,
            "cpu_us": int((ru.ru_utime + ru.ru_stime) * 1e6),
        }


def run(flt: Filter) -> None:
    """Runs `flt` as the bridged process Heddle started, then exits with the protocol's
    status (0 done, 2 error, 3 aborted)."""
    spec = os.environ.get("HEDDLE_BRIDGE")
    token = os.environ.get("HEDDLE_BRIDGE_TOKEN")
    if not spec or not token:
        print(
            "heddle bridge: HEDDLE_BRIDGE and HEDDLE_BRIDGE_TOKEN are not set; this program "
            "is a bridged filter and must be started by Heddle (a bridge task or ds.pipe)",
            file=sys.stderr,
        )
        sys.exit(EXIT_ERROR)
    pipes = Pipes()
    try:
        channel = open_channel(spec, pipes)
    except OSError as e:
        print(f"heddle bridge: cannot open the channel {spec}: {e}", file=sys.stderr)
        sys.exit(EXIT_ERROR)
    session = Session(channel, token, pipes)
    status = session.run(flt)
    session.ch.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
