"""heddle.bridge: programs in other languages as parts of a Heddle job (spec/bridge.md).

A *filter* is a program written with one of the bridge SDKs (C, C++, Java, Go, or the
pure-Python ``heddle_bridge`` in sdk/python) with DataCutter's ``init`` / ``process`` /
``finalize``. Heddle starts it as a child process and talks to it over anonymous pipes,
named pipes, TCP or a Unix socket, with credit flow control; the transport can be switched
while it runs. Three ways to use one:

* :meth:`heddle.data.DataSet.pipe` — every partition through the filter (Spark's
  ``rdd.pipe``, framed and typed);
* :meth:`heddle.task.TaskGraph.bridge` — a vertex of a task graph;
* :class:`Bridge` — drive one filter by hand.

Records cross as their type says (see :mod:`heddle._bridge`): ``str`` as UTF-8, ``bytes``
as bytes, numbers and numpy arrays as typed arrays, ``(key, value)`` pairs keyed.

    b = Bridge(["python3", "upper.py"], transport="unix")
    out = b.send("hello")    # results that arrived meanwhile
    out += b.finish()        # the rest, finalize's included: ["HELLO", ...]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from heddle._bridge import command_line, from_wire, to_wire
from heddle._heddle import bridge as _bridge

__all__ = ["TRANSPORTS", "Bridge", "task_factory"]

#: The transports a bridge can use.
TRANSPORTS = ("pipe", "fifo", "tcp", "unix", "shm")


class Bridge:
    """One running filter process. ``command`` is the program and its arguments; ``args``
    go to its ``init``. Results come back from :meth:`send` (those that arrived meanwhile),
    :meth:`recv`, :meth:`drain` and :meth:`finish` (the rest, after ``finalize``). A filter
    that fails, exits early or stays silent past ``timeout`` seconds raises
    ``heddle.TaskError`` with its exit status and the end of its stderr. ``policy`` holds
    rules that switch the transport by the bridge's diagnostics, such as
    ``"record_bytes > 64KiB -> shm; open_sockets > 900 -> pipe"`` (see docs/bridges.md)."""

    def __init__(
        self,
        command: str | Sequence[str],
        *,
        transport: str = "pipe",
        args: Sequence[str] = (),
        task: str = "bridge",
        credits: int = 64,
        max_record: int = 64 << 20,
        timeout: float = 60.0,
        policy: str | None = None,
    ) -> None:
        cmd = command_line(command)
        self._native = _bridge.Bridge(
            cmd,
            task,
            transport=transport,
            args=[str(a) for a in args],
            credits=credits,
            max_record=max_record,
            timeout_s=timeout,
            policy=policy,
        )

    def send(self, record: Any) -> list[Any]:
        """Sends one record; returns the results received meanwhile."""
        return [from_wire(t) for t in self._native.send(to_wire(record))]

    def recv(self, timeout: float = 60.0) -> Any:
        """One result, waiting up to ``timeout`` seconds (``None`` if none came)."""
        t = self._native.recv(timeout)
        return None if t is None else from_wire(t)

    def drain(self) -> list[Any]:
        """The results received so far."""
        return [from_wire(t) for t in self._native.drain()]

    def finish(self) -> list[Any]:
        """Ends the input; returns the remaining results, ``finalize``'s included."""
        return [from_wire(t) for t in self._native.finish()]

    def abort(self, reason: str = "aborted by the host") -> str:
        """Stops the filter without ``finalize``; returns how it ended."""
        return self._native.abort(reason)

    def switch(self, transport: str) -> float:
        """Moves the bridge to ``transport`` while it runs (nothing is lost, repeated or
        reordered); returns the seconds the switch took."""
        return self._native.switch(transport)

    def pause(self) -> None:
        """Stops the filter taking records until :meth:`resume`."""
        self._native.set_paused(True)

    def resume(self) -> None:
        """Lets a paused filter take records again."""
        self._native.set_paused(False)

    def status(self) -> dict[str, int]:
        """The filter's own counters and resources (records, bytes, fds, RSS, CPU)."""
        return self._native.status()

    def diagnostics(self) -> dict[str, Any]:
        """The host's measurements: transport, records and bytes, in flight, latency."""
        return self._native.diagnostics()

    @property
    def pid(self) -> int:
        """The filter's process id."""
        return self._native.pid

    @property
    def transport(self) -> str:
        """The transport in use."""
        return self._native.transport


class _BridgeTask:
    """A task-graph vertex instance that is a filter process (``TaskGraph.bridge``): started
    before the first record, fed each record, finished at the end of the input."""

    def __init__(self, command: list[str], options: dict[str, Any]) -> None:
        self._command = command
        self._options = options
        self._bridge: _bridge.Bridge | None = None

    def _started(self, ctx: Any) -> _bridge.Bridge:
        if self._bridge is None:
            self._bridge = _bridge.Bridge(
                self._command, ctx.name, ctx.index, ctx.parallelism, ctx.task, **self._options
            )
        return self._bridge

    def prepare(self, ctx: Any) -> None:
        self._started(ctx)

    def execute(self, ctx: Any, record: Any) -> None:
        for t in self._started(ctx).send(to_wire(record)):
            ctx.emit(from_wire(t))

    def end_of_input(self, ctx: Any) -> None:
        bridge, self._bridge = self._started(ctx), None
        for t in bridge.finish():
            ctx.emit(from_wire(t))

    def close(self, ctx: Any) -> None:
        if self._bridge is not None:
            self._bridge.abort("the task closed")
            self._bridge = None


def task_factory(
    command: str | Sequence[str],
    transport: str = "pipe",
    args: Sequence[str] = (),
    credits: int = 64,
    max_record: int = 64 << 20,
    timeout: float = 60.0,
    policy: str | None = None,
) -> Callable[[int], Any]:
    """The factory of a task-graph vertex whose instances are the filter ``command``."""
    cmd = command_line(command)
    options: dict[str, Any] = {
        "transport": transport,
        "args": [str(a) for a in args],
        "credits": credits,
        "max_record": max_record,
        "timeout_s": timeout,
        "policy": policy,
    }
    return lambda _i: _BridgeTask(cmd, options)
