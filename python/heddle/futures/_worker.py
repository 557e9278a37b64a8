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

TASK = 1
STOP = 2
#: Result tags of executors: ``RESULT_BASE + k`` for the k-th executor of a communicator.
RESULT_BASE = 16

Task = tuple[int, Any, tuple[Any, ...], dict[str, Any]]
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


def apply_chunk(fn: Any, chunk: list[tuple[Any, ...]]) -> list[Any]:
    """``fn`` over a chunk of argument tuples (``Executor.map`` with ``chunksize``)."""
    return [fn(*args) for args in chunk]


def _run(task: Task) -> Outcome:
    task_id, fn, args, kwargs = task
    try:
        return task_id, True, fn(*args, **kwargs), None
    except BaseException as e:  # reported to the root, which re-raises it
        return task_id, False, e, traceback.format_exc()


def _answer(outcomes: list[Outcome]) -> bytearray:
    """The outcomes pickled; one that cannot be pickled becomes an error naming why."""
    try:
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
        result_tag, tasks = load(data)
        outcomes = [_run(t) for t in tasks]
        if last_send is not None:
            wait(last_send)
        last_send = _native.isend(comm, _answer(outcomes), root, result_tag)
