"""The messages of :mod:`heddle.futures` and the loop a worker rank serves tasks in.

The root sends a worker a batch of tasks ``[(id, fn, args, kwargs), ...]`` with tag
``TASK``; the worker runs them in order and answers with one message of their outcomes
``[(id, ok, value_or_exception, traceback_text), ...]`` with the tag the batch named. Tag
``STOP`` ends the loop. Every message is one pickled block (``heddle.comm``'s framing:
pickle protocol 5, large buffers appended, so numpy results arrive as views of the bytes).
"""

from __future__ import annotations

import traceback
from typing import Any

from heddle._heddle import comm as _native
from heddle.comm import Comm, _pack_all, _unpack_all
from heddle.errors import TimeoutError
from heddle.futures._shared import dump_shared, job_dir

TASK = 1
STOP = 2
#: Result tags of executors: ``RESULT_BASE + k`` for the k-th executor of a communicator.
RESULT_BASE = 16

#: ``(id, fn, args, kwargs, refs)``: ``refs`` says whether ``Ref`` arguments are among them.
Task = tuple[int, Any, tuple[Any, ...], dict[str, Any], bool]
Outcome = tuple[int, bool, Any, "str | None"]


def dump(obj: Any) -> bytearray:
    blob, _ = _pack_all([obj])
    return blob


def load(blob: bytearray) -> Any:
    return _unpack_all(blob, [len(blob)])[0]


def wait(req: Any) -> tuple[int, int, int] | None:
    """Waits for a native request however long it takes: an idle spell longer than
    ``HEDDLE_TIMEOUT_S`` is not an error here (a lost peer still is). Returns its status
    (``(source, tag, bytes)`` for a receive)."""
    while True:
        try:
            status: tuple[int, int, int] | None = req.wait()
            return status
        except TimeoutError:
            continue


class Ref:
    """An argument that is the result of task ``id``, kept on the worker that ran it
    (``heddle.futures._retained``): the worker puts the result itself in its place."""

    __slots__ = ("id",)

    def __init__(self, task_id: int) -> None:
        self.id = task_id

    def __reduce__(self) -> tuple[type[Ref], tuple[int]]:
        return (Ref, (self.id,))


def apply_chunk(fn: Any, chunk: list[tuple[Any, ...]]) -> list[Any]:
    """``fn`` over a chunk of argument tuples (``Executor.map`` with ``chunksize``)."""
    return [fn(*args) for args in chunk]


def _run(task: Task, kept: dict[tuple[int, int], Any], tag: int) -> Outcome:
    """Runs ``task``, its ``Ref`` arguments replaced by the results ``kept`` here; keeps
    its own result (until the root releases it). Results are kept per executor (its
    result ``tag``): several may share the workers, each numbering its tasks from 0."""
    task_id, fn, args, kwargs, refs = task
    try:
        if refs:
            args = tuple(kept[tag, a.id] if isinstance(a, Ref) else a for a in args)
            kwargs = {k: kept[tag, v.id] if isinstance(v, Ref) else v for k, v in kwargs.items()}
        value = fn(*args, **kwargs)
    except BaseException as e:  # reported to the root, which re-raises it
        return task_id, False, e, traceback.format_exc()
    kept[tag, task_id] = value
    return task_id, True, value, None


def _answer(outcomes: list[Outcome], share: str | None) -> bytearray:
    """The outcomes pickled (large buffers through files in ``share``, the root's job
    directory on this host); one that cannot be pickled becomes an error naming why."""
    try:
        if share is not None:
            return dump_shared(outcomes, share)
        return dump(outcomes)
    except Exception:
        safe = []
        for o in outcomes:
            try:
                dump(o)
                safe.append(o)
            except Exception as e:
                error = RuntimeError(f"the result of task {o[0]} cannot be pickled: {e!r}")
                safe.append((o[0], False, error, None))
        return dump(safe)


def serve(comm: Comm, root: int) -> None:
    """Runs the tasks ``root`` sends until it sends ``STOP``."""
    last_send = None
    kept: dict[tuple[int, int], Any] = {}
    world = _native.world_ranks(comm)
    same_host = comm.hosts[world[comm.rank]] == comm.hosts[world[root]]
    while True:
        req = _native.irecv_bytes(comm, root, None)
        status = wait(req)
        assert status is not None
        tag = status[1]
        if tag == STOP:
            if last_send is not None:
                wait(last_send)
            return
        data = req.take_bytes()
        assert data is not None
        result_tag, tasks, release, root_dir = load(data)
        # Large results go through the root's job directory if it is on this host.
        share = root_dir if same_host and root_dir == job_dir() else None
        for task_id in release:
            kept.pop((result_tag, task_id), None)
        outcomes = [_run(t, kept, result_tag) for t in tasks]
        if last_send is not None:
            wait(last_send)
        last_send = _native.isend(comm, _answer(outcomes, share), root, result_tag)
