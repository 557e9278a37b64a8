"""Heddle for Python: MPI-style collectives, task graphs and data sets on the Heddle
runtime.

Run a script on 4 local workers with ``heddle run -n 4 script.py`` (or
``python -m heddle run -n 4 script.py``); in it::

    import numpy as np
    import heddle

    comm = heddle.init()              # the world communicator (a world of one without a launcher)
    x = np.arange(4, dtype=np.float64) * comm.rank
    comm.Allreduce(heddle.IN_PLACE, x, op=heddle.SUM)

The communication API lives in :mod:`heddle.comm` (close to mpi4py; its names are also
exported here); task graphs of Python tasks in :mod:`heddle.task`; lazy distributed data
sets and streams in :mod:`heddle.data` (both imported on first use); errors in
:mod:`heddle.errors`, all subclasses of :class:`HeddleError`.
"""

from __future__ import annotations

import importlib
from typing import Any

from heddle import errors as _errors
from heddle._heddle import __version__
from heddle.comm import (
    BAND,
    BOR,
    BXOR,
    IN_PLACE,
    LAND,
    LOR,
    MAX,
    MIN,
    PROD,
    SUM,
    UNDEFINED,
    Comm,
    Op,
    init,
    is_initialized,
)
from heddle.errors import *  # noqa: F403 (the exception classes: heddle.errors.__all__)

__all__ = [
    "__version__",
    "init",
    "is_initialized",
    "Comm",
    "Op",
    "IN_PLACE",
    "UNDEFINED",
    "SUM",
    "PROD",
    "MAX",
    "MIN",
    "LAND",
    "LOR",
    "BAND",
    "BOR",
    "BXOR",
]
# The form type checkers and linters follow (PEP 484's `__all__ += submodule.__all__`).
__all__ += _errors.__all__

#: Submodules loaded on first attribute access.
_LAZY_SUBMODULES = ("task", "data", "apps")


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"heddle.{name}")
    raise AttributeError(f"module 'heddle' has no attribute {name!r}")
