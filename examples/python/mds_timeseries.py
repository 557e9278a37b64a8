"""The thesis' MDS workflow over a time series (chapter 4): a generated multi-asset price
series (assets in sectors, daily log returns driven by a market factor, a factor per
sector and noise, the sectors' loadings drifting over time) is cut into overlapping
windows; each window's assets are placed in 3-D by ``heddle.apps.mds`` from the
correlation distances of their returns (``√(2 (1 − ρ))``), each window started from the
previous window's solution and turned onto it (``heddle.apps.procrustes``), so that the
points move smoothly and their trajectories can be drawn.

Prints one JSON line: windows, assets, the stress of each window, how far the assets move
from one window to the next (root mean square) after alignment and before it (alignment,
which minimizes it, must not make it larger: the check), and the job time.
``--output DIR`` writes ``coords-NNN.npy`` per window; ``--plot FILE.png`` draws, in the
first two coordinates, every asset's last position, each sector's centroid window by window
(thick) and three assets of each sector (thin), coloured by sector (needs matplotlib).

    heddle run -n 2 examples/python/mds_timeseries.py --assets 400 --days 1500 \\
        --window 250 --step 50 --plot docs/apps/mds-trajectories.png
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import heddle
from heddle.apps import mds, procrustes


def prices(assets: int, days: int, sectors: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Daily log returns (``days × assets``) and each asset's sector."""
    rng = np.random.default_rng(seed)
    sector = rng.integers(0, sectors, assets)
    market = rng.normal(0, 0.01, days)
    factors = rng.normal(0, 0.012, (days, sectors))
    # Each sector's loading on the market drifts slowly: the structure changes over time.
    drift = np.cumsum(rng.normal(0, 0.02, (days, sectors)), axis=0)
    beta = 0.8 + 0.4 * np.tanh(drift)
    noise = rng.normal(0, 0.015, (days, assets))
    returns = beta[:, sector] * market[:, None] + factors[:, sector] + noise
    return returns, sector


def distances(returns: np.ndarray) -> np.ndarray:
    """Correlation distances ``√(2 (1 − ρ))`` of the columns, symmetric, zero diagonal."""
    rho = np.clip(np.corrcoef(returns.T), -1.0, 1.0)
    d = np.sqrt(np.maximum(2.0 * (1.0 - rho), 0.0))
    np.fill_diagonal(d, 0.0)
    return (d + d.T) / 2


def rms(moves: np.ndarray) -> float:
    """The root mean square of the rows' lengths (what Procrustes minimizes)."""
    return float(np.sqrt((moves * moves).sum(1).mean()))


def plot(path: str, windows: list[np.ndarray], sector: np.ndarray) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    track = np.stack(windows)  # windows × assets × 3
    fig, ax = plt.subplots(figsize=(7, 6), dpi=100)
    colours = plt.get_cmap("tab10")
    for sec in range(int(sector.max()) + 1):
        c, members = colours(sec % 10), np.flatnonzero(sector == sec)
        ax.plot(track[-1, members, 0], track[-1, members, 1], "o", color=c, ms=2, alpha=0.4)
        # Three of the sector's assets, window by window, and the sector's centroid.
        for a in members[:3]:
            ax.plot(track[:, a, 0], track[:, a, 1], "-", color=c, alpha=0.5, linewidth=0.7)
        centre = track[:, members, :2].mean(1)
        ax.plot(centre[:, 0], centre[:, 1], "-", color=c, linewidth=2.5, label=f"sector {sec}")
        ax.plot(centre[-1, 0], centre[-1, 1], "o", color=c, ms=7, mec="black")
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title(f"{track.shape[1]} assets over {track.shape[0]} windows (MDS, aligned)")
    ax.set_xlabel("coordinate 1")
    ax.set_ylabel("coordinate 2")
    fig.tight_layout()
    pending = f"{path}.pending-{os.getpid()}.png"
    fig.savefig(pending)
    os.replace(pending, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--assets", type=int, default=400)
    ap.add_argument("--days", type=int, default=1500)
    ap.add_argument("--sectors", type=int, default=6)
    ap.add_argument("--window", type=int, default=250, help="days per window")
    ap.add_argument("--step", type=int, default=50, help="days from one window to the next")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--output", help="directory for coords-NNN.npy per window")
    ap.add_argument("--plot", help="draw the trajectories to this PNG")
    args = ap.parse_args()
    if args.window > args.days or args.window < 3 or args.step < 1:
        ap.error(f"--window {args.window} and --step {args.step} do not fit --days {args.days}")
    comm = heddle.init()
    returns, sector = prices(args.assets, args.days, args.sectors, args.seed)
    comm.barrier()
    t0 = time.perf_counter()
    windows: list[np.ndarray] = []
    stresses: list[float] = []
    moved_aligned, moved_raw = [], []
    for start in range(0, args.days - args.window + 1, args.step):
        delta = distances(returns[start : start + args.window])
        previous = windows[-1] if windows else None
        coords, stress = mds(delta, dim=3, init=previous, comm=comm)
        if previous is not None:
            aligned = procrustes(coords, previous)
            moved_raw.append(rms(coords - previous))
            moved_aligned.append(rms(aligned - previous))
            coords = aligned
        windows.append(coords)
        stresses.append(stress)
    job_s = comm.allreduce(time.perf_counter() - t0, op=heddle.MAX)
    ok = all(np.isfinite(s) and s < 1.0 for s in stresses) and all(
        a <= r + 1e-9 for a, r in zip(moved_aligned, moved_raw)
    )
    if comm.rank == 0:
        if args.output:
            out = Path(args.output)
            out.mkdir(parents=True, exist_ok=True)
            for i, w in enumerate(windows):
                np.save(out / f"coords-{i:03d}.npy", w)
        if args.plot:
            plot(args.plot, windows, sector)
        report = {"example": "mds_timeseries", "api": "python", "ok": ok}
        report.update(windows=len(windows), assets=args.assets, stress=stresses)
        report.update(moved_aligned=float(np.mean(moved_aligned or [0.0])))
        report.update(moved_unaligned=float(np.mean(moved_raw or [0.0])))
        report.update(job_s=round(job_s, 3), workers=comm.size)
        print(json.dumps(report))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
