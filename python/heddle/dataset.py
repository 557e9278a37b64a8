"""heddle.dataset: :class:`DataSet`, the lazy distributed collection of Python objects
that a :class:`heddle.data.Session` makes — its transformations and actions (see
:mod:`heddle.data` for the model: records, keys, errors)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Callable, Union

from heddle._batches import from_batch, to_batch
from heddle._heddle import data as _data
from heddle._placement import Resources

if TYPE_CHECKING:
    from heddle.data import Session

__all__ = ["DataSet"]

PathLike = Union[str, "os.PathLike[str]"]


def _mode(mode: str) -> str:
    if mode in ("errorifexists", "error", "overwrite", "append"):
        return mode
    raise ValueError(f"mode must be 'errorifexists', 'overwrite' or 'append', not {mode!r}")


class DataSet:
    """A lazy distributed collection of Python objects, in :attr:`Session.partitions`
    partitions. Transformations return new data sets; actions run them (collectively)."""

    def __init__(self, native: _data.DataSet, session: Session) -> None:
        self._native = native
        self.session = session

    def _wrap(self, native: _data.DataSet) -> DataSet:
        return DataSet(native, self.session)

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
    ) -> DataSet:
        """The same records, the stage that makes them declaring what each of its partitions
        asks for: a :class:`heddle.task.Resources`, or its fields (amounts such as
        ``"200MiB"`` allowed). Cores and memory are checked against what the workers offer
        when the job is planned (a stage that fits nowhere fails the action, naming it,
        before anything runs); ``net_bytes_per_s`` holds its records to that rate on the
        edges after it. A record-wise stage (``map``, ``filter``, ``flat_map``,
        ``map_partitions``, a keyed reduction's last step …) with a ``memory`` or
        ``io_bytes_per_s`` contract — or ``isolation="process"`` — runs each partition as
        a child process of its worker forked with everything imported, confined by control
        groups (over its memory it is killed, and the action fails naming the stage, the
        contract and its peak); ``isolation="thread"`` keeps it a thread, unenforced.
        """
        r = resources or Resources(
            cpus=cpus,
            memory=memory,
            net_bytes_per_s=net_bytes_per_s,
            io_bytes_per_s=io_bytes_per_s,
            isolation=isolation,
        )
        return self._wrap(self._native.resources(r.amounts()))

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
        *,
        checkpoint_dir: PathLike | None = None,
        checkpoint_every: int = 1,
        job: str | None = None,
    ) -> tuple[DataSet, int]:
        """Repeats ``step`` on the data set up to ``max_steps`` times, caching each result,
        until ``done(previous, next)`` holds (checked after each step, collectively: the
        loop ends when every worker says so). Returns the last data set and the steps
        taken.

        With ``checkpoint_dir``, every ``checkpoint_every`` steps each worker writes its
        partitions there, and a job restarted by ``heddle run --restarts`` resumes after
        the newest complete checkpoint (the steps returned count those before the
        restart). ``job`` describes the job (default: its command line); checkpoints of
        another job, or of another number of workers, are refused."""
        s = self.session
        last, steps = self._native.iterate(
            int(max_steps),
            lambda nd: step(DataSet(nd, s))._native,
            lambda a, b: bool(done(DataSet(a, s), DataSet(b, s))),
            None if checkpoint_dir is None else os.fspath(checkpoint_dir),
            int(checkpoint_every),
            " ".join(sys.argv) if job is None else job,
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

    def partition_by(self, f: Callable[[Any], int]) -> DataSet:
        """The same records, each in the partition ``f(record) % partitions`` (Spark's
        ``partitionBy``): records with equal ``f`` meet in one partition. ``f`` must give the
        same number on every worker — use ``zlib.crc32`` of the key, not ``hash()``, which
        Python salts per process."""
        return self._wrap(_data.partition_by(self._native, lambda r: f(r) & 0x7FFF_FFFF_FFFF_FFFF))

    def pipe(
        self,
        command: str | list[str],
        transport: str = "pipe",
        *,
        args: Iterable[str] = (),
        credits: int = 64,
        max_record: int = 64 << 20,
        timeout: float = 60.0,
        policy: str | None = None,
    ) -> DataSet:
        """Each partition's records through ``command``, a filter written with one of the
        bridge SDKs (C, C++, Java, Go, Python) — Spark's ``rdd.pipe``, but framed and typed:
        ``str`` crosses as UTF-8, ``bytes`` as bytes, numbers and numpy arrays as typed
        arrays, ``(key, value)`` pairs keyed (see :mod:`heddle._bridge`); results come back
        the same way. ``transport`` is ``"pipe"``, ``"fifo"``, ``"tcp"``, ``"unix"`` or
        ``"shm"``, and ``policy`` may switch it by rules (see :class:`heddle.bridge.Bridge`);
        ``args`` go to the filter's ``init``. A filter that fails, exits early or hangs past
        ``timeout`` seconds fails the job with its exit status and the end of its stderr."""
        from heddle._bridge import command_line, from_wire, to_wire

        cmd = command_line(command)
        wired = self._native.map(to_wire)
        out = _data.pipe(
            wired, cmd, transport, [str(a) for a in args], credits, max_record, timeout, policy
        )
        return self._wrap(out.map(from_wire))

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
        """Writes each partition as ``directory/part-00000.parquet`` ..., natively (no
        pyarrow): dict records as one column per key (the union of the partition's keys in
        first-seen order; a missing key is null), other records as one column ``item`` (as
        the Rust API does, and as :meth:`Session.read_parquet` reads them back). Each
        partition's column types are inferred from its records as
        ``pyarrow.Table.from_pylist`` infers them: ``bool``, ``int`` (int64), ``float``
        (double; ints among floats become floats), ``str``, ``bytes``, ``None`` (a column
        of only ``None`` has Arrow's null type), ``list``, ``dict`` (a struct),
        ``datetime.datetime`` (timestamp[us], aware ones in UTC with their zone's name) and
        ``datetime.date`` (date32). A value of another type, an int beyond int64 or a
        column mixing types raises :class:`heddle.DataError` naming the partition, record,
        column and type, and nothing is written. An empty partition writes no file. Returns
        when every worker has written its files (``mode`` and the commit as for
        :meth:`write_text`)."""
        commit = _data.OutputCommit(
            self.session._native, os.fspath(directory), _mode(mode), ".parquet"
        )
        written: list[int] = []

        def write(index: int, records: list[Any]) -> None:
            if not records:
                return
            _data.write_parquet_part(records, os.fspath(commit.temp_path(index)), index)
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
