"""Point-to-point calls of ``heddle.MPI``'s communicators: blocking and non-blocking, on
buffers (uppercase) and on pickled objects (lowercase), receives from ``ANY_SOURCE`` with
``ANY_TAG``, probes, and ``PROC_NULL`` (a send to it or a receive from it does nothing).

An object travels as one message: its pickle (protocol 5) with large buffers appended
in the same block, which a receive of any length takes whole and unpickles (arrays as
views of the received bytes).
"""

from __future__ import annotations

from typing import Any

from heddle._heddle import comm as _native
from heddle._mpi import datatypes as dt
from heddle._mpi.errors import mpi_errors
from heddle._mpi.request import ANY_SOURCE, ANY_TAG, PROC_NULL, Prequest, Request, Status
from heddle.comm import _pack_all, _unpack_all

_NULL_STATUS = (PROC_NULL, ANY_TAG, 0)


def _src(source: int) -> int | None:
    return None if source == ANY_SOURCE else source


def _tag(tag: int) -> int | None:
    return None if tag == ANY_TAG else tag


def _pickled(obj: Any) -> bytearray:
    blob, _ = _pack_all([obj])
    return blob


def _unpickled(req: Request) -> Any:
    data = req._native.take_bytes()
    return _unpack_all(data, [len(data)])[0]


def _buffer(spec: Any, writable: bool, what: str) -> tuple[Any, dt.Message | None]:
    """The native buffer of a specification; the message when it needed resolving."""
    if isinstance(spec, (list, tuple)):
        m = dt.resolve(spec, writable, what)
        return m.data, m
    return spec, None


def _unpack_into(m: dt.Message | None) -> Any:
    return (lambda req: m.unpack()) if m is not None and m.index is not None else None


