"""The filter's side of a channel (spec/bridge.md §3): open the transport named by
`HEDDLE_BRIDGE`, read frames into whole messages, and write frames in batches."""

from __future__ import annotations

import ctypes
import mmap
import os
import select
import socket
import struct
import sys
import time
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


_U64 = struct.Struct("<Q")
SHM_MAGIC = b"HDBRSHM1"
SHM_BLOCK = 4096
_WRITE, _READ, _CLOSED = 0, 64, 128


class ShmChannel(Channel):
    """The shared-memory rings of spec/bridge.md §3.1: ring 0 carries the host's bytes to
    this filter, ring 1 this filter's to the host. Idle waits spin briefly, then sleep in
    growing steps (up to 1 ms) on a pidfd of the host, so its exit ends them."""

    def __init__(self, path: str) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            self.map = mmap.mmap(fd, 0)
        finally:
            os.close(fd)
        if self.map[:8] != SHM_MAGIC:
            raise wire.ProtocolError("PROTOCOL", f"{path} is not a Heddle shared-memory channel")
        self.cap = _U64.unpack_from(self.map, 8)[0]
        self.rx = SHM_BLOCK  # ring 0
        self.tx = SHM_BLOCK + SHM_BLOCK + self.cap  # ring 1
        # The positions are read and written as whole 64-bit words (ctypes, one load or
        # store each): struct.pack_into writes byte by byte, which a peer could see torn.
        self.rx_write = ctypes.c_uint64.from_buffer(self.map, self.rx + _WRITE)
        self.rx_read = ctypes.c_uint64.from_buffer(self.map, self.rx + _READ)
        self.rx_closed = ctypes.c_uint32.from_buffer(self.map, self.rx + _CLOSED)
        self.tx_write = ctypes.c_uint64.from_buffer(self.map, self.tx + _WRITE)
        self.tx_read = ctypes.c_uint64.from_buffer(self.map, self.tx + _READ)
        self.tx_closed = ctypes.c_uint32.from_buffer(self.map, self.tx + _CLOSED)
        try:
            self.peer = os.pidfd_open(os.getppid())
        except (AttributeError, OSError):
            self.peer = -1
        super().__init__(-1, -1, owned=False)

    def _wait(self, started: float, naps: list[float]) -> bool:
        """Waits a little; True once the host has exited."""
        if time.perf_counter() - started < 50e-6:
            return False
        nap = naps[0]
        naps[0] = min(nap * 2, 1e-3)
        if self.peer >= 0:
            return bool(select.select([self.peer], [], [], nap)[0])
        time.sleep(nap)
        return False

    def flush(self) -> None:
        if not self._out:
            return
        data = memoryview(b"".join(self._out))
        self._out.clear()
        self._out_len = 0
        m, base, cap = self.map, self.tx, self.cap
        started, naps = time.perf_counter(), [20e-6]
        while data:
            head = self.tx_write.value
            tail = self.tx_read.value
            free = cap - (head - tail)
            if free == 0:
                if self._wait(started, naps):
                    raise BrokenPipeError("the host exited")
                continue
            at = head % cap
            n = min(free, len(data), cap - at)
            start = base + SHM_BLOCK + at
            m[start : start + n] = data[:n]
            self.tx_write.value = head + n  # publishes the bytes (stores stay in order on x86)
            data = data[n:]
            started, naps = time.perf_counter(), [20e-6]

    def _fill(self, need: int) -> bool:
        m, base, cap = self.map, self.rx, self.cap
        started, naps = time.perf_counter(), [20e-6]
        while self.buffered() < need:
            if self._pos:
                del self._buf[: self._pos]
                self._pos = 0
            self.flush()
            head = self.rx_write.value
            tail = self.rx_read.value
            if head == tail:
                if self.rx_closed.value or self._wait(started, naps):
                    if head == self.rx_write.value:
                        if self._buf:
                            raise wire.ProtocolError(
                                "PROTOCOL", "the host closed the channel inside a frame"
                            )
                        return False
                continue
            at = tail % cap
            n = min(head - tail, cap - at)
            start = base + SHM_BLOCK + at
            self._buf += m[start : start + n]
            self.rx_read.value = tail + n
            started, naps = time.perf_counter(), [20e-6]
        return True

    def close(self) -> None:
        self.flush()
        self.tx_closed.value = 1
        if self.peer >= 0:
            os.close(self.peer)
            self.peer = -1
        # The ctypes views pin the mapping; it goes when they and the map are collected.
        del self.rx_write, self.rx_read, self.rx_closed, self.tx_write, self.tx_read, self.tx_closed


def open_channel(spec: str, pipes: Pipes) -> Channel:
    """Opens the transport `spec` (`pipe`, `fifo:DIR`, `tcp:HOST:PORT`, `unix:PATH`,
    `shm:PATH`)."""
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
    if transport == "shm":
        return ShmChannel(address)
    if transport == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(address)
        return Channel(s.fileno(), s.fileno(), keep=s, owned=False)
    raise wire.ProtocolError("PROTOCOL", f"unknown bridge transport {spec!r}")
