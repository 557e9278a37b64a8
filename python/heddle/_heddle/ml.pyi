"""Native kernels of machine-learning loops (see ``heddle.ml``)."""

from typing import Any

def nearest_sums_into(points: Any, centers: Any, dims: int, out: Any) -> None: ...
