"""heddle.apps.slam (``heddle::apps::slam``) under ``heddle run`` on 2 processes: the
errors it reports are the errors numpy computes from the poses it returns against the
simulator's truth; the path follows the truth while dead reckoning drifts; the map's wall
cells lie along the path's view (a sanity check by numpy); bad settings name the setting."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import heddle
from heddle.apps import slam

ROOT = Path(__file__).resolve().parents[2]
HEDDLE = ROOT / "target" / "release" / "heddle"
JOB = Path(__file__).resolve().parent / "jobs" / "apps_slam.py"


def job(out: Path, scans: int, lose: float = 0.0) -> dict:
    if not HEDDLE.exists():
        pytest.skip("LOUD SKIP: target/release/heddle is not built (make build)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEDDLE_")}
    args = [str(scans), "12", str(out), str(lose)]
    cmd = [str(HEDDLE), "run", "-n", "2", "--", sys.executable, str(JOB), *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, check=False)
    assert p.returncode == 0, p.stderr
    line = next(ln.split("] ", 1)[1] for ln in p.stdout.splitlines() if "] {" in ln)
    result: dict = json.loads(line)
    return result


def test_slam_on_two_processes_matches_numpy(tmp_path: Path) -> None:
    out = tmp_path / "run.npz"
    s = job(out, 80)
    got = np.load(out)
    assert (got["scans"] == np.arange(80)).all() and s["missing"] == s["out_of_order"] == 0
    poses, truth, odo = got["poses"], got["truth"], got["odometry"]
    assert poses.shape == truth.shape == odo.shape == (80, 3)
    err = np.hypot(*(poses[:, :2] - truth[:, :2]).T)
    odo_err = np.hypot(*(odo[:, :2] - truth[:, :2]).T)
    assert s["rmse_m"] == pytest.approx(float(np.sqrt((err**2).mean())), rel=1e-9)
    assert s["odometry_rmse_m"] == pytest.approx(float(np.sqrt((odo_err**2).mean())), rel=1e-9)
    assert err.max() < 0.5 and s["rmse_m"] * 5 < s["odometry_rmse_m"], s
    assert s["latencies"] == 80 and s["workers"] == 2
    # The truth moves as the simulator drives: 0.1 m a scan at most.
    step = np.hypot(*np.diff(truth[:, :2], axis=0).T)
    assert step.max() <= 0.1 + 1e-9
    # Row j is y, column i is x: the cells' centres as (x, y).
    walls = np.argwhere(got["map"] > 0)[:, ::-1] * 0.05 + 0.025
    assert len(walls) > 200
    # Every mapped wall is within the laser's 8 m of some pose on the path (and half a
    # metre, the most an estimate is off).
    d = np.hypot(*(walls[:, None, :] - truth[None, :, :2]).transpose(2, 0, 1))
    assert (d.min(axis=1) <= 8.5).all(), d.min(axis=1).max()
    # And on the world's walls: the outer ones at 0–0.2 m and 11.8–12 m, the inner cross
    # and boxes elsewhere; most mapped cells sit on the outer walls' lines.
    outer = (walls < 0.3) | (walls > 11.7)
    assert outer.any(axis=1).mean() > 0.5


def test_a_lossy_stream_is_counted_and_tracked(tmp_path: Path) -> None:
    out = tmp_path / "run.npz"
    s = job(out, 120, lose=0.1)
    used = np.load(out)["scans"]
    # Increasing numbers; every number up to the last used is used, late or missing.
    assert (np.diff(used) > 0).all()
    assert s["missing"] + s["out_of_order"] == used[-1] + 1 - len(used), s
    assert s["missing"] > 0 and s["out_of_order"] > 0, s
    assert s["rmse_m"] * 5 < s["odometry_rmse_m"], s


def test_bad_settings_name_the_setting() -> None:
    comm = heddle.init()
    with pytest.raises(heddle.ArgumentError, match="beams = 1"):
        slam(beams=1, scans=3, rate_hz=0, comm=comm)
    with pytest.raises(heddle.ArgumentError, match="particles = 0"):
        slam(particles=0, scans=3, rate_hz=0, comm=comm)
    with pytest.raises(heddle.ArgumentError, match="reorder = 2"):
        slam(reorder=2, scans=3, rate_hz=0, comm=comm)
