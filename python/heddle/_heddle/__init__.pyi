"""Type stubs of the native core ``heddle._heddle`` (crates/heddle-python): the version,
the exception classes of ``heddle.errors``, the launcher and the record decoder; the rest is
in its submodules ``comm``, ``task``, ``bridge``, ``ml``, ``apps`` and ``data`` (one stub
each, beside this one).

Use the public names from ``heddle`` / ``heddle.comm`` / ``heddle.task`` / ``heddle.data``;
this package is their implementation. The extension module is not a package: it adds its
submodules to ``sys.modules`` (``import heddle._heddle.comm`` works once it is loaded).
"""

import builtins
import os
from typing import Any, Final

from heddle._heddle import (
    apps as apps,
    bridge as bridge,
    comm as comm,
    data as data,
    ml as ml,
    task as task,
)

# The module's own `__all__` (pyo3 lists every name it adds).
__all__ = [
    "__version__",
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
    "_error_mapping",
    "_decode_record",
    "run_job",
    "check_setting",
    "read_config",
    "comm",
    "task",
    "bridge",
    "ml",
    "apps",
    "data",
]

__version__: Final[str]

# The exception classes of `heddle.errors` (documented there), made by this module.
class HeddleError(Exception): ...
class ConfigError(HeddleError, ValueError): ...
class ArgumentError(HeddleError, ValueError, TypeError): ...
class CommError(HeddleError): ...
class TimeoutError(CommError, builtins.TimeoutError): ...

class WorkerFailed(CommError):
    rank: int | None

class LaunchError(HeddleError): ...
class GraphError(HeddleError, ValueError): ...
class PlanError(HeddleError): ...
class TaskError(HeddleError): ...
class DataError(HeddleError): ...

class JobAborted(HeddleError):
    origin: int | None
    task: str | None
    kind: str | None

def _error_mapping() -> list[tuple[str, str, type[BaseException] | None]]:
    """``(layer, variant, class)`` for a sample of every variant of every layer's Rust
    error: the class it is raised as (``None``: the variant has no sample)."""

def _decode_record(data: bytes, key: bool = False) -> Any: ...

# --- the launcher (heddle run; cli.py) -------------------------------------------------

def run_job(
    workers: int,
    command: list[str],
    env: list[tuple[str, str]] | None = None,
    init_timeout: float = 60.0,
    master_bind: str | None = None,
    kill_grace: float = 2.0,
    restarts: int = 0,
    heartbeat_interval: float | None = None,
    heartbeat_timeout: float | None = None,
    launcher: str = "local",
    launcher_args: list[str] | None = None,
    allocate: str | None = None,
    dashboard: str = "127.0.0.1:0",
    progress: str = "auto",
    mpi4py: bool = False,
) -> int:
    """Runs ``command`` as ``workers`` processes (``heddle run``), on this machine or through
    ``mpirun``/Slurm (``launcher``); returns the exit code."""

def check_setting(name: str, value: str) -> None:
    """Checks ``value`` of the ``HEDDLE_*`` setting ``name`` as workers would; raises
    ``ConfigError`` naming the variable, the value and what is valid."""

def read_config(path: str | os.PathLike[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Reads a ``heddle run --config`` file: the options it sets (as arguments) and its
    ``HEDDLE_*`` settings; raises ``ConfigError`` naming the file, line and key."""
