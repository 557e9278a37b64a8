"""mpi4py's ``Op`` for ``heddle.MPI``: the predefined reduction operators, ``MAXLOC`` and
``MINLOC`` on value-index pairs, and ``Op.Create`` for user functions.

An operator reduces three kinds of operands: buffers of a type Heddle reduces natively
(``SUM`` to ``BXOR`` on numbers go to Heddle's own collectives, in place); other buffers
(pairs, complex numbers, user operators) through ``fold`` on numpy arrays, in rank order;
and Python objects, by calling the operator (``MPI.SUM(a, b) == a + b``).
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from heddle._heddle import comm as _native
from heddle._mpi.errors import ERR_OP, Exception

UserFunction = Callable[[Any, Any, Any], Any]


class Op:
    """A reduction operator (mpi4py's ``Op``)."""

    def __init__(
        self,
        name: str = "MPI_OP_NULL",
        native: Any = None,
        objects: Callable[[Any, Any], Any] | None = None,
        arrays: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
        user: UserFunction | None = None,
        commute: bool = True,
    ) -> None:
        self._name = name
        self._native = native
        self._objects = objects
        self._arrays = arrays
        self._user = user
        self._commute = commute

    @classmethod
    def Create(cls, function: UserFunction, commute: bool = False) -> Op:
        """An operator applying ``function(inbuf, inoutbuf, datatype)``, which must
        combine ``inbuf`` (lower ranks) into ``inoutbuf`` in place."""
        if not callable(function):
            raise Exception(ERR_OP, f"Op.Create: {function!r} is not callable")
        return cls(
            f"user operator {getattr(function, '__name__', '?')}",
            user=function,
            commute=bool(commute),
        )

    def Free(self) -> None:
        if self.is_predefined:
            raise Exception(ERR_OP, f"cannot free the predefined operator {self._name}")
        self._user = None

    def Is_commutative(self) -> bool:
        return self._commute

    is_commutative = property(Is_commutative)

    def Is_predefined(self) -> bool:
        return self._user is None and self._objects is not None

    is_predefined = property(Is_predefined)

    @property
    def native(self) -> Any:
        """Heddle's native operator, or ``None`` when this one is applied in Python."""
        return self._native

    def __call__(self, x: Any, y: Any) -> Any:
        """Combines two objects (``x`` from the lower rank)."""
        if self._objects is not None:
            return self._objects(x, y)
        if self._user is None:
            raise Exception(ERR_OP, f"{self._name} has been freed")
        result = self._user(x, y, None)
        return y if result is None else result

    def fold(self, acc: np.ndarray, incoming: np.ndarray, datatype: Any) -> np.ndarray:
        """``acc`` (lower ranks) combined with ``incoming`` (the next rank), as arrays."""
        if self._arrays is not None:
            return self._arrays(acc, incoming)
        if self._user is None:
            raise Exception(ERR_OP, f"{self._name} cannot reduce buffers")
        out = incoming.copy()
        self._user(acc, out, datatype)
        return np.asarray(out)

    def fold_all(self, parts: list[np.ndarray], datatype: Any) -> np.ndarray:
        """Every rank's operand (``parts``, in rank order) combined in that order."""
        acc = parts[0]
        for part in parts[1:]:
            acc = self.fold(acc, part, datatype)
        return acc

    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        return self._objects is not None or self._user is not None

    def __repr__(self) -> str:
        return f"<heddle.MPI.Op {self._name}>"


def _is_array(x: Any) -> bool:
    return isinstance(x, np.ndarray) or hasattr(x, "__array_ufunc__")


def _typed(ufunc: Any) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """A numpy function whose result keeps the operands' type (logical ones give bool)."""

    def apply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.asarray(ufunc(a, b)).astype(a.dtype, copy=False)

    return apply


def _objects(scalar: Callable[[Any, Any], Any], ufunc: Any) -> Callable[[Any, Any], Any]:
    def apply(a: Any, b: Any) -> Any:
        if _is_array(a) or _is_array(b):
            return ufunc(a, b)
        return scalar(a, b)

    return apply


def _loc(better: Callable[[Any, Any], bool]) -> Callable[[Any, Any], Any]:
    """MAXLOC/MINLOC on ``(value, index)`` pairs: the better value, ties to the lower index."""

    def apply(a: Any, b: Any) -> Any:
        (va, ia), (vb, ib) = a, b
        if better(vb, va) or (vb == va and ib < ia):
            return b
        return a

    return apply


def _loc_arrays(pick_b: Callable[[Any, Any], Any]) -> Callable[[np.ndarray, np.ndarray], Any]:
    def apply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        va, vb = a["value"], b["value"]
        take = pick_b(vb, va) | ((vb == va) & (b["index"] < a["index"]))
        return np.where(take, b, a)

    return apply


def _predefined(name: str, native: Any, scalar: Callable[[Any, Any], Any], ufunc: Any) -> Op:
    return Op(f"MPI_{name}", native, _objects(scalar, ufunc), _typed(ufunc))


OP_NULL = Op()
SUM = _predefined("SUM", _native.SUM, operator.add, np.add)
PROD = _predefined("PROD", _native.PROD, operator.mul, np.multiply)
MAX = _predefined("MAX", _native.MAX, lambda a, b: b if b > a else a, np.maximum)
MIN = _predefined("MIN", _native.MIN, lambda a, b: b if b < a else a, np.minimum)
LAND = _predefined("LAND", _native.LAND, lambda a, b: bool(a) and bool(b), np.logical_and)
LOR = _predefined("LOR", _native.LOR, lambda a, b: bool(a) or bool(b), np.logical_or)
LXOR = _predefined("LXOR", None, lambda a, b: bool(a) != bool(b), np.logical_xor)
BAND = _predefined("BAND", _native.BAND, operator.and_, np.bitwise_and)
BOR = _predefined("BOR", _native.BOR, operator.or_, np.bitwise_or)
BXOR = _predefined("BXOR", _native.BXOR, operator.xor, np.bitwise_xor)
MAXLOC = Op("MPI_MAXLOC", None, _loc(operator.gt), _loc_arrays(np.greater))
MINLOC = Op("MPI_MINLOC", None, _loc(operator.lt), _loc_arrays(np.less))
REPLACE = Op("MPI_REPLACE", None, lambda a, b: b, lambda a, b: b)
NO_OP = Op("MPI_NO_OP", None, lambda a, b: a, lambda a, b: a)
