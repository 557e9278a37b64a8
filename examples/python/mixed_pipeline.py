"""The mixed-language pipeline through the Python data API: a C filter splits lines into
lower-cased words, a Java filter drops words shorter than 3 letters and keys the rest, the
words are partitioned by key, a Go filter counts them, and a Python filter writes
``word count`` lines into part files of the output directory (see
crates/heddle/examples/mixed_pipeline.rs, the same in Rust). Rank 0 checks the part files
against ``collections.Counter`` and exits 1 if they differ.

    heddle run -n 2 -- python examples/python/mixed_pipeline.py --input FILE --output DIR
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import time
import zlib
from pathlib import Path

import heddle
from heddle.data import Session

ROOT = Path(__file__).resolve().parents[2]
BRIDGES = ROOT / "target" / "bridges"


def filters() -> list[list[str]]:
    """Builds the filters once (examples/bridges/build.sh) and returns their commands."""
    subprocess.run([str(ROOT / "examples/bridges/build.sh")], check=True)
    cp = (BRIDGES / "java.classpath").read_text().strip()
    java = ["java", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-cp", cp]
    return [
        [str(BRIDGES / "lower_words")],
        [*java, "dev.heddle.bridge.examples.DropShortWords"],
        [str(BRIDGES / "count_words")],
        [sys.executable, str(ROOT / "sdk/python/examples/write_counts.py")],
    ]


def reference(path: Path) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    for line in path.read_bytes().split(b"\n"):
        for w in line.decode(errors="replace").split():
            w = "".join(c.lower() if "A" <= c <= "Z" else c for c in w)
            if len(w) >= 3:
                counts[w] += 1
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", type=Path, required=True)
    ap.add_argument("--output", type=Path, required=True)
    ap.add_argument("--transport", default="pipe", choices=["pipe", "fifo", "tcp", "unix"])
    args = ap.parse_args()
    s = Session(heddle.init())
    lower, drop_short, count, write = filters()
    out = args.output.resolve()
    if s.rank == 0 and out.exists() and any(out.iterdir()):
        print(f"error: {out} is not empty: choose a new output directory", file=sys.stderr)
        return 1
    s.comm.barrier()
    t0 = time.perf_counter()
    words = s.text_file(str(args.input)).pipe(lower, args.transport)
    keyed = words.pipe(drop_short, args.transport)  # (word, word) pairs
    counts = keyed.partition_by(lambda kv: zlib.crc32(kv[0].encode())).pipe(count, args.transport)
    written = counts.pipe(write, args.transport, args=[str(out)]).collect_all()
    job_s = time.perf_counter() - t0
    if s.rank != 0:
        return 0
    got: dict[str, int] = {}
    for part in sorted(out.glob("part-*")):
        for line in part.read_text().splitlines():
            word, n = line.rsplit(" ", 1)
            got[word] = int(n)
    want = reference(args.input)
    ok = got == dict(want) and sum(int(n) for n in written) == len(want)
    print(
        json.dumps(
            {
                "example": "mixed_pipeline.py",
                "workers": s.size,
                "distinct_words": len(got),
                "words": sum(got.values()),
                "job_s": round(job_s, 3),
                "ok": ok,
            }
        )
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
