"""``MPI.Exception`` and the error classes of ``heddle.MPI`` (Open MPI's numbering, as
mpi4py shows it), and the translation of Heddle's own errors into them.

A Heddle error raised inside an ``heddle.MPI`` call surfaces as ``MPI.Exception`` with
the matching error class, its text prefixed as MPI prints it
(``MPI_ERR_TRUNCATE: message truncated: ...``) and the Heddle error kept as
``__cause__``.
"""

from __future__ import annotations

import builtins
import functools
from typing import Any, Callable, TypeVar

from heddle.errors import HeddleError, JobAborted, TimeoutError, WorkerFailed

SUCCESS = 0
ERR_BUFFER = 1
ERR_COUNT = 2
ERR_TYPE = 3
ERR_TAG = 4
ERR_COMM = 5
ERR_RANK = 6
ERR_REQUEST = 7
ERR_ROOT = 8
ERR_GROUP = 9
ERR_OP = 10
ERR_TOPOLOGY = 11
ERR_DIMS = 12
ERR_ARG = 13
ERR_UNKNOWN = 14
ERR_TRUNCATE = 15
ERR_OTHER = 16
ERR_INTERN = 17
ERR_IN_STATUS = 18
ERR_PENDING = 19
ERR_UNSUPPORTED_OPERATION = 52
ERR_PROC_ABORTED = 92
ERR_LASTCODE = 92

_STRINGS = {
    SUCCESS: "MPI_SUCCESS: no errors",
    ERR_BUFFER: "MPI_ERR_BUFFER: invalid buffer pointer",
    ERR_COUNT: "MPI_ERR_COUNT: invalid count argument",
    ERR_TYPE: "MPI_ERR_TYPE: invalid datatype",
    ERR_TAG: "MPI_ERR_TAG: invalid tag",
    ERR_COMM: "MPI_ERR_COMM: invalid communicator",
    ERR_RANK: "MPI_ERR_RANK: invalid rank",
    ERR_REQUEST: "MPI_ERR_REQUEST: invalid request",
    ERR_ROOT: "MPI_ERR_ROOT: invalid root",
    ERR_GROUP: "MPI_ERR_GROUP: invalid group",
    ERR_OP: "MPI_ERR_OP: invalid reduce operation",
    ERR_ARG: "MPI_ERR_ARG: invalid argument of some other kind",
    ERR_UNKNOWN: "MPI_ERR_UNKNOWN: unknown error",
    ERR_TRUNCATE: "MPI_ERR_TRUNCATE: message truncated",
    ERR_OTHER: "MPI_ERR_OTHER: known error not in list",
    ERR_INTERN: "MPI_ERR_INTERN: internal error",
    ERR_IN_STATUS: "MPI_ERR_IN_STATUS: error code is in status",
    ERR_PENDING: "MPI_ERR_PENDING: pending request",
    ERR_UNSUPPORTED_OPERATION: "MPI_ERR_UNSUPPORTED_OPERATION: operation not supported",
    ERR_PROC_ABORTED: "MPI_ERR_PROC_ABORTED: Process aborted",
}


def Get_error_string(errorcode: int) -> str:
    """The text of an error class."""
    return _STRINGS.get(errorcode, f"MPI_ERR_UNKNOWN: unknown error code {errorcode}")


def Get_error_class(errorcode: int) -> int:
    """The class of an error code (Heddle's codes are their own classes)."""
    return errorcode


class Exception(builtins.RuntimeError):
    """An MPI error (mpi4py's ``MPI.Exception``): ``error_class``, ``error_code`` and
    ``Get_error_string()``; the text says what went wrong and, where Heddle knows, what
    to do."""

    def __init__(self, ierr: int = SUCCESS, detail: str | None = None) -> None:
        self.error_code = int(ierr)
        self.detail = detail
        super().__init__(self.error_code)

    @property
    def error_class(self) -> int:
        return self.error_code

    @property
    def error_string(self) -> str:
        return Get_error_string(self.error_code)

    def Get_error_code(self) -> int:
        return self.error_code

    def Get_error_class(self) -> int:
        return self.error_code

    def Get_error_string(self) -> str:
        return self.error_string

    def __int__(self) -> int:
        return self.error_code

    def __eq__(self, other: object) -> bool:
        if isinstance(other, int):
            return self.error_code == other
        return builtins.RuntimeError.__eq__(self, other)

    __hash__ = builtins.RuntimeError.__hash__

    def __str__(self) -> str:
        head = self.error_string
        return f"{head}: {self.detail}" if self.detail else head

    def __repr__(self) -> str:
        return f"MPI.Exception({self.error_code})"


_BY_VARIANT = {
    "Truncated": ERR_TRUNCATE,
    "TypeMismatch": ERR_TYPE,
    "CollectiveMismatch": ERR_OTHER,
    "Timeout": ERR_PENDING,
    "PeerLost": ERR_PROC_ABORTED,
    "Aborted": ERR_PROC_ABORTED,
    "Wire": ERR_INTERN,
    "Io": ERR_OTHER,
}


def error_class_of(e: HeddleError) -> int:
    """The MPI error class of a Heddle error."""
    variant = getattr(e, "variant", None)
    if variant in _BY_VARIANT:
        return _BY_VARIANT[variant]
    if isinstance(e, (WorkerFailed, JobAborted)):
        return ERR_PROC_ABORTED
    if isinstance(e, TimeoutError):
        return ERR_PENDING
    text = str(e)
    for word, code in (
        ("root", ERR_ROOT),
        ("tag", ERR_TAG),
        ("rank", ERR_RANK),
        ("dest", ERR_RANK),
        ("source", ERR_RANK),
        ("buffer", ERR_BUFFER),
        ("buf", ERR_BUFFER),
        ("count", ERR_COUNT),
        ("dtype", ERR_TYPE),
        ("op ", ERR_OP),
    ):
        if word in text:
            return code
    return ERR_ARG if isinstance(e, ValueError) else ERR_OTHER


F = TypeVar("F", bound=Callable[..., Any])


def mpi_errors(f: F) -> F:
    """Raises Heddle's errors from ``f`` as ``MPI.Exception`` (the original as cause)."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except HeddleError as e:
            raise Exception(error_class_of(e), str(e)) from e

    return wrapper  # type: ignore[return-value]
