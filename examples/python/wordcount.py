"""Word count with heddle.data: ``s.text_file(path).words().value_counts()`` splits and
counts the words natively, each partition into its own table, and sums the partial counts
by key (PySpark's ``explode(split(...)).groupBy().count()``). With ``--python`` each
partition counts its blocks of text with ``collections.Counter`` in Python instead. Rank 0
checks the counts against a plain ``collections.Counter`` of the whole file and prints one
JSON line (the Rust example's).

    heddle run -n 2 examples/python/wordcount.py --generate --seed 1
    heddle run -n 2 examples/python/wordcount.py --generate --seed 1 --python
    heddle run -n 4 examples/python/wordcount.py --input big.txt --output /tmp/wc

``--generate`` makes (or reuses) the same file as the Rust ``wordcount --generate``:
``$TMPDIR/heddle-words-<megabytes>mb-seed<seed>.txt``.
"""

from __future__ import annotations

import argparse
import collections
import json
import operator
import os
import sys
import time
from pathlib import Path

import heddle
from heddle.data import Session

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common


def count_words(blocks):
    """The word counts of a partition's text blocks (bytes): split and counted in C
    (``bytes.split``, ``Counter``), the words decoded once at the end."""
    counts = collections.Counter()
    for block in blocks:
        counts.update(block.split())
    return [(word.decode(), n) for word, n in counts.items()]


def read_parts(directory: Path) -> dict:
    counts = {}
    for part in sorted(directory.iterdir()):
        for line in part.read_text().splitlines():
            word, _, n = line.partition("\t")
            counts[word] = int(n)
    return counts


def reference(path: Path) -> dict:
    """A plain single-threaded count of every word of the input (a file or a directory's
    files), words separated by ASCII whitespace as in the Rust example."""
    files = (
        sorted(p for p in path.iterdir() if not p.name.startswith(".")) if path.is_dir() else [path]
    )
    counts = collections.Counter()
    for f in files:
        counts.update(f.read_bytes().split())
    return {word.decode(): n for word, n in counts.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--input",
        type=Path,
        help="text file or directory to count (UTF-8, words separated by ASCII whitespace)",
    )
    p.add_argument(
        "--generate",
        action="store_true",
        help="generate the input (about --megabytes of text) instead",
    )
    p.add_argument("--seed", type=int, default=1, help="seed of the generated text")
    p.add_argument("--megabytes", type=int, default=200, help="size of the generated text")
    p.add_argument("--output", type=Path, help="write word<TAB>count part files here")
    p.add_argument(
        "--python",
        action="store_true",
        help="count each block with collections.Counter in Python instead of natively",
    )
    p.add_argument(
        "--block-bytes",
        type=int,
        default=64 << 10,
        help="with --python: bytes of text per block (small blocks keep each split list in cache)",
    )
    p.add_argument("--explain", action="store_true", help="print the plan")
    p.add_argument("--no-verify", action="store_true", help="skip the check against a plain count")
    args = p.parse_args()
    if (args.input is None) == (not args.generate):
        p.error("give --input FILE or --generate")

    comm = heddle.init()
    s = Session(comm)
    if args.generate:
        path = common.words_file(args.megabytes, args.seed)
        if comm.rank == 0 and not path.exists():
            common.generate_words(path, args.megabytes, args.seed)
        comm.barrier()
    else:
        path = args.input
        if not path.exists():
            p.error(f"--input {path} does not exist")

    comm.barrier()
    start = time.perf_counter()
    if args.python:
        counts = (
            s.text_blocks(path, args.block_bytes, binary=True)
            .map_partitions(count_words)
            .reduce_by_key(operator.add)
        )
    else:
        counts = s.text_file(path).words().value_counts()
    if args.explain and comm.rank == 0:
        print(counts.explain(), end="")
    if args.output:
        counts.map(lambda wc: f"{wc[0]}\t{wc[1]}").write_text(args.output, mode="overwrite")
        result = None
    else:
        result = counts.collect()
    job_s = comm.allreduce(time.perf_counter() - start, op=max)

    if comm.rank == 0:
        got = dict(result) if result is not None else read_parts(args.output)
        ok = args.no_verify or got == reference(path)
        line = {
            "example": "wordcount",
            "api": "python",
            "counting": "python" if args.python else "native",
            "ok": ok,
            "words": sum(got.values()),
            "distinct": len(got),
            "job_s": round(job_s, 3),
            "workers": comm.size,
        }
        print(json.dumps(line))
        if not ok:
            print("error: the counts differ from a plain count of the input", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
