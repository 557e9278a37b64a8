"""mpi4py's ``Status`` and ``Request`` for ``heddle.MPI``.

A request wraps Heddle's native one (``heddle._heddle.comm.Request``), which the engine
moves in any call of the worker. What finishing means depends on the call that made it:
a buffer receive may have a strided datatype to unpack, an object receive unpickles its
bytes (``wait`` returns the object), a request to or from ``PROC_NULL`` is finished at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable

from heddle._heddle import comm as _native
from heddle._mpi.errors import ERR_REQUEST, Exception, mpi_errors

ANY_SOURCE = -1
ANY_TAG = -1
PROC_NULL = -2
UNDEFINED = -32766


class Status:
    """Where a received message came from and how long it is (mpi4py's ``Status``)."""

    def __init__(self, status: Status | None = None) -> None:
        self.source = ANY_SOURCE
        self.tag = ANY_TAG
        self.error = 0
        self.count = 0
        self.cancelled = False
        if status is not None:
            self._copy(status)

    def _copy(self, other: Status) -> None:
        self.source, self.tag, self.error = other.source, other.tag, other.error
        self.count, self.cancelled = other.count, other.cancelled

    def _fill(self, native: tuple[int, int, int] | None, cancelled: bool = False) -> None:
        if native is None:
            self.source, self.tag, self.count = ANY_SOURCE, ANY_TAG, 0
        else:
            self.source, self.tag, self.count = native
        self.error, self.cancelled = 0, cancelled

    def Get_source(self) -> int:
        return self.source

    def Set_source(self, source: int) -> None:
        self.source = source

    def Get_tag(self) -> int:
        return self.tag

    def Set_tag(self, tag: int) -> None:
        self.tag = tag

    def Get_error(self) -> int:
        return self.error

    def Set_error(self, error: int) -> None:
        self.error = error

    def Get_count(self, datatype: Any = None) -> int:
        """Items of ``datatype`` (default ``BYTE``) the message held; ``UNDEFINED`` if
        it is not a whole number of them."""
        size = 1 if datatype is None else datatype.Get_size()
        if size == 0:
            return 0
        return self.count // size if self.count % size == 0 else UNDEFINED

    def Get_elements(self, datatype: Any) -> int:
        return self.Get_count(datatype)

    def Is_cancelled(self) -> bool:
        return self.cancelled

    def __repr__(self) -> str:
        return f"<heddle.MPI.Status source={self.source} tag={self.tag} count={self.count}>"


Finish = Callable[["Request"], Any]


class Request:
    """A non-blocking operation (mpi4py's ``Request``). ``REQUEST_NULL`` is an inactive
    one; a request becomes inactive once waited for, so waiting again returns at once."""

    def __init__(
        self,
        native: Any = None,
        finish: Finish | None = None,
        value: Any = None,
        status: tuple[int, int, int] | None = None,
    ) -> None:
        self._native = native
        self._finish = finish
        self._value = value
        self._status = status
        self._cancelled = False

    #: Whether this request is a schedule of several native ones (a non-blocking
    #: collective) that finishes through its own ``Wait``/``Test``.
    _composite = False

    def __bool__(self) -> bool:
        return self._native is not None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Request):
            return NotImplemented
        return self is other or (self._native is None and other._native is None)

    __hash__ = object.__hash__

    def _complete(self, status: Status | None) -> Any:
        """After the native request finished: run its finish step once, fill ``status``."""
        native = self._native
        if native is not None:
            self._status = native.status()
            self._cancelled = native.cancelled
            if self._finish is not None and not self._cancelled:
                self._value = self._finish(self)
            native.release()
            self._native = None
        if status is not None:
            status._fill(self._status, self._cancelled)
        value, self._value = self._value, None
        return value

    @mpi_errors
    def Wait(self, status: Status | None = None) -> bool:
        """Blocks until the operation has finished."""
        if self._native is not None:
            self._native.wait()
        self._complete(status)
        return True

    @mpi_errors
    def Test(self, status: Status | None = None) -> bool:
        """Whether it has finished (moving the links once)."""
        if self._native is not None and not self._native.test():
            return False
        self._complete(status)
        return True

    def Get_status(self, status: Status | None = None) -> bool:
        """Whether it has finished, without making it inactive."""
        done = self._native is None or self._native.done
        if done and status is not None:
            status._fill(self._native.status() if self._native else self._status)
        return done

    def Cancel(self) -> None:
        if self._native is not None:
            self._native.cancel()

    def Free(self) -> None:
        """Lets it go: a send goes on from a copy, a receive is dropped."""
        self._native = None

    @mpi_errors
    def wait(self, status: Status | None = None) -> Any:
        """Waits; returns the received object (``None`` for a send)."""
        if self._native is not None:
            self._native.wait()
        return self._complete(status)

    @mpi_errors
    def test(self, status: Status | None = None) -> tuple[bool, Any]:
        """``(finished, object)`` after moving the links once."""
        if self._native is not None and not self._native.test():
            return False, None
        return True, self._complete(status)

    # -- several at once ----------------------------------------------------------------

    @classmethod
    @mpi_errors
    def Waitall(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> bool:
        cls.waitall(requests, statuses)
        return True

    @classmethod
    @mpi_errors
    def waitall(
        cls, requests: Sequence[Request], statuses: list[Status] | None = None
    ) -> list[Any]:
        _check(requests)
        for r in requests:
            if r._composite:
                r.Wait()
        natives = [r._native for r in requests if r._native is not None]
        if natives:
            _native.waitall(natives)
        out = []
        for i, r in enumerate(requests):
            out.append(r._complete(_status_at(statuses, i)))
        return out

    @classmethod
    @mpi_errors
    def Waitany(cls, requests: Sequence[Request], status: Status | None = None) -> int:
        return cls.waitany(requests, status)[0]

    @classmethod
    @mpi_errors
    def waitany(cls, requests: Sequence[Request], status: Status | None = None) -> tuple[int, Any]:
        _check(requests)
        if any(r._composite and r for r in requests):
            while True:  # a collective among them: poll them all, each Test a pass
                i, flag, value = cls.testany(requests, status)
                if flag:
                    return i, value
        active = [(i, r) for i, r in enumerate(requests) if r._native is not None]
        if not active:
            if status is not None:
                status._fill(None)
            return UNDEFINED, None
        j = _native.waitany([r._native for _, r in active])
        i, r = active[0 if j is None else j]
        return i, r._complete(status)

    @classmethod
    @mpi_errors
    def Waitsome(
        cls, requests: Sequence[Request], statuses: list[Status] | None = None
    ) -> list[int] | None:
        i, _ = cls.waitany(requests)
        if i == UNDEFINED:
            return None
        done = [i] + [j for j, r in enumerate(requests) if j != i and r and r.Test()]
        for k, j in enumerate(done):
            if statuses is not None and k < len(statuses):
                statuses[k]._fill(requests[j]._status)
        return done

    @classmethod
    @mpi_errors
    def Testall(cls, requests: Sequence[Request], statuses: list[Status] | None = None) -> bool:
        return cls.testall(requests, statuses)[0]

    @classmethod
    @mpi_errors
    def testall(
        cls, requests: Sequence[Request], statuses: list[Status] | None = None
    ) -> tuple[bool, list[Any] | None]:
        _check(requests)
        if not all(_test_one(r) for r in requests):
            return False, None
        return True, [r._complete(_status_at(statuses, i)) for i, r in enumerate(requests)]

    @classmethod
    @mpi_errors
    def Testany(cls, requests: Sequence[Request], status: Status | None = None) -> tuple[int, bool]:
        i, flag, _ = cls.testany(requests, status)
        return i, flag

    @classmethod
    @mpi_errors
    def testany(
        cls, requests: Sequence[Request], status: Status | None = None
    ) -> tuple[int, bool, Any]:
        _check(requests)
        active = [(i, r) for i, r in enumerate(requests) if r]
        if not active:
            return UNDEFINED, True, None
        for i, r in active:
            if r._composite:
                if r.Test(status):
                    return i, True, None
            elif r._native.test():
                return i, True, r._complete(status)
        return UNDEFINED, False, None

    @classmethod
    @mpi_errors
    def Testsome(
        cls, requests: Sequence[Request], statuses: list[Status] | None = None
    ) -> list[int] | None:
        _check(requests)
        if not any(requests):
            return None
        done = [i for i, r in enumerate(requests) if r and r.Test()]
        for k, j in enumerate(done):
            if statuses is not None and k < len(statuses):
                statuses[k]._fill(requests[j]._status)
        return done

    def __repr__(self) -> str:
        state = "active" if self._native is not None else "inactive"
        return f"<heddle.MPI.Request {state}>"


def _test_one(r: Request) -> bool:
    """One request tested (a pass over the links); an inactive one counts as done."""
    if r._composite:
        return bool(r.Test())
    return r._native is None or bool(r._native.test())


def _check(requests: Sequence[Request]) -> None:
    for r in requests:
        if not isinstance(r, Request):
            raise Exception(ERR_REQUEST, f"expected MPI.Request objects, got {type(r).__name__}")


def _status_at(statuses: list[Status] | None, i: int) -> Status | None:
    if statuses is None:
        return None
    while len(statuses) <= i:
        statuses.append(Status())
    return statuses[i]


REQUEST_NULL = Request()


class CompositeRequest(Request):
    """A request made of others (a persistent request's runs, a non-blocking collective's
    rounds), finished through its own ``Wait``/``Test``; its lowercase forms give no
    object."""

    _composite = True

    def wait(self, status: Status | None = None) -> Any:
        self.Wait(status)
        return None

    def test(self, status: Status | None = None) -> tuple[bool, Any]:
        return self.Test(status), None


class Prequest(CompositeRequest):
    """A persistent request (mpi4py's ``Prequest``, from ``Send_init``/``Recv_init``):
    ``Start`` begins the operation again each time; between runs it is inactive."""

    def __init__(self, start: Callable[[], Request]) -> None:
        super().__init__()
        self._start = start
        self._run: Request | None = None
        self._freed = False

    def __bool__(self) -> bool:
        return self._run is not None

    def Start(self) -> None:
        if self._freed:
            raise Exception(ERR_REQUEST, "Start: the persistent request was freed")
        if self._run is not None:
            raise Exception(ERR_REQUEST, "Start: the request is still active; Wait first")
        self._run = self._start()

    @classmethod
    def Startall(cls, requests: Sequence[Prequest]) -> None:
        for r in requests:
            r.Start()

    def Wait(self, status: Status | None = None) -> bool:
        run, self._run = self._run, None
        if run is None:
            if status is not None:
                status._fill(None)
            return True
        return run.Wait(status)

    def Test(self, status: Status | None = None) -> bool:
        if self._run is None:
            if status is not None:
                status._fill(None)
            return True
        if not self._run.Test(status):
            return False
        self._run = None
        return True

    def Get_status(self, status: Status | None = None) -> bool:
        return self._run is None or self._run.Get_status(status)

    def Cancel(self) -> None:
        if self._run is not None:
            self._run.Cancel()

    def Free(self) -> None:
        self._freed = True
        self._run = None
