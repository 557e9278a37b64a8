"""SLAM's cost curve and its 10 Hz goal, in one run (issue 22; the thesis' Figs 9.13–9.14).

1. Speedup: `examples/slam` with 100 particles on 1, 2 and 4 workers, for 180 and 640 beams,
   scans released as fast as they are done (`--rate 0`): the median time per scan and the
   speedup over 1 worker.
2. The goal: 100 particles, 180 beams at 10 Hz on 2 workers (p99 latency < 100 ms).
3. With --plot PNG: the map of that run and the paths (estimate, truth, dead reckoning).

Run from the repository root after `make build`::

    python3 benches/apps/slam_sweep.py [--scans 100] [--plot docs/apps/slam.png]
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEDDLE = ROOT / "target" / "release" / "heddle"
SLAM = ROOT / "target" / "release" / "examples" / "slam"


def slam(workers: int, *args: str) -> dict:
    cmd = [str(HEDDLE), "run", "-n", str(workers), "--", str(SLAM), *args]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stderr}")
    line = next(ln.split("] ", 1)[1] for ln in p.stdout.splitlines() if "] {" in ln)
    return json.loads(line)


def plot(map_pgm: Path, paths: Path, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    rows = list(csv.DictReader(paths.open()))
    col = lambda k: [float(r[k]) for r in rows]  # noqa: E731
    fig, ax = plt.subplots(figsize=(6, 6))
    ax.imshow(Image.open(map_pgm), cmap="gray", extent=(0, 12, 0, 12))
    ax.plot(col("true_x"), col("true_y"), "g-", lw=3, alpha=0.6, label="truth")
    ax.plot(col("x"), col("y"), "r--", lw=1.2, label="RBPF estimate")
    ax.plot(col("odometry_x"), col("odometry_y"), "b:", lw=1, label="dead reckoning")
    ax.set_xlim(-2, 14)
    ax.set_ylim(-2, 14)
    ax.set_xlabel("m")
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title("Heddle RBPF SLAM: heaviest particle's map and paths")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scans", type=int, default=100)
    ap.add_argument("--plot", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = []
    print("| beams | workers | ms per scan (p50) | p99 | speedup | RMSE m |")
    print("|---:|---:|---:|---:|---:|---:|")
    for beams in (180, 640):
        base = None
        for workers in (1, 2, 4):
            s = slam(workers, "--beams", str(beams), "--scans", str(args.scans), "--rate", "0")
            base = base or s["latency_p50_ms"]
            rows.append({"beams": beams, "workers": workers, **s})
            print(
                f"| {beams} | {workers} | {s['latency_p50_ms']:.1f} | {s['latency_p99_ms']:.1f} "
                f"| {base / s['latency_p50_ms']:.2f}× | {s['rmse_m']:.3f} |"
            )
    with tempfile.TemporaryDirectory() as tmp:
        pgm, traj = Path(tmp) / "map.pgm", Path(tmp) / "paths.csv"
        s = slam(
            2, "--scans", "300", "--rate", "10", "--map-pgm", str(pgm), "--trajectory", str(traj)
        )
        rows.append({"goal": True, **s})
        print(
            f"\n10 Hz, 180 beams, 100 particles, 2 workers, 300 scans: p50 "
            f"{s['latency_p50_ms']:.1f} ms, p99 {s['latency_p99_ms']:.1f} ms (goal < 100), "
            f"RMSE {s['rmse_m']:.3f} m (dead reckoning {s['odometry_rmse_m']:.2f} m), "
            f"{s['resamples']} resamplings"
        )
        if args.plot:
            plot(pgm, traj, args.plot)
            print(f"wrote {args.plot}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
