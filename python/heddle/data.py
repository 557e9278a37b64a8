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

Streams (:class:`Stream`, from ``Session.stream_generate``, ``socket_text``,
``follow_file``, ``redis_stream`` or ``stream_from_list``) run the same record-wise steps on
unbounded input, with keyed windows (:class:`Window`: tumbling, sliding and session
windows on processing or event time, count windows) and sinks that run until the sources
end or a :class:`StopHandle`, a timeout or a number of records stops them.

Errors: an exception raised by a function inside an action stops the Python calls of
that action on its worker (the action still ends on every worker), then is raised as
itself. Input problems raise :class:`heddle.DataError` naming the file and line. Every
action releases the GIL while it waits for other workers.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Sequence
from typing import Any, Callable, Union

from heddle import _heddle
from heddle._batches import from_batch, to_batch
from heddle.comm import Comm, init
from heddle.stream import Address, StopHandle, Stream, Window, Windowed, _address

__all__ = ["Session", "DataSet", "Stream", "Window", "Windowed", "StopHandle"]

PathLike = Union[str, "os.PathLike[str]"]


def _pyarrow(what: str) -> tuple[Any, Any]:
    """``pyarrow`` and ``pyarrow.parquet``, or an ImportError saying how to get them."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise ImportError(f"{what} needs pyarrow: pip install pyarrow (or heddle[arrow])") from None
    return pyarrow, pyarrow.parquet


def _mode(mode: str) -> str:
    if mode in ("errorifexists", "error", "overwrite", "append"):
        return mode
    raise ValueError(f"mode must be 'errorifexists', 'overwrite' or 'append', not {mode!r}")


def _on_malformed(on_malformed: str) -> bool:
    if on_malformed not in ("fail", "skip"):
        raise ValueError(f"on_malformed must be 'fail' or 'skip', not {on_malformed!r}")
    return on_malformed == "skip"


class Session:
    """The entry point of the data API on every worker (collective to create).

    ``comm`` is the communicator of the workers (default: :func:`heddle.init`); the
    session works on a copy of it, so collectives of your own on ``comm`` between actions
    are fine. ``partitions`` is the number of partitions of every data set (default: one
    per worker). ``memory_budget`` is how many bytes of records a partition holds in a sort
    or shuffle before it spills sorted runs to files in ``spill_dirs`` (default 64 MiB, and
    the system temp directory).
    """

    def __init__(
        self,
        comm: Comm | None = None,
        partitions: int | None = None,
        memory_budget: int | None = None,
        spill_dirs: Sequence[PathLike] | None = None,
    ) -> None:
        self.comm: Comm = comm if comm is not None else init()
        dirs = None if spill_dirs is None else [os.fspath(d) for d in spill_dirs]
        self._native = _heddle.Session(self.comm, partitions, memory_budget, dirs)

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

    def _wrap(self, native: _heddle.DataSet) -> DataSet:
        return DataSet(native, self)

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

    def _stream(self, native: _heddle.Stream) -> Stream:
        return Stream(native, self)

    def stream_from_list(self, records: Iterable[Any]) -> Stream:
        """A finite stream of ``records`` (the same sequence on every worker), split evenly
        in order: a replay, for tests and backfills."""
        return self._stream(_heddle.Stream.from_list(self._native, records))

    def stream_generate(
        self, f: Callable[[int], Any], rate: int | None = None, limit: int | None = None
    ) -> Stream:
        """``f(0), f(1), ...`` as they are made: partition i calls ``f`` with the numbers
        congruent to i (so each is made once), at most ``rate`` records per second per
        partition (``None``: as fast as possible), until ``limit`` records in all
        (``None``: until the run is stopped)."""
        return self._stream(
            _heddle.Stream.generate(
                self._native,
                f,
                None if rate is None else int(rate),
                None if limit is None else int(limit),
            )
        )

    def socket_text(self, address: Address) -> Stream:
        """The lines (``str``, without line ends) a TCP server at ``address`` (``"host:port"``
        or ``(host, port)``) sends; partition 0 connects, and the stream ends when the
        server closes the connection."""
        return self._stream(_heddle.Stream.socket_text(self._native, _address(address)))

    def follow_file(self, path: PathLike, end_marker: str | None = None) -> Stream:
        """The lines of a file as it grows, like ``tail -f`` from its start (partition 0
        reads; it waits for the file to appear), until the run is stopped, or until a line
        equal to ``end_marker`` (not emitted) if one is given."""
        return self._stream(_heddle.Stream.follow_file(self._native, os.fspath(path), end_marker))

    def redis_stream(
        self, url: str, key: str, after: str = "0", end_field: str | None = None
    ) -> Stream:
        """The entries of the Redis stream ``key`` at ``url`` (``redis://host:port/``) after
        entry id ``after`` (``"0"``: from the start) as ``(id, {field: value})``; partition 0
        reads. An entry with a field named ``end_field`` ends the stream (and is not
        emitted); otherwise it runs until stopped."""
        return self._stream(_heddle.Stream.redis_stream(self._native, url, key, after, end_field))

    def __repr__(self) -> str:
        return (
            f"<heddle.data.Session rank={self.rank} workers={self.size} "
            f"partitions={self.partitions}>"
        )


class DataSet:
    """A lazy distributed collection of Python objects, in :attr:`Session.partitions`
    partitions. Transformations return new data sets; actions run them (collectively)."""

    def __init__(self, native: _heddle.DataSet, session: Session) -> None:
        self._native = native
        self.session = session

    def _wrap(self, native: _heddle.DataSet) -> DataSet:
        return DataSet(native, self.session)

    # --- record-wise ---------------------------------------------------------------

    def map(self, f: Callable[[Any], Any]) -> DataSet:
        """Each record through ``f``."""
        return self._wrap(self._native.map(f))

    def flat_map(self, f: Callable[[Any], Iterable[Any]]) -> DataSet:
        """Each record to the records of the iterable ``f`` returns (``None``: none)."""
        return self._wrap(self._native.flat_map(f))

    def filter(self, f: Callable[[Any], Any]) -> DataSet:
        """The records for which ``f`` is true."""
        return self._wrap(self._native.filter(f))

    def key_by(self, f: Callable[[Any], Any]) -> DataSet:
        """``(f(record), record)`` for each record."""
        return self._wrap(self._native.key_by(f))

    def map_partitions(self, f: Callable[[list[Any]], Iterable[Any]]) -> DataSet:
        """Each whole partition (a list) through ``f``, which returns an iterable of records."""
        return self._wrap(self._native.map_partitions(f))

    def map_batches(
        self, f: Callable[[Any], Any], batch_size: int | None = 4096, batch_format: str = "numpy"
    ) -> DataSet:
        """Vectorized map: ``f`` gets batches of up to ``batch_size`` consecutive records of a
        partition (``None``: the whole partition) and returns a batch.

        ``batch_format`` says what a batch is: ``"numpy"`` — ``numpy.asarray(records)`` (a
        1-D array of numbers, a 2-D array of tuples of numbers), or for dict records a dict
        of column arrays; ``"pyarrow"`` — a ``pyarrow.RecordBatch`` (dict records give its
        columns; other records one column ``value``); ``"list"`` — the list of records.

        ``f`` may return a numpy array (1-D: one record per element; 2-D: a tuple per row),
        a dict of equal-length columns (a dict record per row), a ``pyarrow.RecordBatch`` or
        ``Table`` (a dict per row, or the values of a lone ``value`` column), or any iterable
        of records.
        """
        convert = to_batch(batch_format)
        size = None if batch_size is None else max(1, int(batch_size))

        def run(part: list[Any]) -> list[Any]:
            out: list[Any] = []
            step = size or max(1, len(part))
            for i in range(0, len(part), step):
                out.extend(from_batch(f(convert(part[i : i + step]))))
            return out

        return self.map_partitions(run)

    def union(self, other: DataSet) -> DataSet:
        """The records of both data sets."""
        return self._wrap(self._native.union(other._native))

    def repartition(self) -> DataSet:
        """The same records dealt round-robin over the partitions (evens out skew)."""
        return self._wrap(self._native.repartition())

    def distinct(self) -> DataSet:
        """Every distinct record once (records compared as keys are)."""
        return self._wrap(self._native.distinct())

    def words(self) -> DataSet:
        """The words of ``str`` (or ``bytes``) records: the runs of characters between
        ASCII whitespace (space, ``\\t``, ``\\n``, ``\\r``, ``\\v``, ``\\f``), as ``bytes.split()``
        splits; other Unicode spaces stay inside words. Other records raise ``TypeError``.

        On text read by :meth:`Session.text_file` or :meth:`Session.text_blocks` the split
        is native, and ``words().value_counts()`` counts the words without making a
        Python object per word — the word count of PySpark's
        ``explode(split(...)).groupBy().count()``::

            counts = s.text_file("books/").words().value_counts()   # (word, count)
        """
        return self._wrap(self._native.words())

    def value_counts(self) -> DataSet:
        """``(record, count)`` for every distinct record (records compared as keys are),
        counted natively within each partition first; the order is unspecified."""
        return self._wrap(self._native.value_counts())

    # --- keyed: records are (key, value) tuples ---------------------------------------

    def reduce_by_key(self, f: Callable[[Any, Any], Any]) -> DataSet:
        """Values combined per key with ``f`` (associative, commutative): within each
        partition first, then across them. Gives ``(key, value)`` per key."""
        return self._wrap(self._native.reduce_by_key(f))

    def aggregate_by_key(
        self, zero: Any, seq: Callable[[Any, Any], Any], comb: Callable[[Any, Any], Any]
    ) -> DataSet:
        """Values folded per key into an accumulator: ``seq(acc, value)`` starting from a
        deep copy of ``zero``; accumulators merged with ``comb`` (associative, commutative)."""
        return self._wrap(self._native.aggregate_by_key(zero, seq, comb))

    def group_by_key(self) -> DataSet:
        """Every key once with the list of its values: ``(key, [values])``."""
        return self._wrap(self._native.group_by_key())

    def join(self, other: DataSet) -> DataSet:
        """Inner join: ``(key, (v, w))`` for every pair of values with equal keys."""
        return self._wrap(self._native.join(other._native))

    def left_join(self, other: DataSet) -> DataSet:
        """Left outer join: every left pair ``(key, (v, w))``, ``w`` ``None`` where no right
        value has the key."""
        return self._wrap(self._native.left_join(other._native))

    def full_outer_join(self, other: DataSet) -> DataSet:
        """Full outer join: matched pairs, and unmatched values of either side with ``None``
        on the other."""
        return self._wrap(self._native.full_outer_join(other._native))

    def sort_by_key(self) -> DataSet:
        """Sorted by key across partitions: partition i holds keys no greater than partition
        i + 1's, each sorted (stable). Samples the keys now (an action)."""
        return self._wrap(self._native.sort_by_key())

    def sort(self, key_bytes: int | None = None) -> DataSet:
        """The records sorted across partitions (partition i's before partition i + 1's;
        the order of equal keys is unspecified). Samples the keys now (an action).

        The key is the record itself, compared as keys are (see the module notes), or with
        ``key_bytes`` the first ``key_bytes`` bytes of a ``str`` (its UTF-8, whose byte
        order is code point order) or ``bytes`` record. Lines of :meth:`Session.text_file`
        are sorted natively (an external sort that spills beyond the memory budget), and
        ``write_text`` of the result writes them natively: PySpark's
        ``spark.read.text(p).sort(...).write.text(d)``::

            s.text_file("records.txt").sort(key_bytes=10).write_text("sorted/")
        """
        if key_bytes is not None and (
            isinstance(key_bytes, bool) or not isinstance(key_bytes, int) or key_bytes < 0
        ):
            raise ValueError(
                f"key_bytes must be a whole number of bytes (0 or more), or None, not {key_bytes!r}"
            )
        return self._wrap(self._native.sort(key_bytes))

    # --- in memory and in loops --------------------------------------------------------

    def cache(self) -> DataSet:
        """Computes the data set now (an action) and keeps every partition in memory, as
        Python objects, so later actions start from there."""
        return self._wrap(self._native.cache())

    def iterate(
        self,
        max_steps: int,
        step: Callable[[DataSet], DataSet],
        done: Callable[[DataSet, DataSet], bool],
    ) -> tuple[DataSet, int]:
        """Repeats ``step`` on the data set up to ``max_steps`` times, caching each result,
        until ``done(previous, next)`` holds (checked after each step, collectively: the
        loop ends when every worker says so). Returns the last data set and the steps
        taken."""
        s = self.session
        last, steps = self._native.iterate(
            int(max_steps),
            lambda nd: step(DataSet(nd, s))._native,
            lambda a, b: bool(done(DataSet(a, s), DataSet(b, s))),
        )
        return DataSet(last, s), steps

    # --- actions -----------------------------------------------------------------------

    def collect(self) -> list[Any] | None:
        """Every record, in partition order, on rank 0 (``None`` on the other workers)."""
        return self._native.collect()

    def collect_all(self) -> list[Any]:
        """Every record, in partition order, on every worker."""
        return self._native.collect_all()

    def count(self) -> int:
        """The number of records, on every worker."""
        return self._native.count()

    def reduce(self, f: Callable[[Any, Any], Any]) -> Any:
        """All records combined with ``f`` (associative, commutative), on every worker;
        ``None`` for an empty data set."""
        return self._native.reduce(f)

    def for_each(self, f: Callable[[Any], Any]) -> None:
        """Calls ``f(record)`` for every record, on the worker holding it."""
        self._native.for_each(f)

    def write_text(self, directory: PathLike, mode: str = "errorifexists") -> None:
        """Writes each record's ``str`` as a line, one part file per partition
        (``directory/part-00000`` ...), where the partition is. As Spark's writer modes:
        ``"errorifexists"`` refuses a directory holding files, ``"overwrite"`` replaces its
        parts and ``_SUCCESS`` (other files stay), ``"append"`` adds parts under new names.
        Parts move into place, then ``_SUCCESS``, once every worker wrote its own."""
        self._native.write_text(os.fspath(directory), _mode(mode))

    def write_json_lines(self, directory: PathLike, mode: str = "errorifexists") -> None:
        """Writes each record as one line of JSON (dicts, lists, tuples, str, int, float,
        bool, None), one part file per partition (``mode`` as for :meth:`write_text`)."""
        self._native.write_json_lines(os.fspath(directory), _mode(mode))

    def for_each_partition(self, f: Callable[[int, list[Any]], Any]) -> None:
        """Calls ``f(index, records)`` with every whole partition (a list), on the worker
        holding it."""
        self._native.for_each_partition(f)

    def write_parquet(self, directory: PathLike, mode: str = "errorifexists") -> None:
        """Writes each partition as ``directory/part-00000.parquet`` ... with ``pyarrow``:
        dict records as columns (the schema inferred from the records), other records as one
        column ``item`` (as the Rust API does). An empty partition writes no file. Returns
        when every worker has written its files (``mode`` and the commit as for
        :meth:`write_text`)."""
        pa, pq = _pyarrow("write_parquet")
        commit = _heddle.OutputCommit(
            self.session._native, os.fspath(directory), _mode(mode), ".parquet"
        )
        written: list[int] = []

        def write(index: int, records: list[Any]) -> None:
            if not records:
                return
            table = (
                pa.Table.from_pylist(records)
                if isinstance(records[0], dict)
                else pa.table({"item": records})
            )
            pq.write_table(table, os.fspath(commit.temp_path(index)))
            written.append(index)

        try:
            self._native.for_each_partition(write)
        except BaseException:
            with contextlib.suppress(Exception):  # the temporary files go; the cause is raised
                commit.finish([], True)
            raise
        commit.finish(written, False)

    def write_csv(self, directory: PathLike, mode: str = "errorifexists") -> None:
        """Writes each record as a CSV row (a tuple or list of fields, or one field; fields
        written with ``str``, ``None`` as empty), one part file per partition, no header
        (``mode`` as for :meth:`write_text`)."""
        self._native.write_csv(os.fspath(directory), _mode(mode))

    def explain(self) -> str:
        """The task graph and plan an action on this data set would run."""
        return self._native.explain()

    def __repr__(self) -> str:
        return repr(self._native)
