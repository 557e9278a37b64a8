"""The cost of secure links: collectives across 3 simulated hosts (network namespaces on a
bridge, 2 ranks each, as bench_hosts.py) with HEDDLE_SECURITY=none, mac and tls, in one run.
The modes take turns, several rounds, so drift on this shared machine hits them alike; each
cell is the median over rounds of the run's p50. Prints the latencies and the cost of each
mode over plaintext; --json writes them.

Needs root and iproute2. Run from the repository root after `make build`::

    python3 benches/hosts/bench_security.py [--sizes 65536,1048576] [--rounds 5] \
        [--rate 10gbit] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_hosts import Net, heddle, p50

MODES = ["none", "mac", "tls"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="65536,1048576,16777216")
    ap.add_argument("--collectives", default="allreduce")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--algorithms", default="", help="HEDDLE_ALGORITHMS for every run (default: the table's)"
    )
    ap.add_argument(
        "--rate",
        help="shape each host's link to this rate (tc units, e.g. 10gbit): a network slower "
        "than memory, as between real hosts (default: unshaped veth, memory speed)",
    )
    ap.add_argument("--json")
    args = ap.parse_args()
    flags = ["--sizes", args.sizes, "--collectives", args.collectives]
    sizes = [int(s) for s in args.sizes.split(",")]
    colls = args.collectives.split(",")
    runs: dict[str, list[list[dict]]] = {m: [] for m in MODES}
    with Net(args.rate) as net:
        for _ in range(args.rounds):
            for mode in MODES:
                runs[mode].append(heddle(net, flags, args.algorithms, {"HEDDLE_SECURITY": mode}))
    rows = []
    for c in colls:
        for size in sizes:
            cell = {m: statistics.median(p50(r, c, size) for r in runs[m]) for m in MODES}
            rows.append(
                {
                    "collective": c,
                    "bytes": size,
                    **{f"{m}_us": cell[m] for m in MODES},
                    "mac_cost": cell["mac"] / cell["none"] - 1,
                    "tls_cost": cell["tls"] / cell["none"] - 1,
                }
            )
    print("| collective | bytes | none p50 µs | mac p50 µs | tls p50 µs | mac cost | tls cost |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['collective']} | {r['bytes']} | {r['none_us']:.1f} | {r['mac_us']:.1f} | "
            f"{r['tls_us']:.1f} | {100 * r['mac_cost']:+.1f} % | {100 * r['tls_cost']:+.1f} % |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
