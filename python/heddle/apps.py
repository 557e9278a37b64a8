"""heddle.apps: applications from the seeds as library entry points, run on the job's
ranks with Heddle's collectives.

:func:`mds` is DA-SMACOF multidimensional scaling (``heddle::apps::mds`` in Rust): every
rank passes the same dissimilarity matrix, keeps its block of rows, and gets the same
coordinates back. :func:`procrustes` turns one embedding onto another (MDS fixes
coordinates only up to a rotation or reflection), for sequences of embeddings such as
the segments of a time series. :func:`slam` is Rao-Blackwellized particle-filter SLAM of a
simulated robot (``heddle::apps::slam``), its particles spread over the ranks.
:func:`ad_benchmark` is the Yahoo streaming benchmark's pipeline over a Redis server
(``heddle::apps::ad_benchmark``).

>>> import numpy as np
>>> from heddle.apps import mds
>>> square = np.array([[0, 0], [1, 0], [1, 1], [0, 1]], dtype=float)
>>> d = np.sqrt(((square[:, None] - square[None]) ** 2).sum(-1))
>>> coords, stress = mds(d, dim=2)
>>> coords.shape, bool(stress < 1e-6)
((4, 2), True)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from heddle._heddle import apps as _apps

__all__ = ["AdBenchmarkReport", "SlamRun", "ad_benchmark", "mds", "procrustes", "slam"]

PathLike = str | os.PathLike[str]


def _matrix(m: np.ndarray | PathLike, what: str) -> tuple[np.ndarray, str]:
    """A square float64 C-order matrix from an array or a ``.npy`` file, and its name."""
    source = os.fspath(m) if isinstance(m, (str, os.PathLike)) else f"the {what} array"
    arr = np.load(source) if isinstance(m, (str, os.PathLike)) else np.asarray(m)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{source}: holds shape {arr.shape}; {what} must be a square matrix")
    if arr.dtype not in (np.float32, np.float64):
        raise ValueError(f"{source}: holds {arr.dtype} values; give float32 or float64")
    return np.ascontiguousarray(arr, dtype=np.float64), source


def mds(
    distances: np.ndarray | PathLike,
    dim: int = 3,
    weights: np.ndarray | PathLike | None = None,
    anneal: bool = True,
    max_iter: int = 300,
    tol: float = 1e-6,
    init: np.ndarray | None = None,
    seed: int = 1,
    comm: Any | None = None,
) -> tuple[np.ndarray, float]:
    """Embeds the points whose dissimilarities ``distances`` holds (an ``n × n`` array or
    ``.npy`` file: float32 or float64, symmetric, zero diagonal, finite, non-negative) in
    ``dim`` dimensions by DA-SMACOF; returns the ``n × dim`` coordinates and their
    normalized stress ``Σ w (d − δ)² / Σ w δ²``.

    ``weights`` (same shape, symmetric, non-negative; all 1 if ``None``) weigh the pairs;
    ``anneal`` runs deterministic annealing first (from a random start); the final fit
    stops when the stress falls by less than ``tol`` (relative) or after ``max_iter``
    transforms; ``init`` (``n × dim``) starts from given coordinates instead of a random
    start from ``seed``. Collective over ``comm`` (the world by default): every rank calls
    it with the same matrix, computes its rows, and receives the same result. A bad
    matrix raises ``heddle.ArgumentError`` naming the entry."""
    if comm is None:
        import heddle

        comm = heddle.init()
    delta, source = _matrix(distances, "distances")
    n = delta.shape[0]
    w = None
    if weights is not None:
        w, wsource = _matrix(weights, "weights")
        if w.shape != delta.shape:
            raise ValueError(f"{wsource}: weights of shape {w.shape} for {n} × {n} distances")
    start = None
    if init is not None:
        start = np.ascontiguousarray(init, dtype=np.float64)
        if start.shape != (n, dim):
            raise ValueError(f"init of shape {start.shape}; give {n} × {dim} coordinates")
    out = np.empty((n, dim))
    stress, _, _ = _apps.mds_into(
        comm, delta, n, source, w, start, out, dim, anneal, max_iter, tol, seed
    )
    return out, stress


def procrustes(coords: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``coords`` (``n × dim``) centred and turned (rotated, or reflected) onto
    ``reference`` (the same shape), distances kept: the orthogonal ``R`` minimizing
    ``‖(X − x̄) R − (Y − ȳ)‖`` by the SVD of ``(X − x̄)ᵀ (Y − ȳ)``; the result is
    centred on ``reference``'s centroid.

    >>> import numpy as np
    >>> y = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 1.0]])
    >>> turned = y @ np.array([[0.0, -1.0], [1.0, 0.0]]) + 5.0
    >>> bool(np.allclose(procrustes(turned, y), y))
    True
    """
    x = np.asarray(coords, dtype=np.float64)
    y = np.asarray(reference, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 2:
        raise ValueError(f"procrustes: coords {x.shape} and reference {y.shape} differ")
    xc, yc = x - x.mean(0), y - y.mean(0)
    u, _, vt = np.linalg.svd(xc.T @ yc)
    result: np.ndarray = xc @ (u @ vt) + y.mean(0)
    return result


@dataclass(frozen=True)
class SlamRun:
    """What :func:`slam` found. On rank 0 every field is filled; the other ranks get empty
    arrays, ``nan`` errors and no map.

    ``scans`` numbers the scans used, in order; ``poses``, ``truth`` and ``odometry`` are
    ``len(scans) × 3`` arrays of (x, y, θ) in metres and radians: the estimate after each
    scan, the simulator's true pose, and dead reckoning (the odometer's reading);
    ``missing`` counts scans that never arrived and ``out_of_order`` those that arrived
    after a newer one (dropped); ``latencies_ms`` runs from each scan's release to its
    estimate; ``map`` is the heaviest particle's occupancy map as log-odds (``int8``, row
    ``j`` is ``y = j × 0.05`` m: positive walls, negative free, 0 unseen)."""

    scans: np.ndarray
    poses: np.ndarray
    truth: np.ndarray
    odometry: np.ndarray
    latencies_ms: np.ndarray
    rmse_m: float
    odometry_rmse_m: float
    resamples: int
    missing: int
    out_of_order: int
    map: np.ndarray | None


def slam(
    particles: int = 100,
    beams: int = 180,
    scans: int = 200,
    rate_hz: float = 10.0,
    max_range: float = 8.0,
    seed: int = 1,
    lose: float = 0.0,
    reorder: float = 0.0,
    comm: Any | None = None,
) -> SlamRun:
    """Particle-filter SLAM of a simulated robot: rank 0 streams ``scans`` laser scans of
    ``beams`` beams at ``rate_hz`` per second (0: as fast as they are done), the
    ``particles`` are split over the ranks, each moved by the odometry, matched to its own
    map and weighed; weights and poses are gathered every scan and maps move between ranks
    at resampling. ``lose`` and ``reorder`` are the chances that the simulated network
    loses a scan or delivers it after the next one. Collective over ``comm`` (the world by
    default): every rank calls it with the same arguments. Bad settings raise
    ``heddle.ArgumentError`` naming them.

    >>> from heddle.apps import slam
    >>> run = slam(particles=8, beams=90, scans=20, rate_hz=0)
    >>> run.poses.shape, bool(run.rmse_m < run.odometry_rmse_m)
    ((20, 3), True)
    """
    if comm is None:
        import heddle

        comm = heddle.init()
    used, poses, truth, odo, ms, (rmse, odo_rmse), counts, cells = _apps.slam_run(
        comm, particles, beams, scans, float(rate_hz), float(max_range), seed, lose, reorder
    )
    grid = None
    if cells is not None:
        side = round(len(cells) ** 0.5)
        grid = np.frombuffer(cells, dtype=np.int8).reshape(side, side).copy()

    def as3(v: list[float]) -> np.ndarray:
        return np.asarray(v, dtype=np.float64).reshape(-1, 3)

    first = grid is not None
    return SlamRun(
        scans=np.asarray(used, dtype=np.int64),
        poses=as3(poses),
        truth=as3(truth),
        odometry=as3(odo),
        latencies_ms=np.asarray(ms, dtype=np.float64),
        rmse_m=rmse if first else float("nan"),
        odometry_rmse_m=odo_rmse if first else float("nan"),
        resamples=counts[0],
        missing=counts[1],
        out_of_order=counts[2],
        map=grid,
    )


@dataclass(frozen=True)
class AdBenchmarkReport:
    """What :func:`ad_benchmark` measured and checked (on rank 0): the events produced and
    read, the ``view`` events among them, the (campaign, window) results written, the
    throughput (events over the time from the first event to the job's end), the lag of
    the window results that fired while events flowed (ms, ``None`` when none did), the
    job's seconds, and whether every window count equals the generator's own tally."""

    events: int
    views: int
    windows: int
    throughput_eps: float
    latency_p50_ms: int | None
    latency_p99_ms: int | None
    job_s: float
    correct: bool


def ad_benchmark(
    redis: str,
    rate: float = 10_000.0,
    seconds: float = 30.0,
    campaigns: int = 100,
    ads_per_campaign: int = 10,
    window_s: float = 10.0,
    key: str = "ad-events",
    output_key: str = "ad-counts",
    seed: int = 1,
    comm: Any | None = None,
) -> AdBenchmarkReport | None:
    """The Yahoo streaming benchmark's pipeline against the Redis server at ``redis``
    (``redis://host:port/``): rank 0 produces ``rate`` JSON ad events per second for
    ``seconds`` into the stream ``key``; a native Heddle stream on every rank filters the
    views, joins them with the campaign table (the hash ``KEY:campaigns``), counts them per
    campaign in ``window_s`` event-time windows and writes ``campaign start count lag_ms``
    lines to ``output_key``; rank 0 then checks them against its tally. Collective over
    ``comm`` (the world by default); the report on rank 0, ``None`` elsewhere. An
    unreachable server raises ``heddle.DataError`` naming it. The Python-API version of the
    same pipeline is ``examples/python/ad_benchmark.py``."""
    if comm is None:
        import heddle

        comm = heddle.init()
    r = _apps.ad_benchmark_run(
        comm, redis, rate, seconds, campaigns, ads_per_campaign, window_s, key, output_key, seed
    )
    return None if r is None else AdBenchmarkReport(*r)
