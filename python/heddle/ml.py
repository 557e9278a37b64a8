"""heddle.ml: native kernels for the machine-learning loops people write over
:mod:`heddle.data`, each one pass over a block of records with the GIL released.

>>> import numpy as np
>>> from heddle.ml import nearest_sums
>>> points = np.array([[0.0, 1.0], [9.0, 0.0], [1.0, 0.0]])
>>> nearest_sums(points, np.array([[0.0, 0.0], [10.0, 0.0]]))
array([[1., 1., 2.],
       [9., 0., 1.]])
"""

from __future__ import annotations

import numpy as np

from heddle._heddle import ml as _ml

__all__ = ["nearest_sums"]


def nearest_sums(points: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """Lloyd's step of K-means over a block: for each of the ``k`` ``centers`` (``k × d``),
    the sum of the ``points`` (``n × d``) nearest to it (squared Euclidean distance; ties
    go to the first center, as ``argmin`` has them) and their count, as a ``k × (d + 1)``
    float64 array. Partial results of blocks add up (``np.add``), so a data set of blocks
    maps to them and reduces. One pass over the points, where numpy would build the
    ``n × k`` distance matrix."""
    points = np.ascontiguousarray(points, dtype=np.float64)
    centers = np.ascontiguousarray(centers, dtype=np.float64)
    if points.ndim != 2 or centers.ndim != 2 or points.shape[1] != centers.shape[1]:
        raise ValueError(
            f"nearest_sums: points {points.shape} and centers {centers.shape} must be 2-D "
            "with as many columns"
        )
    if len(centers) == 0:
        raise ValueError("nearest_sums: at least one center")
    out = np.zeros((len(centers), centers.shape[1] + 1))
    _ml.nearest_sums_into(points, centers, centers.shape[1], out)
    return out
