"""Streams of heddle.data: unbounded data sets of Python objects, with keyed windows.

Use them through :mod:`heddle.data` (``Session.stream_generate``, ``stream_text``,
``socket_text``, ``follow_file``, ``redis_stream``, ``stream_from_list``); this module holds
:class:`Stream`, :class:`Window`, :class:`Windowed` and :class:`StopHandle`::

    import operator, time
    from heddle.data import Session, Window

    s = Session()
    events = s.stream_generate(lambda i: (f"user{i % 10}", int(time.time() * 1000)),
                               rate=1000, limit=10_000)
    counts = (events.map(lambda e: (e[0], (e[1], 1)))
                    .window(Window.tumbling(100).event_time(out_of_orderness=20),
                            lambda a, b: (max(a[0], b[0]), a[1] + b[1]),
                            event_time=lambda v: v[0]))
    counts.run(print)
    # prints Windowed(key='user3', start=..., end=..., value=(..., 98), records=98, update=False)

Times are milliseconds: window sizes (``int``/``float`` ms or ``datetime.timedelta``),
event timestamps (``event_time`` returns an ``int`` of ms, e.g. ``int(time.time() * 1000)``)
and the ``start``/``end`` of results; ``timeout`` of a run is in seconds.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterable
from typing import Any, Callable, NamedTuple, Union

from heddle._batches import from_batch, to_batch
from heddle._heddle import data as _data, task as _task
from heddle._placement import Resources

__all__ = ["Stream", "Window", "Windowed", "StopHandle"]

#: Ends a stream run (or a streaming task job) from a callback or another thread:
#: ``stop = StopHandle(); stream.run(f, stop=stop)``, then ``stop.stop()``. A handle
#: stays stopped: give each run a fresh one.
StopHandle = _task.StopHandle

Millis = Union[int, float, datetime.timedelta]
Address = Union[str, tuple[str, int]]


def _ms(value: Millis, name: str, minimum: int) -> int:
    """Whole milliseconds of ``value`` (ms as a number, or a timedelta), at least ``minimum``."""
    ms = (
        value / datetime.timedelta(milliseconds=1)
        if isinstance(value, datetime.timedelta)
        else value
    )
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or ms != ms:
        raise TypeError(
            f"{name} must be milliseconds (an int or float) or a datetime.timedelta, got {value!r}"
        )
    if round(ms) < minimum:
        raise ValueError(f"{name} must be at least {minimum} ms, got {value!r}")
    return int(round(ms))  # noqa: RUF046 (round() of a numpy < 2 float is a float)


def _count(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number of records, at least 1, got {value!r}")
    return value


def _address(addr: Address) -> str:
    """``"host:port"`` from itself or a ``(host, port)`` tuple."""
    if isinstance(addr, tuple):
        host, port = addr
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return str(addr)


class Window:
    """What a keyed window collects: made by :meth:`tumbling`, :meth:`sliding`,
    :meth:`session` (time windows, processing time unless :meth:`event_time`),
    :meth:`tumbling_count` or :meth:`sliding_count` (per key, by number of records)."""

    __slots__ = ("kind", "size", "slide", "out_of_orderness", "allowed_lateness")

    def __init__(
        self, kind: str, size: int, slide: int, event: tuple[int, int] | None = None
    ) -> None:
        self.kind, self.size, self.slide = kind, size, slide
        #: ``None`` for processing time; else the event-time bounds in ms.
        self.out_of_orderness: int | None
        self.allowed_lateness: int | None
        self.out_of_orderness, self.allowed_lateness = event if event is not None else (None, None)

    @staticmethod
    def tumbling(size: Millis) -> Window:
        """Consecutive spans of ``size`` ms: ``[0, size)``, ``[size, 2 size)``, ..."""
        size = _ms(size, "Window.tumbling size", 1)
        return Window("tumbling", size, size)

    @staticmethod
    def sliding(size: Millis, slide: Millis) -> Window:
        """Spans of ``size`` ms starting every ``slide`` ms (a record is in each span that
        contains it)."""
        return Window(
            "sliding", _ms(size, "Window.sliding size", 1), _ms(slide, "Window.sliding slide", 1)
        )

    @staticmethod
    def session(gap: Millis) -> Window:
        """Sessions of a key: its records closer than ``gap`` ms to the next; a session ends
        ``gap`` ms after its last record."""
        gap = _ms(gap, "Window.session gap", 1)
        return Window("session", gap, gap)

    @staticmethod
    def tumbling_count(n: int) -> Window:
        """Every ``n`` records of a key (a key's last, incomplete window never fires)."""
        n = _count(n, "Window.tumbling_count n")
        return Window("tumbling_count", n, n)

    @staticmethod
    def sliding_count(size: int, slide: int) -> Window:
        """The last ``size`` records of a key (fewer at its start), every ``slide`` records."""
        return Window(
            "sliding_count",
            _count(size, "Window.sliding_count size"),
            _count(slide, "Window.sliding_count slide"),
        )

    def event_time(self, out_of_orderness: Millis = 0, allowed_lateness: Millis = 0) -> Window:
        """This window on event time: each value's own timestamp (``event_time=`` of
        :meth:`Stream.window`) rather than the clock. Watermarks trail the largest
        timestamp seen by ``out_of_orderness`` ms; a window fires when the watermark passes
        its end; records up to ``allowed_lateness`` ms later update it (``update=True``);
        later ones are dropped and counted (:meth:`Stream.late_records`)."""
        if self.kind.endswith("_count"):
            raise ValueError(
                f"{self.kind} windows count records and have no clock; event_time applies to "
                "tumbling, sliding and session windows"
            )
        event = (
            _ms(out_of_orderness, "out_of_orderness", 0),
            _ms(allowed_lateness, "allowed_lateness", 0),
        )
        return Window(self.kind, self.size, self.slide, event)

    @property
    def is_event_time(self) -> bool:
        """Whether the window follows event time."""
        return self.out_of_orderness is not None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Window) and all(
            getattr(self, a) == getattr(other, a) for a in Window.__slots__
        )

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, a) for a in Window.__slots__))

    def __repr__(self) -> str:
        args = {
            "tumbling_count": f"{self.size}",
            "sliding_count": f"{self.size}, {self.slide}",
            "sliding": f"{self.size}, {self.slide}",
        }.get(self.kind, f"{self.size}")
        time = (
            f".event_time({self.out_of_orderness}, {self.allowed_lateness})"
            if self.is_event_time
            else ""
        )
        return f"Window.{self.kind}({args}){time}"


