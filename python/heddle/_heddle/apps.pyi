"""Applications from the seeds (see ``heddle.apps``)."""

from typing import Any

from heddle._heddle.comm import Comm

__all__ = ["mds_into"]

def mds_into(
    comm: Comm,
    distances: Any,
    n: int,
    source: str,
    weights: Any | None,
    init: Any | None,
    out: Any,
    dim: int,
    anneal: bool,
    max_iter: int,
    tol: float,
    seed: int,
) -> tuple[float, int, int]: ...
