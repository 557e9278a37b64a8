"""The MDS workload's data and check: a seeded dissimilarity matrix (``.npy``) and the
normalized stress of a system's coordinates, recomputed the same way for every system
(re-exported by reference.py, which the peers import)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

MDS_DIM = 3


def generate_distances(path: str | os.PathLike, n: int, seed: int = 1) -> Path:
    """Euclidean distances of ``n`` points in 8 Gaussian clusters in 10 dimensions, as a
    float64 ``.npy``: dissimilarities no 3-D embedding fits exactly."""
    path = Path(path)
    if path.exists():
        return path
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(8, 10)) * 5
    x = centres[rng.integers(0, 8, n)] + rng.normal(size=(n, 10))
    sq = (x * x).sum(1)
    d = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2 * x @ x.T, 0.0))
    np.fill_diagonal(d, 0.0)
    d = (d + d.T) / 2
    tmp = path.with_name(path.name + ".tmp.npy")
    np.save(tmp, d)
    tmp.rename(path)
    return path


def normalized_stress(coords: np.ndarray, delta: np.ndarray) -> float:
    """``Σ (d − δ)² / Σ δ²`` of ``coords`` against the dissimilarities ``delta``."""
    sq = (coords * coords).sum(1)
    d = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2 * coords @ coords.T, 0.0))
    np.fill_diagonal(d, 0.0)
    return float(((d - delta) ** 2).sum() / (delta**2).sum())


def check_mds(coords_path: str | os.PathLike, distances: str | os.PathLike) -> tuple[bool, str]:
    """The coordinates written (``n × 3``): their normalized stress, recomputed here (the
    same formula for every system; the table's ``detail`` shows it)."""
    delta = np.load(distances)
    try:
        coords = np.load(coords_path)
    except OSError as e:
        return False, f"no coordinates: {e}"
    if coords.shape != (len(delta), MDS_DIM) or not np.isfinite(coords).all():
        return False, f"coordinates of shape {coords.shape}, want {(len(delta), MDS_DIM)}"
    return True, f"normalized stress {normalized_stress(coords, delta):.4e}"
