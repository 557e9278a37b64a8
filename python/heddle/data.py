"""heddle.data: lazy distributed data sets of Python objects, with Python functions.

Every worker runs the same program. A :class:`Session` makes :class:`DataSet` s from
ranges, lists, generators and files; transformations (``map``, ``filter``,
``reduce_by_key``, ``join``, ``sort_by_key`` ...) describe new data sets without running
anything; actions (``collect``, ``count``, ``reduce``, ``write_text`` ...) compile what
they need into one task graph of Heddle's task system — record-wise steps chained in
memory, shuffles as dataflow operations — and run it on every worker (they are
collective). :meth:`DataSet.explain` shows the plan::

    import heddle
    from heddle.data import Session

    s = Session()                                   # joins the job (heddle.init())
    counts = (s.text_file("logs/*.txt")
                .flat_map(lambda line: [(w, 1) for w in line.split()])
                .reduce_by_key(lambda a, b: a + b))
    top = counts.collect()                          # a list on rank 0, None elsewhere

Records are any Python objects. Within a worker they pass between steps as they are;
between workers they are pickled (protocol 5; ``None``, ``bool``, 64-bit ``int``,
``float``, ``str``, ``bytes`` and tuples of them use a compact encoding). Keyed operations
take ``(key, value)`` tuples. Keys are compared by a canonical encoding, not by Python's
``hash`` (which differs between processes): ``None``, ``bool``, ``int`` (any size; numpy
integers too), ``float``, ``str``, ``bytes`` and tuples of them are equal when their values
are (``1``, ``1.0`` and ``True`` are three different keys), sort as Python sorts values of
one type (types sort None < bool < int < float < str < bytes < tuple < others), and any
other key is equal to another when their pickles are.

Vectorized work: :meth:`DataSet.map_batches` hands ``f`` batches of records as numpy
arrays (or dicts of column arrays), Arrow record batches (when ``pyarrow`` is installed)
or lists; :meth:`Session.text_blocks` reads text as blocks of many lines; records may
themselves be numpy blocks (:meth:`Session.from_numpy`).

Streams (:class:`Stream`, from ``Session.stream_generate``, ``stream_text``,
``socket_text``, ``follow_file``, ``redis_stream`` or ``stream_from_list``) run the same
record-wise steps on unbounded input, with keyed windows (:class:`Window`: tumbling,
sliding and session windows on processing or event time, count windows), keyed state
(:meth:`Stream.map_with_state`) and sinks that run until the sources end or a
:class:`StopHandle`, a timeout or a number of records stops them. With checkpoints
(``Session(checkpoint_interval=...)`` or ``heddle run --checkpoint-interval S``) a stream
restarted after a failure (``heddle run --restarts N``) resumes from its last complete
checkpoint and its file sinks deliver every record exactly once.

Errors: an exception raised by a function inside an action stops the Python calls of
that action on its worker (the action still ends on every worker), then is raised as
itself. Input problems raise :class:`heddle.DataError` naming the file and line. Every
action releases the GIL while it waits for other workers.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Iterable, Sequence
from typing import Any, Callable

from heddle._checkpoints import Checkpoints, Interval, job_name, seconds
from heddle._heddle import data as _data
from heddle.comm import Comm, init
from heddle.dataset import DataSet, PathLike
from heddle.errors import ArgumentError
from heddle.stream import Address, StopHandle, Stream, Window, Windowed, _address

__all__ = [
    "Session",
    "DataSet",
    "LoopCheckpoints",
    "Checkpoints",
    "Stream",
    "Window",
    "Windowed",
    "StopHandle",
]


def _on_malformed(on_malformed: str) -> bool:
    if on_malformed not in ("fail", "skip"):
        raise ValueError(f"on_malformed must be 'fail' or 'skip', not {on_malformed!r}")
    return on_malformed == "skip"


class LoopCheckpoints:
    """Checkpoints of loop state, so that a job restarted by ``heddle run --restarts``
    resumes after its newest checkpoint. Rank 0 pickles the state into a private file
    (written whole, then renamed; the newest two kept) and, on resume, unpickles its own
    file and hands the state to every worker::

        checkpoints = session.loop_checkpoints("/tmp/km", every=5)
        start, centers = checkpoints.resume() or (0, first_centers)
        for i in range(start, iterations):
            centers = step(centers)
            checkpoints.completed(i + 1, centers)
    """

    def __init__(self, native: _data.LoopCheckpoints, every: int) -> None:
        self._native = native
        self._every = every

    def resume(self) -> tuple[int, Any] | None:
        """``(iterations done, state)`` of the newest checkpoint, or ``None``. Collective."""
        found = self._native.resume()
        if found is None:
            return None
        iteration, state = found
        # Our own private file (owner and mode checked before it was read).
        return iteration, pickle.loads(state)

    def completed(self, iteration: int, state: Any) -> bool:
        """Records ``iteration`` iterations done with loop ``state``; every ``every``th,
        rank 0 writes a checkpoint. Returns whether one was written (a failed write is
        reported and the job goes on)."""
        if iteration % self._every != 0:
            return False  # not a checkpoint: no need to pickle the state
        return self._native.completed(iteration, pickle.dumps(state, protocol=5))


class Session:
    """The entry point of the data API on every worker (collective to create).

    ``comm`` is the communicator of the workers (default: :func:`heddle.init`); the
    session works on a copy of it, so collectives of your own on ``comm`` between actions
    are fine. ``partitions`` is the number of partitions of every data set (default: one
    per worker). ``memory_budget`` is how many bytes of records a partition holds in a sort
    or shuffle before it spills sorted runs to files in ``spill_dirs`` (default 64 MiB, and
    the system temp directory).

    Streams checkpoint every ``checkpoint_interval`` seconds into ``checkpoint_dir`` (a
    private directory, local or shared by the hosts) when either is given, or when ``heddle
    run --checkpoint-interval S [--checkpoint-dir DIR]`` asks (``HEDDLE_CHECKPOINT_INTERVAL_S``,
    ``HEDDLE_CHECKPOINT_DIR``; arguments given here win). A checkpoint keeps each source's
    position, each key's :meth:`Stream.map_with_state` state and window contents, and the
    file sinks' pending parts; a stream run finds the newest complete checkpoint of job
    ``job`` (default: the script's name) in the directory and resumes from it, so a job
    restarted by ``heddle run --restarts N`` delivers every record exactly once. Without an
    interval (only ``checkpoint_dir``) the only checkpoint is the last one, when the sources
    end. The default directory is ``heddle-checkpoints-<uid>/<job>`` in the temp directory.
    A checkpoint of another job or of another stream is refused (:class:`heddle.DataError`
    naming the file).
    """

    def __init__(
        self,
        comm: Comm | None = None,
        partitions: int | None = None,
        memory_budget: int | None = None,
        spill_dirs: Sequence[PathLike] | None = None,
        checkpoint_interval: Interval = None,
        checkpoint_dir: PathLike | None = None,
        job: str | None = None,
    ) -> None:
        self.comm: Comm = comm if comm is not None else init()
        dirs = None if spill_dirs is None else [os.fspath(d) for d in spill_dirs]
        self._native = _data.Session(
            self.comm,
            partitions,
            memory_budget,
            dirs,
            seconds(checkpoint_interval),
            None if checkpoint_dir is None else os.fspath(checkpoint_dir),
            job_name(job),
        )

    @property
    def rank(self) -> int:
        """This worker's rank."""
        return self._native.rank

    @property
    def size(self) -> int:
        """Number of workers."""
        return self._native.size

    @property
    def partitions(self) -> int:
        """Partitions of every data set."""
        return self._native.partitions

    @property
    def stream_checkpoints(self) -> Checkpoints | None:
        """Where, as which job and how often streams checkpoint, or ``None`` if they take
        no checkpoints."""
        found = self._native.stream_checkpoints
        return None if found is None else Checkpoints(os.fspath(found[0]), found[1], found[2])

    def _wrap(self, native: _data.DataSet) -> DataSet:
        return DataSet(native, self)

    def loop_checkpoints(
        self, dir: PathLike, every: int = 1, job: str | None = None
    ) -> LoopCheckpoints:
        """Checkpoints of an iterative job's loop state (the same on every worker, such as
        K-means' centers) in ``dir``, every ``every`` iterations: see
        :class:`LoopCheckpoints`. ``job`` describes the job (default: its command line);
        checkpoints of another job are refused. Collective."""
        job = " ".join(sys.argv) if job is None else job
        if every < 1:
            raise ArgumentError(f"loop_checkpoints: every={every} must be 1 or more")
        native = _data.LoopCheckpoints(self._native, os.fspath(dir), every, job)
        return LoopCheckpoints(native, every)

    def range(self, start: int, end: int | None = None) -> DataSet:
        """The integers ``start .. end - 1`` (``range(n)``: ``0 .. n - 1``), split evenly."""
        if end is None:
            start, end = 0, start
        return self._wrap(self._native.range(int(start), int(end)))

    def from_list(self, records: Iterable[Any]) -> DataSet:
        """The records of ``records`` — the same sequence on every worker (as every worker
        runs the same program) — split evenly, in order."""
        return self._wrap(self._native.from_list(records))

    def from_numpy(self, array: Any, rows_per_block: int = 65536) -> DataSet:
        """Blocks of ``rows_per_block`` rows of ``array`` (the same array on every worker;
        a memory map is fine: each partition touches only its blocks) as records: numpy
        arrays to work on with numpy in ``map``/``map_partitions``."""
        n = len(array)
        step = max(1, int(rows_per_block))
        return self.from_list([array[i : i + step] for i in range(0, n, step)])

    def generate(self, n: int, f: Callable[[int], Any]) -> DataSet:
        """``f(0) .. f(n - 1)``, each partition calling ``f`` for its own share (seeded
        generators; ``f`` may make a whole numpy block per call)."""
        return self._wrap(self._native.generate(int(n), f))

    def text_file(self, path: PathLike) -> DataSet:
        """The lines (``str``, without line ends) of a text file, of every file in a
        directory, or of the files a glob (``*``, ``?`` in the last component) names;
        split by byte ranges. The text must be UTF-8."""
        return self._wrap(self._native.text_file(os.fspath(path)))

    def text_blocks(
        self, path: PathLike, block_bytes: int = 4 << 20, binary: bool = False
    ) -> DataSet:
        """The same text as :meth:`text_file` in blocks: each record is a ``str`` of whole
        lines (each ending with a newline) of about ``block_bytes`` bytes — for vectorized
        work such as ``collections.Counter(block.split())``. With ``binary`` the blocks are
        ``bytes``, not decoded (faster to split and count; any encoding)."""
        return self._wrap(self._native.text_blocks(os.fspath(path), int(block_bytes), bool(binary)))

    def read_csv(self, path: PathLike, header: bool = True, on_malformed: str = "fail") -> DataSet:
        """Rows of CSV files (found as :meth:`text_file` finds them): dicts of ``str`` keyed
        by the first file's header when ``header`` (each file's first line is its header),
        else lists of ``str``. Quoted fields must not span lines. A malformed row raises
        :class:`heddle.DataError` naming its file and line, or with ``on_malformed="skip"``
        is skipped and counted (:meth:`skipped_rows`)."""
        skip = _on_malformed(on_malformed)
        return self._wrap(self._native.read_csv(os.fspath(path), bool(header), skip))

    def read_json_lines(self, path: PathLike, on_malformed: str = "fail") -> DataSet:
        """Records of JSON-lines files (one JSON value per line, blank lines ignored):
        dicts, lists, str, int, float, bool, None."""
        return self._wrap(
            self._native.read_json_lines(os.fspath(path), _on_malformed(on_malformed))
        )

    def read_parquet(self, path: PathLike, columns: Sequence[str] | None = None) -> DataSet:
        """Rows of Parquet files (found as :meth:`text_file` finds them; in a directory,
        names starting with ``_`` are skipped) as dicts of column values — only ``columns``,
        in that order, if given; every file must have them — read natively, by the Parquet
        source of the Rust API: the row groups of all files, in file order, are dealt to the
        partitions round robin (partition i of p reads groups i, i + p, ...). A file of one
        column named ``item`` (how :meth:`DataSet.write_parquet` and the Rust API store
        records that are not dicts) gives its values instead of dicts.

        Values are Python ``int``, ``float``, ``str``, ``bytes``, ``bool``, ``None``, lists
        (Arrow lists) and dicts (structs and maps); timestamps and dates come as their
        integer counts (Arrow's storage: units since the epoch, days), decimals as ``str``."""
        cols = None if columns is None else [str(c) for c in columns]
        return self._wrap(self._native.read_parquet(os.fspath(path), cols))

    def skipped_rows(self) -> int:
        """Malformed rows skipped so far on all workers (collective)."""
        return self._native.skipped_rows()

    def broadcast(self, value: Any = None) -> Any:
        """Rank 0's ``value`` on every worker (a side input for functions; collective)."""
        return self.comm.bcast(value, root=0)

    # --- stream sources -------------------------------------------------------------------

    def _stream(self, native: _data.Stream) -> Stream:
        return Stream(native, self)

    def stream_from_list(self, records: Iterable[Any]) -> Stream:
        """A finite stream of ``records`` (the same sequence on every worker), split evenly
        in order: a replay, for tests and backfills."""
        return self._stream(_data.Stream.from_list(self._native, records))

    def stream_generate(
        self, f: Callable[[int], Any], rate: int | None = None, limit: int | None = None
    ) -> Stream:
        """``f(0), f(1), ...`` as they are made: partition i calls ``f`` with the numbers
        congruent to i (so each is made once), at most ``rate`` records per second per
        partition (``None``: as fast as possible), until ``limit`` records in all
        (``None``: until the run is stopped)."""
        return self._stream(
            _data.Stream.generate(
                self._native,
                f,
                None if rate is None else int(rate),
                None if limit is None else int(limit),
            )
        )

    def stream_text(self, path: PathLike, rate: float | None = None) -> Stream:
        """The lines (``str``, without their ``\\n`` or ``\\r\\n``) of every file of
        ``path`` — a file, a directory's files (not those whose names start with ``.`` or
        ``_``) or a glob's, in name order — as a stream that ends after the last line:
        partition i of p reads files i, i + p, ..., at most ``rate`` lines per second over
        all partitions (``None``: as fast as possible). It replays: with checkpoints each
        partition resumes from the byte offset of its last checkpoint (the files must not
        change meanwhile)."""
        return self._stream(
            _data.Stream.text_files(
                self._native, os.fspath(path), None if rate is None else float(rate)
            )
        )

    def socket_text(self, address: Address) -> Stream:
        """The lines (``str``, without line ends) a TCP server at ``address`` (``"host:port"``
        or ``(host, port)``) sends; partition 0 connects, and the stream ends when the
        server closes the connection."""
        return self._stream(_data.Stream.socket_text(self._native, _address(address)))

    def follow_file(self, path: PathLike, end_marker: str | None = None) -> Stream:
        """The lines of a file as it grows, like ``tail -f`` from its start (partition 0
        reads; it waits for the file to appear), until the run is stopped, or until a line
        equal to ``end_marker`` (not emitted) if one is given."""
        return self._stream(_data.Stream.follow_file(self._native, os.fspath(path), end_marker))

    def redis_stream(
        self, url: str, key: str, after: str = "0", end_field: str | None = None
    ) -> Stream:
        """The entries of the Redis stream ``key`` at ``url`` (``redis://host:port/``) after
        entry id ``after`` (``"0"``: from the start) as ``(id, {field: value})``; partition 0
        reads. An entry with a field named ``end_field`` ends the stream (and is not
        emitted); otherwise it runs until stopped."""
        return self._stream(_data.Stream.redis_stream(self._native, url, key, after, end_field))

    def __repr__(self) -> str:
        return (
            f"<heddle.data.Session rank={self.rank} workers={self.size} "
            f"partitions={self.partitions}>"
        )
