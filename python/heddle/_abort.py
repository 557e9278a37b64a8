"""Job-wide abort for exceptions that nothing caught.

On a job of several workers, :func:`install` (called by :func:`heddle.init`) wraps
``sys.excepthook``:

* an uncaught exception on this worker aborts the whole job before the worker exits, so the
  other workers' pending and later calls raise :class:`heddle.JobAborted` carrying this
  exception's traceback instead of waiting for this worker until they time out;
* a :class:`heddle.JobAborted` that reaches the top of another worker is reported in one line
  (the origin's traceback is printed once, by the origin, and ``heddle run`` repeats its
  summary once), and the worker still exits with status 1.
"""

from __future__ import annotations

import sys
import traceback
from types import TracebackType

from heddle._heddle import comm as _comm
from heddle.errors import JobAborted

_installed = False


def install(rank: int) -> None:
    """Wraps ``sys.excepthook`` once for world rank ``rank``."""
    global _installed
    if _installed:
        return
    _installed = True
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if isinstance(value, JobAborted):
            origin = "another worker" if value.origin is None else f"rank {value.origin}"
            print(
                f"heddle: rank {rank} stopped: the job was aborted because {origin} failed "
                f"({value.kind})",
                file=sys.stderr,
            )
            return
        if not isinstance(value, KeyboardInterrupt):
            text = "".join(traceback.format_exception(kind, value, tb))
            _comm.abort_job_with(kind.__name__, text)
        previous(kind, value, tb)

    sys.excepthook = hook
