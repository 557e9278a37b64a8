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

The classes are made by the native core (``heddle._heddle``, where each Rust error variant
is mapped to its class) and re-exported here: ``heddle.errors.X``, ``heddle.X`` and
``heddle._heddle.X`` are the same class.

An exception raised by Python code running inside a job (a task method, a function given
to a data set) is raised as itself when the job returns, not wrapped, on the worker where
it was raised; every other worker of the job raises :class:`JobAborted` carrying its text.
"""

from __future__ import annotations

from heddle._heddle import (
    ArgumentError,
    CommError,
    ConfigError,
    DataError,
    GraphError,
    HeddleError,
    JobAborted,
    LaunchError,
    PlanError,
    TaskError,
    TimeoutError,
    WorkerFailed,
)

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
