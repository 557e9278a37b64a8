"""Streaming keyed windowed count, Bytewax: a file source of ``ts_ms,key`` CSV events (the
same events as one file, so that event time stays in order; bounded: read once), an event
clock with a 5 s watermark, a 10 s tumbling window counted per key (``count_window``), on
``--workers`` worker threads of one process (``cli_main``; Bytewax's workers are threads
sharing the interpreter). The counts are gathered in the driver and checked per (window,
key)."""

import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common

import bytewax.operators as op
import bytewax.operators.windowing as win
from bytewax.connectors.files import FileSource
from bytewax.dataflow import Dataflow
from bytewax.run import cli_main
from bytewax.testing import TestingSink

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def parse(line: str) -> tuple[int, int]:
    ts, key = line.split(",")
    return int(ts), int(key)


if __name__ == "__main__":
    args = common.parser(__doc__).parse_args()
    window_ms = common.reference.WINDOW_MS
    source = common.reference.events_single_file(args.input)
    got: list = []
    flow = Dataflow("streaming_window")
    events = op.map("parse", op.input("events", flow, FileSource(source)), parse)
    clock = win.EventClock(
        ts_getter=lambda e: EPOCH + timedelta(milliseconds=e[0]),
        wait_for_system_duration=timedelta(seconds=5),
    )
    windower = win.TumblingWindower(length=timedelta(milliseconds=window_ms), align_to=EPOCH)
    counted = win.count_window("count", events, clock, windower, key=lambda e: str(e[1]))
    op.output("out", counted.down, TestingSink(got))
    t_ready = time.perf_counter()

    t0 = time.perf_counter()
    cli_main(flow, workers_per_process=args.workers)
    job_s = time.perf_counter() - t0

    # (key, (window id, count)); windows aligned to the epoch, so the id is start // length.
    counts = {(int(w), int(k)): int(c) for k, (w, c) in got}
    common.finish(
        lambda: common.reference.check_window_counts(counts, args.ref),
        system="bytewax",
        variant="count_window, TumblingWindower + EventClock (bytewax 0.21.1)",
        workload="streaming",
        job_s=job_s,
        t_ready=t_ready,
    )
