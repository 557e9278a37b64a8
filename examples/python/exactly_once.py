"""Exactly-once streaming with checkpoints, from Python: every file of ``--input`` is a
replayable source of lines ``ID KEY`` (ID unique); the records are keyed by KEY, a running
count per key is kept in keyed state (``Stream.map_with_state``), and ``ID KEY COUNT`` goes
out for each record through the two-phase file sink of ``--output``. Checkpoints every
``--checkpoint-ms`` keep the sources' byte offsets, the counts and the sink's pending
files; killed and restarted (``heddle run --restarts N``), the job resumes from its last
complete checkpoint, so every ID appears exactly once in the output and each KEY's COUNTs
are exactly 1..n(KEY). The Rust ``exactly_once`` example's job, with the same flags and
output::

    heddle run -n 3 --restarts 20 examples/python/exactly_once.py \\
        --input in/ --output out/ --checkpoint-ms 200 --rate 20000

Each worker prints one JSON line at the end: its rank and its attempt. A malformed line,
or any other failure, ends the job with a non-zero exit status.
"""

from __future__ import annotations

import argparse
import json
import sys

import heddle
from heddle.data import Session


def parse(line: str) -> tuple[str, str]:
    """``ID KEY`` -> ``(KEY, ID)``; a line of another shape fails the job."""
    words = line.split()
    if len(words) != 2:
        raise ValueError(
            f"an input line is not `ID KEY`: {line!r}; every line needs an id and a key"
        )
    return words[1], words[0]


def count(key: str, id_: str, n: int | None) -> tuple[str, int]:
    """The key's running count, one more: ``ID KEY COUNT`` out, the count kept."""
    n = (n or 0) + 1
    return f"{id_} {key} {n}", n


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--input", required=True, help="a directory of files of lines `ID KEY`")
    p.add_argument("--output", required=True, help="where the `ID KEY COUNT` lines go")
    p.add_argument("--checkpoint-ms", type=int, default=1000, help="time between checkpoints")
    p.add_argument("--rate", type=float, help="records per second over all sources")
    p.add_argument(
        "--checkpoint-dir", help="the checkpoint directory (default: <output>.checkpoints)"
    )
    args = p.parse_args()
    if args.checkpoint_ms <= 0:
        p.error("--checkpoint-ms must be above 0")
    comm = heddle.init()
    checkpoints = args.checkpoint_dir or args.output.rstrip("/") + ".checkpoints"
    session = Session(
        comm,
        checkpoint_interval=args.checkpoint_ms / 1000,
        checkpoint_dir=checkpoints,
        job="exactly_once",
    )
    lines = session.stream_text(args.input, rate=args.rate)
    lines.map(parse).map_with_state(count).write_lines(args.output)
    print(json.dumps({"rank": comm.rank, "attempt": comm.attempt, "output": args.output}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
