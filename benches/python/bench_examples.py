"""Python word count (200 MB) and K-means (1 M points x 2, 16 centers, 10 iterations) with
heddle.data on N workers: runs each example (examples/python/wordcount.py, kmeans.py;
``wordcount-udf`` is the word count with ``--python``, counting with ``collections.Counter``
in Python rather than with the native ``words().value_counts()``) --repeat times under
``python -m heddle run -n N``, alternating, and prints every run's ``job_s`` (from the
example's JSON line: the job's time on its slowest worker, input generation and
verification excluded) and the medians.

    .venv-py/bin/python benches/python/bench_examples.py [--workers 2] [--repeat 3] [--json FILE]

The first run generates the word-count text in $TMPDIR (the Rust example's file, reused
by either); the examples verify their results every run unless --no-verify.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "python"
WORDS = ["--generate", "--seed", "1", "--megabytes", "200"]
#: workload -> (example, arguments)
WORKLOADS = {
    "wordcount": ("wordcount", WORDS),
    "wordcount-udf": ("wordcount", [*WORDS, "--python"]),
    "kmeans": ("kmeans", ["--generate", "--seed", "1", "--k", "16", "--iterations", "10"]),
}


def run(workload: str, workers: int, verify: bool) -> dict:
    example, args = WORKLOADS[workload]
    args = list(args) + ([] if verify else ["--no-verify"])
    cmd = [
        sys.executable,
        "-m",
        "heddle",
        "run",
        "-n",
        str(workers),
        str(EXAMPLES / f"{example}.py"),
        *args,
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEDDLE_")}
    done = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=900)
    for line in done.stdout.splitlines():
        if line.startswith("[0] {"):
            rep = json.loads(line[4:])
            if done.returncode == 0 and rep.get("ok"):
                return rep
    raise SystemExit(f"{workload} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--only", choices=sorted(WORKLOADS), help="one workload")
    p.add_argument(
        "--no-verify", action="store_true", help="skip the examples' reference computations"
    )
    p.add_argument("--json", type=Path, help="write the runs and medians here")
    args = p.parse_args()
    names = [args.only] if args.only else list(WORKLOADS)
    times = {name: [] for name in names}
    for i in range(args.repeat):
        for name in names:
            rep = run(name, args.workers, not args.no_verify)
            times[name].append(rep["job_s"])
            print(
                f"run {i + 1}: {name:13s} job_s {rep['job_s']:.3f} s ({args.workers} workers)",
                flush=True,
            )
    result = {name: {"runs": t, "median_s": statistics.median(t)} for name, t in times.items()}
    for name, r in result.items():
        print(f"{name:9s} median of {len(r['runs'])}: {r['median_s']:.3f} s")
    if args.json:
        args.json.write_text(json.dumps({"workers": args.workers, "results": result}, indent=2))


if __name__ == "__main__":
    main()
