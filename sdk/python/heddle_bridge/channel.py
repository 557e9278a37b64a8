"""The filter's side of a channel (spec/bridge.md §3): open the transport named by
`HEDDLE_BRIDGE`, read frames into whole messages, and write frames in batches."""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

from . import wire

_READ = 256 << 10


class Channel:
    """Frames over two file descriptors, buffered both ways. Writes are sent by `flush`,
    which happens whenever the filter is about to wait for input."""

    def __init__(self, rfd: int, wfd: int, keep: Any = None, owned: bool = True) -> None:
        self.rfd, self.wfd, self._keep, self.owned = rfd, wfd, keep, owned
        self._buf = bytearray()
        self._pos = 0
        self._out: list[wire.Bytes] = []
        self._out_len = 0

    # ---- writing ---------------------------------------------------------------------
    def write(self, chunks: list[wire.Bytes]) -> None:
        self._out += chunks
        self._out_len += sum(len(c) for c in chunks)
        if self._out_len >= _READ:
            self.flush()

    def flush(self) -> None:
        if not self._out:
            return
        data = memoryview(b"".join(self._out))
        self._out.clear()
        self._out_len = 0
        while data:
            n = os.write(self.wfd, data)
            data = data[n:]

    # ---- reading ---------------------------------------------------------------------
    def buffered(self) -> int:
        return len(self._buf) - self._pos

    def _fill(self, need: int) -> bool:
        """Buffers at least `need` bytes; False on end of stream before any."""
        while self.buffered() < need:
            if self._pos:
                del self._buf[: self._pos]
                self._pos = 0
            self.flush()
            chunk = os.read(self.rfd, max(_READ, need - len(self._buf)))
            if not chunk:
                if self._buf:
                    raise wire.ProtocolError(
                        "PROTOCOL", "the host closed the channel inside a frame"
                    )
                return False
            self._buf += chunk
        return True

    def _take(self, n: int) -> bytes:
        if not self._fill(n):
            raise wire.ProtocolError("PROTOCOL", "the host closed the channel inside a frame")
        b = bytes(self._buf[self._pos : self._pos + n])
        self._pos += n
        return b

    def read_header(self) -> wire.HeaderFields | None:
        if not self._fill(wire.HEADER_LEN):
            return None
        fields = wire.HEADER.unpack_from(self._buf, self._pos)
        wire.check_header(fields)
        self._pos += wire.HEADER_LEN
        return fields

    def read_body(self, key_len: int, frag_len: int) -> tuple[bytes, bytes]:
        return self._take(key_len), self._take(frag_len)

    def close(self) -> None:
        self.flush()
        if self.owned:
            for fd in {self.rfd, self.wfd}:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._keep = None


class Pipes:
    """The filter's own standard streams, taken over for the protocol (§3): fd 1 is pointed
    at standard error and fd 0 at /dev/null, so author code cannot disturb the channel."""

    def __init__(self) -> None:
        self.rfd = os.dup(0)
        self.wfd = os.dup(1)
        sys.stdout.flush()
        os.dup2(2, 1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)

    def channel(self) -> Channel:
        return Channel(self.rfd, self.wfd, owned=False)


def open_channel(spec: str, pipes: Pipes) -> Channel:
    """Opens the transport `spec` (`pipe`, `fifo:DIR`, `tcp:HOST:PORT`, `unix:PATH`)."""
    transport, _, address = spec.partition(":")
    if transport == "pipe":
        return pipes.channel()
    if transport == "fifo":
        rfd = os.open(os.path.join(address, "to-filter"), os.O_RDONLY | os.O_CLOEXEC)
        wfd = os.open(os.path.join(address, "from-filter"), os.O_WRONLY | os.O_CLOEXEC)
        return Channel(rfd, wfd)
    if transport == "tcp":
        host, _, port = address.rpartition(":")
        s = socket.create_connection((host, int(port)))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return Channel(s.fileno(), s.fileno(), keep=s, owned=False)
    if transport == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(address)
        return Channel(s.fileno(), s.fileno(), keep=s, owned=False)
    raise wire.ProtocolError("PROTOCOL", f"unknown bridge transport {spec!r}")
