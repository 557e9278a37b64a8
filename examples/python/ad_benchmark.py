"""The Yahoo streaming benchmark's pipeline over a real Redis, with heddle.data (the Rust
``ad_benchmark`` example's job, same flags, same output): ad events (JSON) produced into a
Redis stream at ``--rate`` events/s for ``--seconds``, filtered to views, joined with the
campaign table (a Redis hash every worker loads), counted per campaign in tumbling
event-time windows, and the results written to the Redis stream ``--output-key`` as
``campaign start count lag_ms``. Rank 0 produces the events (a thread pipelining XADDs
every 10 ms) with its own tally, reads the results back after the job and checks them;
it prints one JSON line and exits 1 if a count is wrong.

    heddle run -n 2 examples/python/ad_benchmark.py --redis redis://127.0.0.1:6379/ \\
        --rate 20000 --seconds 30

Needs the ``redis`` package (``pip install redis``; in tests/python/requirements.txt).
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import threading
import time
from typing import Any

import redis

import heddle
from heddle.data import Session, Window

TYPES = ("view", "click", "purchase")


def ad_id(campaign: int, ad: int) -> str:
    return f"ad-{campaign:04}-{ad:02}"


def produce(args, window_ms: int, out: dict) -> None:
    """Produces the events, then the end marker; leaves the tally, the count and the last
    event's time in ``out`` (or the error)."""
    try:
        r = redis.Redis.from_url(args.redis)
        rng = random.Random(args.seed)
        tally: collections.Counter = collections.Counter()
        total, produced, last = int(args.rate * args.seconds), 0, 0
        start = time.perf_counter()
        while produced < total:
            due = min(int((time.perf_counter() - start) * args.rate), total)
            if due == produced:
                time.sleep(0.01)
                continue
            pipe = r.pipeline(transaction=False)
            for _ in range(produced, due):
                campaign = rng.randrange(args.campaigns)
                ad = rng.randrange(args.ads_per_campaign)
                event_type = TYPES[rng.randrange(3)]
                t = time.time_ns() // 1_000_000
                event = {
                    "user_id": f"user-{rng.randrange(100_000):06}",
                    "page_id": f"page-{rng.randrange(10_000):05}",
                    "ad_id": ad_id(campaign, ad),
                    "ad_type": "banner",
                    "event_type": event_type,
                    "event_time": t,
                    "ip_address": "10.0.0.1",
                }
                pipe.xadd(args.key, {"event": json.dumps(event)})
                if event_type == "view":
                    tally[(f"campaign-{campaign:04}", t - t % window_ms)] += 1
                last = t
            pipe.execute()
            produced = due
        r.xadd(args.key, {"end": "1"})
        out.update(tally=tally, produced=produced, last=last)
    except redis.RedisError as e:
        out["error"] = f"producing into {args.key} at {args.redis}: {e}"


def views(entry: tuple[str, dict[str, str]]) -> list[tuple[str, int]]:
    """``(ad, event time)`` of a view event; nothing for the others."""
    json_text = entry[1].get("event")
    if json_text is None:
        return []
    ev = json.loads(json_text)
    return [(ev["ad_id"], ev["event_time"])] if ev["event_type"] == "view" else []


def later_and_sum(a: tuple, b: tuple) -> tuple:
    return (a[0] if a[0] > b[0] else b[0], a[1] + b[1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--redis", required=True, help="the Redis server, redis://host:port/")
    p.add_argument("--rate", type=float, default=10_000.0, help="events produced per second")
    p.add_argument("--seconds", type=float, default=30.0, help="seconds of events")
    p.add_argument("--campaigns", type=int, default=100)
    p.add_argument("--ads-per-campaign", type=int, default=10)
    p.add_argument("--window-s", type=float, default=10.0, help="window length in seconds")
    p.add_argument("--key", default="ad-events", help="the events' stream (emptied first)")
    p.add_argument("--output-key", default="ad-counts", help="the results' stream")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if not (args.rate > 0 and args.seconds > 0 and args.window_s >= 0.001):
        p.error("--rate and --seconds must be above 0, --window-s at least 0.001")
    if args.campaigns < 1 or args.ads_per_campaign < 1:
        p.error("--campaigns and --ads-per-campaign must be above 0")

    comm = heddle.init()
    table_key = f"{args.key}:campaigns"
    try:
        r = redis.Redis.from_url(args.redis, decode_responses=True)
        if comm.rank == 0:
            r.delete(args.key, args.output_key, table_key)
            r.hset(
                table_key,
                mapping={
                    ad_id(c, a): f"campaign-{c:04}"
                    for c in range(args.campaigns)
                    for a in range(args.ads_per_campaign)
                },
            )
        comm.barrier()
        table = r.hgetall(table_key)
    except redis.RedisError as e:
        print(
            f"error: cannot reach Redis at {args.redis}: {e}; is redis-server running?",
            file=sys.stderr,
        )
        return 1
    window_ms = int(args.window_s * 1000)
    started = time.perf_counter()
    produced: dict[str, Any] = {}
    generator = None
    if comm.rank == 0:
        generator = threading.Thread(target=produce, args=(args, window_ms, produced))
        generator.start()
    s = Session(comm)
    by_campaign = (
        s.redis_stream(args.redis, args.key, end_field="end")
        .flat_map(views)
        .flat_map(lambda av: [(table[av[0]], (av[1], 1))] if av[0] in table else [])
    )
    window = Window.tumbling(window_ms).event_time(50, 0)
    counts = by_campaign.window(window, later_and_sum, event_time=lambda v: v[0])
    lines = counts.map(
        lambda w: f"{w.key} {w.start} {w.value[1]} {time.time_ns() // 1_000_000 - w.end}"
    )
    lines.write_redis(args.redis, args.output_key)
    comm.barrier()  # every worker's results are in Redis
    job_s = time.perf_counter() - started
    if generator is None:
        return 0
    generator.join()
    if "error" in produced:
        print(f"error: {produced['error']}", file=sys.stderr)
        return 1
    got: collections.Counter = collections.Counter()
    lags = []
    for entry_id, fields in r.xrange(args.output_key):
        parts = fields.get("value", "").split(" ")
        if len(parts) != 4:
            print(
                f"error: output entry {entry_id} is not `campaign start count lag`", file=sys.stderr
            )
            return 1
        campaign, start, count, lag = parts[0], int(parts[1]), int(parts[2]), int(parts[3])
        got[(campaign, start)] += count
        if start + window_ms <= produced["last"]:
            lags.append(lag)
    lags.sort()
    pct = lambda q: lags[min(int(len(lags) * q), len(lags) - 1)] if lags else None  # noqa: E731
    correct = got == produced["tally"]
    print(
        json.dumps(
            {
                "example": "ad_benchmark",
                "api": "python",
                "input_rate": args.rate,
                "events": produced["produced"],
                "views": sum(produced["tally"].values()),
                "windows": len(got),
                "throughput_eps": produced["produced"] / job_s,
                "latency_p50_ms": pct(0.5),
                "latency_p99_ms": pct(0.99),
                "job_s": job_s,
                "correct": correct,
            }
        )
    )
    if not correct:
        print(
            f"error: window counts differ from the generator's tally: "
            f"{len(produced['tally'])} windows expected, {len(got)} written",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
