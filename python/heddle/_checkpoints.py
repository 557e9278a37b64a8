"""What checkpoints of streams and streaming task jobs are: their settings as a named
tuple, and the default name of a job (the name that marks its checkpoints as its own)."""

from __future__ import annotations

import os
import sys
from typing import NamedTuple, Union

#: Seconds between checkpoints: a number, or ``None``.
Interval = Union[float, int, None]


class Checkpoints(NamedTuple):
    """Where and how often a session's streams checkpoint (``Session.stream_checkpoints``)."""

    #: The checkpoint directory (private to this user).
    dir: str
    #: The job's name: a checkpoint of another job is refused.
    job: str
    #: Seconds between checkpoints; ``None``: only a last one, when the sources end.
    interval: float | None


def job_name(job: str | None) -> str:
    """``job``, or the running script's name without its extension (``wordcount`` for
    ``heddle run -n 4 wordcount.py``; ``python`` for ``-c`` code)."""
    if job is not None:
        return str(job)
    script = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-") else "python"
    name = os.path.splitext(os.path.basename(script))[0]
    return name or "python"


def seconds(interval: Interval, name: str = "checkpoint_interval") -> float | None:
    """``interval`` as a float of seconds (checked natively for its range)."""
    if interval is None:
        return None
    if isinstance(interval, bool) or not isinstance(interval, (int, float)):
        raise TypeError(f"{name} must be a number of seconds or None, got {interval!r}")
    return float(interval)
