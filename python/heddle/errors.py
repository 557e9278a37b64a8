"""Exceptions raised by Heddle.

Every error Heddle raises is a :class:`HeddleError`; the native core maps each Rust error
variant to one of the classes below, keeping the Rust message as the text::

    HeddleError
    ├── ConfigError      (also ValueError)  a HEDDLE_* setting or the launcher environment is wrong
    ├── ArgumentError    (also ValueError, TypeError)  a bad rank, root, tag, buffer, dtype or op
    ├── CommError                           communication failed (I/O, malformed data, truncation)
    │   ├── TimeoutError (also builtins.TimeoutError)  no progress for HEDDLE_TIMEOUT_S seconds
    │   └── WorkerFailed                    a peer worker is gone; ``.rank`` says which
    ├── LaunchError                         ``heddle run`` could not start a worker
    ├── GraphError       (also ValueError)  a malformed task graph (a cycle, an edge into a source)
    ├── PlanError                           a task graph that cannot be placed on the workers
    ├── TaskError                           a task failed inside the native task system
    ├── DataError                           input cannot be read or parsed (names file and line)
    └── JobAborted                          another worker failed: the whole job stopped

An exception raised by Python code running inside a job (a task method, a function given
to a data set) is raised as itself when the job returns, not wrapped, on the worker where
it was raised; every other worker of the job raises :class:`JobAborted` carrying its text.
"""

from __future__ import annotations

import builtins

__all__ = [
    "HeddleError",
    "ConfigError",
    "ArgumentError",
    "CommError",
    "TimeoutError",
    "WorkerFailed",
    "LaunchError",
    "GraphError",
    "PlanError",
    "TaskError",
    "DataError",
    "JobAborted",
]


class HeddleError(Exception):
    """Base class of every error Heddle raises."""


class ConfigError(HeddleError, ValueError):
    """A ``HEDDLE_*`` setting, a launcher flag or the launcher environment is wrong."""


class ArgumentError(HeddleError, ValueError, TypeError):
    """An argument cannot be right: a rank, root or tag out of range, a buffer of the wrong
    size, type or layout, an operator that does not apply to the element type."""


class CommError(HeddleError):
    """Communication failed: an I/O error, malformed data from a peer, a message longer than
    the receive buffer, or a failed job bootstrap."""


class TimeoutError(CommError, builtins.TimeoutError):
    """A blocking call made no progress for ``HEDDLE_TIMEOUT_S`` seconds (or workers did not
    all join within ``HEDDLE_INIT_TIMEOUT_S``). Also a :class:`builtins.TimeoutError`."""


class WorkerFailed(CommError):
    """A peer worker is gone (it exited, crashed or was stopped); the job cannot continue.

    ``rank`` is the lost worker's world rank when known, else ``None``.
    """

    rank: int | None = None


class LaunchError(HeddleError):
    """The launcher could not start a worker program (for example, it does not exist)."""


class GraphError(HeddleError, ValueError):
    """A task graph is malformed: a vertex of parallelism 0, duplicate names, an edge into
    a source, a cycle, a direct edge between vertices of different parallelism, a vertex
    whose edges deliver records of different shapes."""


class PlanError(HeddleError):
    """A task graph cannot be placed on the workers: the message names the first task that
    does not fit and what it is short of."""


class TaskError(HeddleError):
    """A task failed inside the native task system (for example, a task object could not be
    made). Exceptions raised by Python task code are raised as themselves instead."""


class DataError(HeddleError):
    """Input data cannot be read or parsed: a missing file, a malformed CSV or JSON row
    (the message names the file and line), text that is not UTF-8."""


class JobAborted(HeddleError):
    """Another worker of the job failed, so the whole job stopped: every pending and later
    call on this worker raises this, and no result is produced.

    ``origin`` is the world rank that failed first, ``task`` the task it failed in (or
    ``None``), ``kind`` its error's kind (a Python exception class such as ``"ValueError"``,
    or a Heddle error kind such as ``"Timeout"``); the message carries the origin's error
    text (for Python, its traceback).
    """

    origin: int | None = None
    task: str | None = None
    kind: str | None = None
