"""The ``mpi4py`` package of a job started with ``heddle run --mpi4py``.

The launcher puts a package ``mpi4py`` first on the workers' ``PYTHONPATH`` (in the job's
private directory) whose ``__init__.py`` calls :func:`install`; from then on
``from mpi4py import MPI`` and ``import mpi4py.MPI`` give :mod:`heddle.MPI`. Only that
job's processes see it: an mpi4py installed on the machine stays as it is elsewhere.
"""

from __future__ import annotations

import sys
import types
from typing import Any

#: The mpi4py release whose API heddle.MPI follows.
MPI4PY_VERSION = "4.0.0"


class _Rc:
    """``mpi4py.rc``: settings read before MPI starts; accepted, Heddle needs none."""

    def __init__(self) -> None:
        self.initialize = True
        self.threads = True
        self.thread_level = "multiple"
        self.finalize: Any = None
        self.fast_reduce = True
        self.recv_mprobe = True
        self.errors = "exception"

    def __call__(self, **kwargs: Any) -> None:
        for k, v in kwargs.items():
            setattr(self, k, v)


def install(name: str) -> None:
    """Makes the package ``name`` (``mpi4py``) answer with Heddle's modules."""
    package = sys.modules[name]
    package.__version__ = MPI4PY_VERSION  # type: ignore[attr-defined]
    package.rc = _Rc()  # type: ignore[attr-defined]
    mpi = _lazy(f"{name}.MPI", "heddle.MPI")
    package.MPI = mpi  # type: ignore[attr-defined]


def _lazy(alias: str, target: str) -> types.ModuleType:
    """Imports ``target`` and registers it as ``alias`` too."""
    import importlib

    module = importlib.import_module(target)
    sys.modules[alias] = module
    return module
