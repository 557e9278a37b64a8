"""examples/python/ad_benchmark.py (the Yahoo streaming benchmark's pipeline over Redis) on
a real redis-server: besides the example's own check against its generator's tally, the
views per campaign and window are recounted here from the input stream's JSON and the
campaign table in Redis, and compared with the results the job wrote."""

from __future__ import annotations

import collections
import json
import socket
from pathlib import Path

import redis

from conftest import run_job

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "python" / "ad_benchmark.py")
LIBRARY_JOB = str(Path(__file__).resolve().parent / "jobs" / "apps_ad_benchmark.py")


def views_in_input(r: redis.Redis, window_ms: int) -> collections.Counter:
    table = r.hgetall("ad-events:campaigns")
    views: collections.Counter = collections.Counter()
    for _, fields in r.xrange("ad-events"):
        if "event" in fields:
            ev = json.loads(fields["event"])
            if ev["event_type"] == "view":
                t = ev["event_time"]
                views[(table[ev["ad_id"]], t - t % window_ms)] += 1
    return views


def results(r: redis.Redis) -> dict:
    got: dict = {}
    for _, fields in r.xrange("ad-counts"):
        campaign, start, count, _lag = fields["value"].split(" ")
        assert (campaign, int(start)) not in got, f"a window result came twice: {fields}"
        got[(campaign, int(start))] = int(count)
    return got


def test_ad_events_are_counted_per_campaign_and_window_exactly(redis_url):
    url = f"redis://127.0.0.1:{redis_url}/"
    r = redis.Redis.from_url(url, decode_responses=True)
    for n in (1, 2):
        args = ["--redis", url, "--rate", "3000", "--seconds", "2", "--window-s", "0.5"]
        job = run_job(n, EXAMPLE, *args, "--campaigns", "20")
        assert job.returncode == 0, job
        summary = job.reports[0]
        assert summary["correct"] is True and summary["events"] == 6000, job
        assert summary["latency_p99_ms"] is not None, job
        want = views_in_input(r, 500)
        assert len(want) >= 20 * 4
        assert results(r) == dict(want)


def test_the_library_entry_point_counts_exactly(redis_url):
    """heddle.apps.ad_benchmark (the native pipeline) on 2 ranks, recounted from Redis."""
    url = f"redis://127.0.0.1:{redis_url}/"
    r = redis.Redis.from_url(url, decode_responses=True)
    job = run_job(2, LIBRARY_JOB, url)
    assert job.returncode == 0, job
    report = job.reports[0]
    assert report["correct"] is True and report["events"] == 6000, job
    want = views_in_input(r, 500)
    assert report["views"] == sum(want.values()) and report["windows"] == len(want)
    assert results(r) == dict(want)


def test_an_unreachable_redis_is_named_in_the_error():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        url = f"redis://127.0.0.1:{probe.getsockname()[1]}/"
    job = run_job(2, EXAMPLE, "--redis", url, "--seconds", "1")
    assert job.returncode != 0, job
    assert f"cannot reach Redis at {url}" in job.stderr, job
