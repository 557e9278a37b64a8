"""What the dashboard's metrics cost on word count: the same binary with HEDDLE_METRICS=on and
off, measured two ways in one run.

* Instructions. The worker runs under Valgrind's callgrind (`heddle run -n 1`, the data API's
  `wordcount` on the generated text). Instruction counts repeat to within about 0.1 % from run
  to run, where wall time on this shared 2-core VM spreads by ±20 %. The goal, metrics costing
  under 1 %, is checked on them: the script exits 1 when the median count with metrics on
  is 1 % or more above the median with them off.
* Time. `heddle run -n 2` on larger text, on and off taking turns, several rounds: the median
  job time and the CPU time of the whole process tree. Reported, never checked (too noisy).

The measured runs skip the word count's own check; one run per setting beforehand checks
every count against a single-threaded count of the same text.

Run from the repository root (it builds what it needs; Valgrind comes from Debian's package,
installed when missing and run as root)::

    python3 benches/observability/overhead.py [--megabytes 20] [--runs 2]
        [--time-megabytes 200] [--rounds 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RELEASE = ROOT / "target" / "release"
HEDDLE = RELEASE / "heddle"
WORDCOUNT = RELEASE / "examples" / "wordcount"
GOAL = 0.01


def build() -> None:
    cmd = ["cargo", "build", "-j2", "--release", "--bin", "heddle", "--example", "wordcount"]
    subprocess.run(cmd, cwd=ROOT, check=True)


def need_valgrind() -> None:
    if shutil.which("valgrind"):
        return
    if os.geteuid() != 0:
        sys.exit("overhead.py: valgrind is missing: apt-get install valgrind (as root)")
    subprocess.run(["apt-get", "install", "-y", "valgrind"], check=True)


def text_file(megabytes: int) -> Path:
    """The example's generated text of `megabytes` (made once, kept in the temp directory)."""
    path = Path(tempfile.gettempdir()) / f"heddle-words-{megabytes}mb-seed1.txt"
    if not path.exists():
        cmd = [str(HEDDLE), "run", "-n", "1", "--dashboard", "off", "--", str(WORDCOUNT)]
        cmd += ["--generate", "--megabytes", str(megabytes), "--no-verify"]
        subprocess.run(cmd, check=True, capture_output=True)
    return path


def job(metrics: str, workers: int, text: Path, wrap: list[str], verify: bool = False) -> dict:
    """One word count; its JSON line. With `verify`, rank 0 checks every count against a
    single-threaded count of the text (outside the measured runs: it would dilute them)."""
    cmd = [str(HEDDLE), "run", "-n", str(workers), "--dashboard", "off"]
    # Under Valgrind the heartbeat thread can starve for seconds.
    cmd += ["--heartbeat-timeout", "600", "--", *wrap, str(WORDCOUNT), "--input", str(text)]
    cmd += [] if verify else ["--no-verify"]
    env = dict(os.environ, HEDDLE_METRICS=metrics)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600, check=False)
    lines = [ln.split("] ", 1)[-1] for ln in out.stdout.splitlines() if '"job_s"' in ln]
    if out.returncode != 0 or not lines:
        sys.exit(f"overhead.py: the word count failed ({out.returncode}):\n{out.stderr[-3000:]}")
    result = json.loads(lines[-1])
    if not result.get("ok"):
        sys.exit(f"overhead.py: wrong counts with HEDDLE_METRICS={metrics}: {result}")
    return result


def instructions(metrics: str, text: Path, scratch: Path) -> int:
    """Instructions the worker executed (callgrind's total)."""
    out = scratch / f"callgrind.{metrics}.{time.monotonic_ns()}"
    wrap = ["valgrind", "--tool=callgrind", "--fair-sched=yes", f"--callgrind-out-file={out}"]
    job(metrics, 1, text, wrap)
    totals = re.search(r"^totals:\s+(\d+)", out.read_text(), re.MULTILINE)
    if not totals:
        sys.exit(f"overhead.py: no totals in {out}")
    return int(totals.group(1))


def timed(metrics: str, workers: int, text: Path) -> tuple[float, float]:
    """The job's time (its own clock) and the CPU seconds of the process tree."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = job(metrics, workers, text, [])
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return float(result["job_s"]), cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--megabytes", type=int, default=20, help="text under callgrind")
    ap.add_argument("--runs", type=int, default=2, help="callgrind runs per setting")
    ap.add_argument("--time-megabytes", type=int, default=200, help="text of the timed runs")
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds (0: none)")
    ap.add_argument("--workers", type=int, default=2, help="workers of the timed runs")
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args()
    build()
    need_valgrind()
    report: dict = {"date": time.strftime("%Y-%m-%d"), "goal": GOAL}
    with tempfile.TemporaryDirectory(prefix="heddle-overhead-") as scratch:
        text = text_file(args.megabytes)
        for metrics in ("on", "off"):
            job(metrics, 2, text, [], verify=True)
        counts: dict[str, list[int]] = {"on": [], "off": []}
        for _ in range(args.runs):
            for metrics in ("on", "off"):
                counts[metrics].append(instructions(metrics, text, Path(scratch)))
                print(f"callgrind, metrics {metrics}: {counts[metrics][-1]:,} instructions")
    ir = {m: statistics.median(v) for m, v in counts.items()}
    cost = ir["on"] / ir["off"] - 1
    report["instructions"] = {"megabytes": args.megabytes, "runs": counts, "cost": cost}
    if args.rounds:
        text = text_file(args.time_megabytes)
        job("on", args.workers, text, [], verify=True)
        times: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
        for r in range(args.rounds):
            # Alternate which goes first so that drift hits both alike.
            for metrics in ("on", "off") if r % 2 == 0 else ("off", "on"):
                times[metrics].append(timed(metrics, args.workers, text))
        med = {
            m: (statistics.median(t for t, _ in v), statistics.median(c for _, c in v))
            for m, v in times.items()
        }
        report["time"] = {
            "megabytes": args.time_megabytes,
            "workers": args.workers,
            "runs": times,
            "job_s_ratio": med["on"][0] / med["off"][0],
            "cpu_s_ratio": med["on"][1] / med["off"][1],
        }
        for m in ("on", "off"):
            print(f"time, metrics {m}: job {med[m][0]:.3f} s, CPU {med[m][1]:.2f} s (medians)")
    print(f"metrics cost {100 * cost:+.2f} % of the instructions (goal: under {100 * GOAL:.0f} %)")
    if "time" in report:
        t = report["time"]
        print(f"time ratio on/off: job {t['job_s_ratio']:.3f}, CPU {t['cpu_s_ratio']:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    if cost >= GOAL:
        sys.exit(1)


if __name__ == "__main__":
    main()