class Windowed(NamedTuple):
    """One result of a keyed window."""

    #: The key.
    key: Any
    #: Window start in ms (count windows: the index of the key's first record in it).
    start: int
    #: Window end in ms, exclusive (count windows: one past its last record).
    end: int
    #: The key's values in the window, reduced.
    value: Any
    #: Records in the window.
    records: int
    #: A late record changed a window that had fired already (event time).
    update: bool


class Stream:
    """An unbounded, lazily described stream of Python objects, in
    :attr:`Session.partitions` partitions. Transformations return new streams; sinks
    (:meth:`run`, :meth:`collect`, :meth:`write_lines`, :meth:`write_socket`) run it on
    every worker (collectively) until its sources end or the run is stopped.

    Every sink takes ``stop`` (a :class:`StopHandle`), ``timeout`` (seconds) and
    ``max_records`` (records reaching this worker's sink), each of which stops this
    worker's sources; records already on their way still arrive, and the run returns once
    every worker's sources have ended. These are per worker: give every worker a way to
    stop (a ``timeout`` does). A source that ends by itself (a list, a ``limit``, a
    closed socket, an end marker) needs none.

    An exception raised by a function of the stream stops the sources on its worker,
    ends the run there (at the next record its sink gets) and is raised as itself; the
    other workers then see the worker go, as with a failing task. A checkpointed run
    that fails ends at once, without a last checkpoint: a restarted job resumes from the
    last complete one.
    """

    def __init__(self, native: _data.Stream, session: Any) -> None:
        self._native = native
        self.session = session

    def _wrap(self, native: _data.Stream) -> Stream:
        return Stream(native, self.session)

    # --- record-wise ---------------------------------------------------------------

    def resources(
        self,
        resources: Resources | None = None,
        *,
        cpus: float = 1.0,
        memory: int | str = 0,
        net_bytes_per_s: int | str = 0,
        io_bytes_per_s: int | str = 0,
        isolation: str = "auto",
    ) -> Stream:
        """The same records, the stage that makes them declaring what each of its partitions
        asks for, as :meth:`heddle.dataset.DataSet.resources` (its fields, checks and
        placement in a process alike)."""
        r = resources or Resources(
            cpus=cpus,
            memory=memory,
            net_bytes_per_s=net_bytes_per_s,
            io_bytes_per_s=io_bytes_per_s,
            isolation=isolation,
        )
        return self._wrap(self._native.resources(r.amounts()))

    def map(self, f: Callable[[Any], Any]) -> Stream:
        """Each record through ``f``."""
        return self._wrap(self._native.map(f))

    def flat_map(self, f: Callable[[Any], Iterable[Any]]) -> Stream:
        """Each record to the records of the iterable ``f`` returns (``None``: none)."""
        return self._wrap(self._native.flat_map(f))

    def filter(self, f: Callable[[Any], Any]) -> Stream:
        """The records for which ``f`` is true."""
        return self._wrap(self._native.filter(f))

    def map_batches(
        self,
        f: Callable[[Any], Any],
        batch_size: int = 4096,
        batch_format: str = "numpy",
        max_delay: Millis = 10,
    ) -> Stream:
        """Vectorized map on a stream: ``f`` gets micro-batches of up to ``batch_size``
        consecutive records of a partition, in ``batch_format`` (``"numpy"``,
        ``"pyarrow"`` or ``"list"``, as :meth:`heddle.data.DataSet.map_batches`), and
        returns a batch (or any iterable of records). A batch is handed over early once
        ``max_delay`` (ms, or a ``timedelta``) has passed since its first record arrived,
        so slow input still flows, and when the input ends."""
        convert = to_batch(batch_format)
        size = _count(batch_size, "batch_size")
        delay = _ms(max_delay, "max_delay", 0)
        return self._wrap(
            self._native.map_chunks(size, delay, lambda records: from_batch(f(convert(records))))
        )

    def key_by(self, f: Callable[[Any], Any]) -> Stream:
        """``(f(record), record)`` for each record (the pairs :meth:`window` takes)."""
        return self._wrap(self._native.key_by(f))

    def union(self, other: Stream) -> Stream:
        """The records of both streams, as they come."""
        return self._wrap(self._native.union(other._native))

    # --- keyed state -------------------------------------------------------------------

    def map_with_state(self, f: Callable[[Any, Any, Any], tuple[Any, Any]]) -> Stream:
        """Keyed state over ``(key, value)`` records (Flink's keyed ``ValueState``,
        Spark's ``mapGroupsWithState``): ``f(key, value, state)`` runs for each record,
        on the partition that owns the key, with the key's state — ``None`` before its
        first record — and returns ``(output, new_state)``; ``output`` is the record
        emitted, ``new_state`` is kept for the key's next record (``None`` drops the key).
        States are any picklable objects; with checkpoints they are pickled into each
        checkpoint and restored when the job resumes, so each record counts once::

            def count(word, _, n):
                n = (n or 0) + 1
                return f"{word} {n}", n

            words.map(lambda w: (w, 1)).map_with_state(count).write_lines("out/")

        Keys compare as in keyed operations of data sets."""
        return self._wrap(self._native.map_with_state(f))

    # --- windows -----------------------------------------------------------------------

    def window(
        self,
        window: Window,
        reduce: Callable[[Any, Any], Any],
        event_time: Callable[[Any], int] | None = None,
    ) -> Stream:
        """Keyed windows over ``(key, value)`` records: the values of each key in each
        window combined with ``reduce(a, b)`` (associative), giving one :class:`Windowed`
        per key and window as the window fires (a processing-time window when the clock
        passes its end, an event-time one when the watermark does; any window still open
        when the sources end fires then).

        ``event_time(value)`` gives a value's timestamp in ms (an ``int``); it is required
        by, and only allowed with, a window on event time (:meth:`Window.event_time`).
        Keys compare as in keyed operations of data sets (``str`` keys of any script)."""
        if not isinstance(window, Window):
            raise TypeError(
                f"window must be a heddle.data.Window (Window.tumbling(...), ...), got {window!r}"
            )
        if window.is_event_time and event_time is None:
            raise ValueError(
                f"{window!r} follows event time: give event_time=f, where f(value) is the value's "
                "timestamp in ms"
            )
        if not window.is_event_time and event_time is not None:
            raise ValueError(
                f"event_time= is given but {window!r} follows processing time: use "
                f"{window!r}.event_time(...) for event time"
            )
        # Both bounds are set (event time) or neither is (processing time).
        ooo, lateness = window.out_of_orderness, window.allowed_lateness
        event = (ooo, lateness) if ooo is not None and lateness is not None else None
        return self._wrap(
            self._native.window(window.kind, window.size, window.slide, event, reduce, event_time)
        )

    def late_records(self) -> int:
        """Records dropped so far on this worker as later than their window's allowed
        lateness (``comm.allreduce`` sums them over the workers)."""
        return self._native.late_records()

    # --- sinks ---------------------------------------------------------------------------

    def run(
        self,
        f: Callable[[Any], Any] | None = None,
        stop: StopHandle | None = None,
        timeout: float | None = None,
        max_records: int | None = None,
    ) -> None:
        """Calls ``f(record)`` for each record as it arrives, on the worker where it is
        (``None``: only consumes them), until the sources end or the run is stopped (see
        the class). Collective; releases the GIL while it waits."""
        self._native.run(f, stop, timeout, max_records)

    def collect(
        self,
        stop: StopHandle | None = None,
        timeout: float | None = None,
        max_records: int | None = None,
    ) -> list[Any] | None:
        """Runs the stream as :meth:`run` does and returns every worker's records on rank 0
        (each worker's in arrival order, workers in rank order; ``None`` on the others)."""
        got: list[Any] = []
        self.run(got.append, stop, timeout, max_records)
        parts = self.session.comm.gather(got, root=0)
        return None if parts is None else [x for part in parts for x in part]

    def write_lines(
        self,
        directory: str | os.PathLike[str],
        stop: StopHandle | None = None,
        timeout: float | None = None,
        max_records: int | None = None,
        mode: str = "errorifexists",
    ) -> None:
        """Writes each record's ``str`` as a line to ``directory/part-NNNNN`` (one file per
        partition) until the run ends; the parts, then ``_SUCCESS``, appear only then, and
        a run that fails leaves ``directory`` as it was. ``mode`` is that of the data set
        writers: ``"errorifexists"`` (a directory that holds files is refused),
        ``"overwrite"`` or ``"append"``.

        With checkpoints (see :class:`heddle.data.Session`) the sink is transactional
        instead: each partition writes a hidden ``.part-NNNNN.*.inprogress`` file, which a
        completed checkpoint renames to ``part-NNNNN-<checkpoint>`` (twelve digits), so
        the directory holds exactly the records up to the last checkpoint, each once,
        however often the job was killed and resumed. There is no ``_SUCCESS`` and
        ``mode`` must be left at its default; a directory holding committed parts with no
        checkpoint to resume them from is refused."""
        self._native.write_lines(os.fspath(directory), stop, timeout, max_records, mode)

    def write_parts(
        self,
        directory: str | os.PathLike[str],
        f: Callable[[Any], bytes | str | None],
        stop: StopHandle | None = None,
        timeout: float | None = None,
        max_records: int | None = None,
        mode: str = "errorifexists",
    ) -> None:
        """Writes what ``f(record)`` returns for each record — ``bytes`` as they are, a
        ``str`` as UTF-8, ``None`` nothing — to ``directory/part-NNNNN`` (one file per
        partition), committed as :meth:`write_lines` commits: the parts, then
        ``_SUCCESS``, appear when the run ends (with checkpoints, part by part at each
        checkpoint). ``f`` chooses the format (no newline is added)::

            events.write_parts("out/", lambda e: f"{e['id']}\t{e['value']}\n")
        """
        self._native.write_parts(os.fspath(directory), f, stop, timeout, max_records, mode)

    def write_socket(
        self,
        address: Address,
        stop: StopHandle | None = None,
        timeout: float | None = None,
        max_records: int | None = None,
    ) -> None:
        """Sends each record's ``str`` as a line to the TCP server at ``address``
        (``"host:port"`` or ``(host, port)``; one connection per partition, closed when
        the run ends)."""
        self._native.write_socket(_address(address), stop, timeout, max_records)

    def write_redis(
        self,
        url: str,
        key: str,
        stop: StopHandle | None = None,
        timeout: float | None = None,
        max_records: int | None = None,
    ) -> None:
        """Appends each record's ``str`` to the Redis stream ``key`` at ``url``
        (``"redis://host:port/"``) as an entry with one field, ``value`` (``XADD``; one
        connection per worker): what ``Session.redis_stream`` reads."""
        self._native.write_redis(str(url), str(key), stop, timeout, max_records)

    def __repr__(self) -> str:
        return repr(self._native)
