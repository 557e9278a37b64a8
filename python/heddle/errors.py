"""Exceptions raised by Heddle.

Every error Heddle raises is a :class:`HeddleError`; the native core maps each Rust error
variant to one of the classes below, keeping the Rust message as the text::

    HeddleError
    ├── ConfigError      (also ValueError)  a HEDDLE_* setting or the launcher environment is wrong
    ├── ArgumentError    (also ValueError, TypeError)  a bad argument: rank, root, tag, buffer, dtype, op
    ├── CommError                           communication failed (I/O, malformed data, truncation)
    │   ├── TimeoutError (also builtins.TimeoutError)  no progress for HEDDLE_TIMEOUT_S seconds
    │   └── WorkerFailed                    a peer worker is gone; ``.rank`` says which
    └── LaunchError                         ``heddle run`` could not start a worker
"""

from __future__ import annotations

import builtins
from typing import Optional

__all__ = [
    "HeddleError",
    "ConfigError",
    "ArgumentError",
    "CommError",
    "TimeoutError",
    "WorkerFailed",
    "LaunchError",
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

    rank: Optional[int] = None


class LaunchError(HeddleError):
    """The launcher could not start a worker program (for example, it does not exist)."""
