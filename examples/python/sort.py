"""Terasort with heddle.data: a file of 100-byte lines (a 10-byte key, 90 bytes, a newline)
sorted by key across workers into part files ``part-NNNNN``, in key order across the part
files. By default ``s.text_file(input).sort(key_bytes=10).write_text(output)``: the lines
are read, sorted (an external sort) and written natively, as 101-byte lines. With
``--python`` each record goes through Python instead: binary blocks of lines are split
into ``(key, record)`` pairs of ``bytes`` in Python, sorted with ``sort_by_key`` (records
cross workers pickled), and each sorted partition is written by Python as raw 100-byte
records (the Rust ``terasort`` example's output). The clock covers reading, sorting and
writing. Rank 0 then checks (after the clock) that the part files hold the input's records
in key order (count and an order-independent checksum) and prints one JSON line.

    heddle run -n 2 examples/python/sort.py --input records.txt --output /tmp/sorted [--python]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import uuid
from pathlib import Path

import heddle
from heddle.data import Session

RECORD = 100
KEY = 10
LINE = RECORD + 1


def pairs(blocks):
    """``(key, record)`` pairs of a partition's binary blocks of 101-byte lines."""
    out = []
    for block in blocks:
        if len(block) % LINE:
            raise ValueError(
                f"a block of {len(block)} bytes is not a whole number of {LINE}-byte lines"
            )
        out.extend((block[i : i + KEY], block[i : i + RECORD]) for i in range(0, len(block), LINE))
    return out


def writer(directory: Path):
    """Writes a sorted partition's records to a temporary file of ``directory``; returns
    ``[(file name, records)]`` (renamed to part-NNNNN in partition order by rank 0)."""

    def write(part):
        name = f".tmp-{uuid.uuid4().hex}"
        with open(directory / name, "wb") as f:
            f.write(b"".join(r for _, r in part))
        return [(name, len(part))]

    return write


def digest(records) -> tuple:
    """(count, order-independent sum of record hashes) of 100-byte records."""
    total = 0
    n = 0
    for r in records:
        total += int.from_bytes(hashlib.blake2b(r, digest_size=8).digest(), "little")
        n += 1
    return n, total & ((1 << 64) - 1)


def records_of(path: Path, step: int):
    """The 100-byte records of a file of ``step``-byte records (101: lines)."""
    with open(path, "rb") as f:
        while True:
            buf = f.read(step * 65536)
            if not buf:
                return
            for i in range(0, len(buf), step):
                yield buf[i : i + RECORD]


def stride(part: Path) -> int:
    """Bytes per record of a part file: 101 for lines (native output), 100 for raw records."""
    with open(part, "rb") as f:
        head = f.read(LINE)
    lines = len(head) == LINE and head[RECORD] == ord("\n") and part.stat().st_size % LINE == 0
    return LINE if lines else RECORD


def part_files(directory: Path) -> list:
    return sorted(p for p in directory.iterdir() if p.name.startswith("part-"))


def output_records(directory: Path):
    for part in part_files(directory):
        yield from records_of(part, stride(part))


def check(path: Path, directory: Path) -> tuple[bool, str]:
    """Key order within and across part files, record count and checksum against the input."""
    last = b""
    files = part_files(directory)
    for part in files:
        if part.stat().st_size % stride(part):
            return (
                False,
                f"{part.name}: {part.stat().st_size} bytes is not a whole number of records",
            )
    for i, r in enumerate(output_records(directory)):
        if r[:KEY] < last:
            return False, f"keys out of order at record {i + 1}"
        last = r[:KEY]
    want, got = digest(records_of(path, LINE)), digest(output_records(directory))
    if want != got:
        return (
            False,
            f"{got[0]} records (want {want[0]}), checksum "
            f"{'equal' if want[1] == got[1] else 'differs'}",
        )
    return True, f"{got[0]} records in {len(files)} files, in key order, checksum equal"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--input",
        type=Path,
        required=True,
        help="file of 100-byte lines (10-byte key, 90 bytes, newline)",
    )
    p.add_argument("--output", type=Path, required=True, help="write the sorted part files here")
    p.add_argument(
        "--mem-budget",
        type=int,
        default=1 << 30,
        help="bytes of records a partition holds before sorted runs spill to disk",
    )
    p.add_argument(
        "--python",
        action="store_true",
        help="split, sort and write the records in Python instead of natively",
    )
    p.add_argument(
        "--block-bytes",
        type=int,
        default=LINE * 10_000,
        help="with --python: bytes per input block (whole lines)",
    )
    p.add_argument(
        "--no-verify", action="store_true", help="skip the check of the output against the input"
    )
    args = p.parse_args()
    if not args.input.exists():
        p.error(f"--input {args.input} does not exist")

    comm = heddle.init()
    s = Session(comm, memory_budget=args.mem_budget)
    if comm.rank == 0:
        args.output.mkdir(parents=True, exist_ok=True)
        for old in args.output.iterdir():
            if old.name.startswith(("part-", ".tmp-")):
                old.unlink()
    comm.barrier()
    start = time.perf_counter()
    if args.python:
        written = (
            s.text_blocks(args.input, args.block_bytes, binary=True)
            .map_partitions(pairs)
            .sort_by_key()
            .map_partitions(writer(args.output))
            .collect()
        )
        if comm.rank == 0:
            # Partition order is key order: part-00000, part-00001, ...
            for i, (name, _) in enumerate(written):
                os.replace(args.output / name, args.output / f"part-{i:05d}")
    else:
        s.text_file(args.input).sort(key_bytes=KEY).write_text(args.output, mode="overwrite")
    comm.barrier()
    job_s = comm.allreduce(time.perf_counter() - start, op=max)

    if comm.rank == 0:
        verify = time.perf_counter()
        if not args.python:  # the part files, in key order, and their records
            written = [
                (p.name, p.stat().st_size // stride(p))
                for p in part_files(args.output)
                if p.stat().st_size
            ]
        records = sum(n for _, n in written)
        ok, detail = (
            (True, f"{records} records, not verified")
            if args.no_verify
            else check(args.input, args.output)
        )
        line = {
            "example": "sort",
            "api": "python",
            "sorting": "python" if args.python else "native",
            "ok": ok,
            "records": records,
            "partitions": len(written),
            "job_s": round(job_s, 3),
            "verify_s": round(time.perf_counter() - verify, 3),
            "detail": detail,
            "workers": comm.size,
        }
        print(json.dumps(line))
        if not ok:
            print(f"error: the sorted output is wrong: {detail}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
