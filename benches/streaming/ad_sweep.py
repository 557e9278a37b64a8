"""The streaming benchmark's sustainable throughput: runs examples/ad_benchmark (Rust) and
examples/python/ad_benchmark.py at rising input rates against a redis-server of its own,
and reports for each rate the throughput, the latency p50/p99 of window results and
whether the job kept up. A rate is sustained when every count is right, the events went
through at 97 % of the rate or more, and the window results' p99 lag stayed under
--max-lag-ms (the Yahoo benchmark's criterion: bounded lag). The generator is rank 0's
thread, so a rate it cannot produce is reported as such ("generator-limited").

Run from the repository root after ``make build`` (and ``make python-install`` for the
Python rows)::

    python3 benches/streaming/ad_sweep.py [--rates 25000,50000,100000,200000]
        [--seconds 30] [--workers 2] [--apis rust,python] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RELEASE = ROOT / "target" / "release"


def start_redis(tmp: Path) -> tuple[subprocess.Popen, int]:
    if not shutil.which("redis-server"):
        sys.exit("redis-server is not installed (make test-deps installs it)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    server = subprocess.Popen(
        [*argv, "--appendonly", "no", "--dir", str(tmp)], stdout=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server, port
        except OSError:
            time.sleep(0.05)
    server.kill()
    sys.exit(f"redis-server did not start on port {port}")


def run(api: str, url: str, rate: int, args: argparse.Namespace) -> dict:
    flags = ["--redis", url, "--rate", str(rate), "--seconds", str(args.seconds)]
    flags += ["--window-s", str(args.window_s)]
    if api == "rust":
        cmd = [str(RELEASE / "heddle"), "run", "-n", str(args.workers), "--"]
        cmd += [str(RELEASE / "examples" / "ad_benchmark"), *flags]
    else:
        cmd = [args.python, "-m", "heddle", "run", "-n", str(args.workers)]
        cmd += [str(ROOT / "examples" / "python" / "ad_benchmark.py"), *flags]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    line = next(
        (json.loads(x.split("] ", 1)[1]) for x in p.stdout.splitlines() if '"ad_benchmark"' in x),
        None,
    )
    if line is None:
        return {"api": api, "rate": rate, "error": (p.stderr or p.stdout)[-400:]}
    return {"api": api, "rate": rate, **line}


def verdict(r: dict, max_lag_ms: float) -> str:
    """sustained; lag unbounded (the job fell behind); generator-limited (the lag stayed
    bounded but the events came slower than asked: rank 0's thread could not make them)."""
    if "error" in r or not r.get("correct"):
        return "wrong or failed"
    p99 = r.get("latency_p99_ms")
    if p99 is None or p99 > max_lag_ms:
        return "lag unbounded"
    if r["throughput_eps"] < 0.97 * r["rate"]:
        return "generator-limited"
    return "sustained"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="25000,50000,100000,200000")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--window-s", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--apis", default="rust,python")
    ap.add_argument("--max-lag-ms", type=float, default=1000.0)
    ap.add_argument("--python", default=str(ROOT / ".venv-py" / "bin" / "python"))
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="heddle-ad-sweep-") as tmp:
        server, port = start_redis(Path(tmp))
        try:
            url = f"redis://127.0.0.1:{port}/"
            for api in args.apis.split(","):
                for rate in (int(r) for r in args.rates.split(",")):
                    r = run(api, url, rate, args)
                    r["verdict"] = verdict(r, args.max_lag_ms)
                    rows.append(r)
                    print(json.dumps(r), file=sys.stderr)
        finally:
            server.kill()
            server.wait()
    print("| API | input rate (events/s) | throughput (events/s) | p50 / p99 (ms) | verdict |")
    print("|---|---:|---:|---:|---|")
    for r in rows:
        tput = f"{r['throughput_eps']:.0f}" if "throughput_eps" in r else "—"
        lat = f"{r.get('latency_p50_ms')} / {r.get('latency_p99_ms')}" if "job_s" in r else "—"
        print(f"| {r['api']} | {r['rate']} | {tput} | {lat} | {r['verdict']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