class PointToPoint:
    """Point-to-point calls; mixed into ``heddle.MPI.Intracomm`` (``self._c`` is the
    native ``heddle.comm.Comm``)."""

    _c: Any

    # -- buffers --------------------------------------------------------------------------

    @mpi_errors
    def Send(self, buf: Any, dest: int, tag: int = 0) -> None:
        """Sends a buffer to ``dest``; returns once the data has left it."""
        if dest == PROC_NULL:
            return
        data, _ = _buffer(buf, False, "buf")
        self._c.Send(data, dest, tag)

    @mpi_errors
    def Ssend(self, buf: Any, dest: int, tag: int = 0) -> None:
        """Sends a buffer and returns once a receive on ``dest`` has matched it."""
        self.Issend(buf, dest, tag).Wait()

    Bsend = Send
    Rsend = Send

    @mpi_errors
    def Recv(
        self,
        buf: Any,
        source: int = ANY_SOURCE,
        tag: int = ANY_TAG,
        status: Status | None = None,
    ) -> None:
        """Receives a message from ``source`` with ``tag`` (either may be ``ANY_*``)."""
        if source == PROC_NULL:
            if status is not None:
                status._fill(_NULL_STATUS)
            return
        data, m = _buffer(buf, True, "buf")
        if source != ANY_SOURCE and tag != ANY_TAG and status is None:
            self._c.Recv(data, source, tag)
        else:
            got = _native.irecv(self._c, data, _src(source), _tag(tag)).wait()
            if status is not None:
                status._fill(got)
        if m is not None:
            m.unpack()

    @mpi_errors
    def Isend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """Starts sending a buffer; do not change it until the request has finished."""
        if dest == PROC_NULL:
            return Request(status=_NULL_STATUS)
        data, _ = _buffer(buf, False, "buf")
        return Request(_native.isend(self._c, data, dest, tag))

    @mpi_errors
    def Issend(self, buf: Any, dest: int, tag: int = 0) -> Request:
        """Starts a synchronous send: the request finishes once a receive on ``dest`` has
        matched the message (so termination detection such as NBX can rely on it)."""
        if dest == PROC_NULL:
            return Request(status=_NULL_STATUS)
        data, _ = _buffer(buf, False, "buf")
        return Request(_native.isend(self._c, data, dest, tag, True))

    Ibsend = Isend
    Irsend = Isend

    @mpi_errors
    def Irecv(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Starts receiving into a buffer; do not touch it until the request has finished."""
        if source == PROC_NULL:
            return Request(status=_NULL_STATUS)
        data, m = _buffer(buf, True, "buf")
        native = _native.irecv(self._c, data, _src(source), _tag(tag))
        return Request(native, _unpack_into(m))

    def Send_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """A persistent send: each ``Start`` sends ``buf`` (as it is then) to ``dest``."""
        return Prequest(lambda: self.Isend(buf, dest, tag))

    def Ssend_init(self, buf: Any, dest: int, tag: int = 0) -> Prequest:
        """A persistent synchronous send: each ``Start`` is an ``Issend`` of ``buf``."""
        return Prequest(lambda: self.Issend(buf, dest, tag))

    Bsend_init = Send_init
    Rsend_init = Send_init

    def Recv_init(self, buf: Any, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Prequest:
        """A persistent receive: each ``Start`` receives into ``buf``."""
        return Prequest(lambda: self.Irecv(buf, source, tag))

    @mpi_errors
    def Sendrecv(
        self,
        sendbuf: Any,
        dest: int,
        sendtag: int = 0,
        recvbuf: Any = None,
        source: int = ANY_SOURCE,
        recvtag: int = ANY_TAG,
        status: Status | None = None,
    ) -> None:
        """Sends and receives at once (no deadlock when ranks exchange pairwise)."""
        r = self.Irecv(recvbuf, source, recvtag)
        s = self.Isend(sendbuf, dest, sendtag)
        Request.Waitall([r, s])
        if status is not None:
            status._fill(r._status)

    @mpi_errors
    def Sendrecv_replace(
        self,
        buf: Any,
        dest: int,
        sendtag: int = 0,
        source: int = ANY_SOURCE,
        recvtag: int = ANY_TAG,
        status: Status | None = None,
    ) -> None:
        """As ``Sendrecv`` with one buffer: the received message replaces the sent one."""
        data, _ = _buffer(buf, True, "buf")
        sent = bytearray(memoryview(data).cast("B"))
        s = _native.isend(self._c, sent, dest, sendtag) if dest != PROC_NULL else None
        self.Recv(buf, source, recvtag, status)
        if s is not None:
            s.wait()

    @mpi_errors
    def Probe(
        self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None
    ) -> bool:
        """Waits until a matching message can be received; fills ``status`` from it."""
        if source == PROC_NULL:
            found: Any = _NULL_STATUS
        else:
            found = _native.probe(self._c, _src(source), _tag(tag), True)
        if status is not None:
            status._fill(found)
        return True

    @mpi_errors
    def Iprobe(
        self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None
    ) -> bool:
        """Whether a matching message can be received now."""
        if source == PROC_NULL:
            found: Any = _NULL_STATUS
        else:
            found = _native.probe(self._c, _src(source), _tag(tag), False)
        if found is not None and status is not None:
            status._fill(found)
        return found is not None

    probe = Probe
    iprobe = Iprobe

    # -- objects --------------------------------------------------------------------------

    @mpi_errors
    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Sends a picklable object to ``dest``."""
        if dest != PROC_NULL:
            self._c.Send(_pickled(obj), dest, tag)

    @mpi_errors
    def ssend(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Sends a picklable object and returns once a receive on ``dest`` has matched it."""
        self.issend(obj, dest, tag).wait()

    bsend = send

    @mpi_errors
    def recv(
        self,
        buf: Any = None,
        source: int = ANY_SOURCE,
        tag: int = ANY_TAG,
        status: Status | None = None,
    ) -> Any:
        """Receives an object from ``source`` with ``tag`` (either may be ``ANY_*``)."""
        return self.irecv(buf, source, tag).wait(status)

    @mpi_errors
    def isend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        """Starts sending an object; ``wait()`` on the request returns ``None``."""
        if dest == PROC_NULL:
            return Request(status=_NULL_STATUS)
        return Request(_native.isend(self._c, _pickled(obj), dest, tag))

    @mpi_errors
    def issend(self, obj: Any, dest: int, tag: int = 0) -> Request:
        """Starts a synchronous send of an object (finished once a receive matched it)."""
        if dest == PROC_NULL:
            return Request(status=_NULL_STATUS)
        return Request(_native.isend(self._c, _pickled(obj), dest, tag, True))

    ibsend = isend

    @mpi_errors
    def irecv(self, buf: Any = None, source: int = ANY_SOURCE, tag: int = ANY_TAG) -> Request:
        """Starts receiving an object; ``wait()`` on the request returns it. ``buf`` is
        accepted for compatibility and not needed: objects arrive in memory of their own."""
        if source == PROC_NULL:
            return Request(status=_NULL_STATUS)
        return Request(_native.irecv_bytes(self._c, _src(source), _tag(tag)), _unpickled)

    @mpi_errors
    def sendrecv(
        self,
        sendobj: Any,
        dest: int,
        sendtag: int = 0,
        recvbuf: Any = None,
        source: int = ANY_SOURCE,
        recvtag: int = ANY_TAG,
        status: Status | None = None,
    ) -> Any:
        """Sends an object and receives one at once."""
        r = self.irecv(recvbuf, source, recvtag)
        s = self.isend(sendobj, dest, sendtag)
        s.wait()
        return r.wait(status)
