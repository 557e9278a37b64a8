"""Native kernels of machine-learning loops (see ``heddle.ml``)."""

from typing import Any

__all__ = ["nearest_sums_into"]

def nearest_sums_into(points: Any, centers: Any, dims: int, out: Any) -> None: ...
