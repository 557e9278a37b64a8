"""Applications from the seeds (see ``heddle.apps``)."""

from typing import Any

from heddle._heddle.comm import Comm

__all__ = ["ad_benchmark_run", "mds_into", "slam_run"]

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
def slam_run(
    comm: Comm,
    particles: int,
    beams: int,
    scans: int,
    rate_hz: float,
    max_range: float,
    seed: int,
    lose: float,
    reorder: float,
) -> tuple[
    list[int],
    list[float],
    list[float],
    list[float],
    list[float],
    tuple[float, float],
    tuple[int, int, int],
    bytes | None,
]: ...
def ad_benchmark_run(
    comm: Comm,
    redis: str,
    rate: float,
    seconds: float,
    campaigns: int,
    ads_per_campaign: int,
    window_s: float,
    key: str,
    output_key: str,
    seed: int,
) -> tuple[int, int, int, float, int | None, int | None, float, bool] | None: ...
