"""Driver-side helpers shared by the peer programs (argument parsing, input ranges, the JSON
line). Code that runs inside a peer's workers is written in each program itself, so that
every engine ships it the way its documentation shows (functions of ``__main__`` by value)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

COMPARE = Path(__file__).resolve().parents[1]
if str(COMPARE) not in sys.path:
    sys.path.insert(0, str(COMPARE))

import reference  # noqa: E402  (benches/compare/reference.py)

T_PROCESS = time.perf_counter()  # roughly when the interpreter got here


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--input", required=True)
    p.add_argument("--output", help="directory for the program's output (sort)")
    p.add_argument("--ref", help="reference file from reference.py")
    p.add_argument("--partitions", type=int, default=8, help="input partitions / tasks")
    p.add_argument("--workers", type=int, default=2, help="worker processes / cores")
    p.add_argument("--k", type=int, default=16)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--tasks", type=int, default=10_000)
    return p


def text_ranges(path: str, parts: int) -> list[tuple[int, int]]:
    """Byte ranges [start, end) of a file; a line belongs to the range its first byte is in."""
    size = os.path.getsize(path)
    return [(size * i // parts, size * (i + 1) // parts) for i in range(parts)]


def record_ranges(path: str, parts: int, stride: int = reference.LINE) -> list[tuple[int, int]]:
    """Record index ranges [lo, hi) of a file of fixed-size records."""
    n = os.path.getsize(path) // stride
    return [(n * i // parts, n * (i + 1) // parts) for i in range(parts)]


def emit(**fields) -> None:
    fields.setdefault("startup_s", round(fields.pop("t_ready", time.perf_counter()) - T_PROCESS, 3))
    reference.emit(**fields)


def finish(check, *, t_ready: float, job_s: float, **fields) -> None:
    """Runs ``check`` (returning ``(ok, detail)``) outside the clock, emits the JSON line with
    its time as ``verify_s``, and exits 0 only if the check passed."""
    t = time.perf_counter()
    ok, detail = check()
    verify_s = time.perf_counter() - t
    emit(
        ok=ok,
        detail=detail,
        job_s=round(job_s, 3),
        verify_s=round(verify_s, 3),
        t_ready=t_ready,
        **fields,
    )
    sys.exit(0 if ok else 1)
