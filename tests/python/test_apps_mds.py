"""The MDS application (``heddle::apps::mds``, ``target/release/examples/mds``) under
``heddle run``, against scikit-learn's ``MDS(metric=True, n_init=1)`` on the same
dissimilarities: the stress it reports is the stress of the coordinates it writes (by
numpy), and no worse than scikit-learn's; bad matrices are refused naming the entry."""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
MDS = ROOT / "target" / "release" / "examples" / "mds"
HEDDLE = ROOT / "target" / "release" / "heddle"


def distances(points: np.ndarray) -> np.ndarray:
    d = np.sqrt(((points[:, None, :] - points[None, :, :]) ** 2).sum(-1))
    np.fill_diagonal(d, 0.0)
    return (d + d.T) / 2


def clustered(n: int, seed: int) -> np.ndarray:
    """Points in 8 dimensions around 5 centres: distances no 3-D embedding fits exactly."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(5, 8)) * 4
    return centres[rng.integers(0, 5, n)] + rng.normal(size=(n, 8))


def normalized_stress(coords: np.ndarray, delta: np.ndarray, w: np.ndarray | None = None) -> float:
    w = np.ones_like(delta) if w is None else w
    return float((w * (distances(coords) - delta) ** 2).sum() / (w * delta**2).sum())


def run_mds(n: int, *args: str) -> subprocess.CompletedProcess:
    if not MDS.exists():
        pytest.skip("LOUD SKIP: target/release/examples/mds is not built (make build)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEDDLE_")}
    return subprocess.run(
        [str(HEDDLE), "run", "-n", str(n), "--", str(MDS), *args],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def report(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done
    lines = [ln.split("] ", 1)[1] for ln in done.stdout.splitlines() if "] {" in ln]
    return json.loads(lines[0])


@pytest.mark.parametrize("workers, dtype", [(1, np.float64), (2, np.float32), (3, np.float64)])
def test_stress_is_no_worse_than_scikit_learn(workers, dtype, tmp_path):
    from sklearn.manifold import MDS as SkMDS

    delta = distances(clustered(240, seed=workers))
    np.save(tmp_path / "d.npy", delta.astype(dtype))
    rep = report(
        run_mds(workers, "--input", str(tmp_path / "d.npy"), "--output", str(tmp_path / "x.npy"))
    )
    coords = np.load(tmp_path / "x.npy")
    assert coords.shape == (240, 3) and rep["points"] == 240 and rep["workers"] == workers
    delta = delta.astype(dtype).astype(np.float64)
    ours = normalized_stress(coords, delta)
    assert abs(ours - rep["stress"]) <= 1e-6 * ours + 1e-12, (ours, rep)
    # MDS(metric=True, n_init=1) in scikit-learn 1.9's words, from a random start.
    sk = SkMDS(
        n_components=3,
        metric_mds=True,
        metric="precomputed",
        n_init=1,
        init="random",
        random_state=0,
        normalized_stress=False,
    ).fit_transform(delta)
    theirs = normalized_stress(sk, delta)
    assert ours <= theirs * 1.001, (ours, theirs)
    assert not list(tmp_path.glob(".*pending*")), "a temporary output file was left"


def test_points_in_three_dimensions_are_found_again(tmp_path):
    points = np.random.default_rng(4).normal(size=(150, 3))
    delta = distances(points)
    np.save(tmp_path / "d.npy", delta)
    rep = report(
        run_mds(2, "--input", str(tmp_path / "d.npy"), "--output", str(tmp_path / "x.npy"))
    )
    assert rep["stress"] < 1e-8, rep


def test_weights_count_as_given(tmp_path):
    """Zero weights leave pairs out; the stress reported is the weighted one."""
    rng = np.random.default_rng(8)
    delta = distances(clustered(120, seed=8))
    w = (rng.random(delta.shape) < 0.7).astype(np.float64)
    w = np.triu(w, 1)
    w = w + w.T
    np.save(tmp_path / "d.npy", delta)
    np.save(tmp_path / "w.npy", w)
    args = ["--input", str(tmp_path / "d.npy"), "--weights", str(tmp_path / "w.npy")]
    rep = report(run_mds(2, *args, "--output", str(tmp_path / "x.npy")))
    coords = np.load(tmp_path / "x.npy")
    ours = normalized_stress(coords, delta, w)
    assert abs(ours - rep["stress"]) <= 1e-6 * ours, (ours, rep)
    # All weights 1 through the weighted path (conjugate gradients) is the unweighted fit.
    np.save(tmp_path / "ones.npy", np.ones_like(delta))
    ones = ["--input", str(tmp_path / "d.npy"), "--weights", str(tmp_path / "ones.npy")]
    plain = report(run_mds(2, "--input", str(tmp_path / "d.npy")))
    weighted = report(run_mds(2, *ones))
    assert abs(plain["stress"] - weighted["stress"]) <= 1e-4 * plain["stress"], (plain, weighted)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda d: d[:, :-1], "is 20 × 19; a dissimilarity matrix is square"),
        (lambda d: d.__setitem__((3, 5), d[3, 5] + 1) or d, "distances[3, 5] = "),
        (lambda d: d.__setitem__((4, 4), 1.0) or d, "distances[4, 4] = 1: the diagonal"),
        (lambda d: d.__setitem__((2, 7), np.nan) or d, "distances[2, 7] = NaN: entries must"),
        (lambda d: -d, "entries must be finite and non-negative"),
        (lambda d: d.astype(np.int64), "holds '<i8' values; give float32 or float64"),
    ],
)
def test_bad_matrices_are_refused_naming_the_entry(damage, message, tmp_path):
    d = damage(distances(clustered(20, seed=1)).copy())
    np.save(tmp_path / "d.npy", d)
    done = run_mds(2, "--input", str(tmp_path / "d.npy"), "--output", str(tmp_path / "x.npy"))
    assert done.returncode != 0, done
    assert f"{tmp_path / 'd.npy'}: " in done.stderr and message in done.stderr, done.stderr
    assert not (tmp_path / "x.npy").exists()


@pytest.mark.parametrize("weighted", [False, True])
def test_python_entry_point_is_the_rust_one(weighted, tmp_path):
    """heddle.apps.mds under heddle run: the same stress as the Rust example on the same
    matrix, and the stress of the coordinates it returns."""
    from conftest import run_job

    delta = distances(clustered(160, seed=11))
    np.save(tmp_path / "d.npy", delta)
    extra, rust_extra, w = [], [], None
    if weighted:
        w = np.triu((np.random.default_rng(2).random(delta.shape) < 0.8).astype(float), 1)
        w = w + w.T
        np.save(tmp_path / "w.npy", w)
        extra, rust_extra = [str(tmp_path / "w.npy")], ["--weights", str(tmp_path / "w.npy")]
    job = run_job(2, "apps_mds.py", str(tmp_path / "d.npy"), str(tmp_path / "x.npy"), *extra)
    assert job.returncode == 0, job
    rep = job.reports[0]
    coords = np.load(tmp_path / "x.npy")
    assert abs(normalized_stress(coords, delta, w) - rep["stress"]) <= 1e-6 * rep["stress"]
    rust = report(run_mds(2, "--input", str(tmp_path / "d.npy"), *rust_extra))
    assert abs(rust["stress"] - rep["stress"]) <= 1e-6 * rep["stress"], (rust, rep)


def test_python_bad_matrix_names_the_entry():
    import heddle
    from heddle.apps import mds

    d = distances(clustered(10, seed=3))
    d[2, 6] = -1.0
    with pytest.raises(heddle.ArgumentError, match=r"the distances array: distances\[2, 6\] = -1"):
        mds(d, comm=heddle.init())
    with pytest.raises(ValueError, match="must be a square matrix"):
        mds(d[:, :5])


def test_python_example(tmp_path):
    """examples/python/mds.py: its JSON line, its check, the coordinates it writes."""
    from conftest import run_job

    delta = distances(clustered(100, seed=5))
    np.save(tmp_path / "d.npy", delta)
    example = ROOT / "examples" / "python" / "mds.py"
    args = ["--input", str(tmp_path / "d.npy"), "--output", str(tmp_path / "x.npy")]
    job = run_job(2, str(example), *args)
    assert job.returncode == 0, job
    rep = job.reports[0]
    assert rep["ok"] is True and rep["api"] == "python" and rep["points"] == 100, rep
    assert abs(normalized_stress(np.load(tmp_path / "x.npy"), delta) - rep["stress"]) <= 1e-9
    assert not list(tmp_path.glob("*pending*")), "a temporary output file was left"


def test_procrustes_against_scipy():
    """heddle.apps.procrustes turns coordinates onto a reference as scipy's orthogonal
    Procrustes does; its doctests hold."""
    import doctest

    from scipy.linalg import orthogonal_procrustes

    import heddle.apps
    from heddle.apps import procrustes

    assert doctest.testmod(heddle.apps).failed == 0
    rng = np.random.default_rng(6)
    y = rng.normal(size=(50, 3))
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    x = (y + rng.normal(scale=0.05, size=y.shape)) @ q + 7.0
    got = procrustes(x, y)
    xc, yc = x - x.mean(0), y - y.mean(0)
    r, _ = orthogonal_procrustes(xc, yc)
    assert np.allclose(got, xc @ r + y.mean(0))
    assert np.allclose(distances(got), distances(x))  # distances kept


def test_time_series_workflow(tmp_path):
    """examples/python/mds_timeseries.py: windows of a price series, each started from the
    previous one and aligned; its check holds and it draws the trajectories."""
    from conftest import run_job

    example = ROOT / "examples" / "python" / "mds_timeseries.py"
    args = ["--assets", "50", "--days", "360", "--window", "120", "--step", "60"]
    args += ["--output", str(tmp_path / "w"), "--plot", str(tmp_path / "t.png")]
    job = run_job(2, str(example), *args)
    assert job.returncode == 0, job
    rep = job.reports[0]
    assert rep["ok"] is True and rep["windows"] == 5 and len(rep["stress"]) == 5, rep
    assert rep["moved_aligned"] <= rep["moved_unaligned"] + 1e-9, rep
    assert len(list((tmp_path / "w").glob("coords-*.npy"))) == 5
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
