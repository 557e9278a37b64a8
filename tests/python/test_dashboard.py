"""The launcher's dashboard: `/metrics` read by Prometheus' own parser while a Python stream
runs, and the page itself rendered by headless Chromium (through Selenium and Debian's
chromedriver) while the Rust `stream_window` example runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from conftest import JOBS, job_env

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "target" / "test-artifacts"
CHROMEDRIVER = "/usr/bin/chromedriver"


def start(cmd: list[str]) -> tuple[subprocess.Popen, str]:
    """Starts a job with a dashboard on a free port; returns it and the dashboard's URL."""
    proc = subprocess.Popen(
        cmd,
        env=job_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    prefix = "heddle: dashboard at "
    assert line.startswith(prefix), line
    return proc, line[len(prefix) :].strip()


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def wait_for_graph(url: str) -> dict:
    until = time.monotonic() + 60
    while True:
        job = json.loads(get(url + "api/v1/job"))
        tasks = json.loads(get(url + "api/v1/tasks"))["tasks"]
        if job["graph"] and sum(t["records_out"] for t in tasks) > 0:
            return job
        assert time.monotonic() < until, job
        time.sleep(0.2)


def finish(proc: subprocess.Popen) -> tuple[str, str]:
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    return out, err


def test_metrics_parse_with_the_reference_parser_during_a_python_stream():
    cmd = [sys.executable, "-m", "heddle", "run", "-n", "2"]
    proc, url = start([*cmd, str(JOBS / "dashboard_stream.py"), "8"])
    try:
        wait_for_graph(url)
        time.sleep(1.5)  # a second report, so that rates and ratios exist
        text = get(url + "metrics")
        request = urllib.request.Request(
            url + "metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
        )
        with urllib.request.urlopen(request, timeout=10) as r:
            om_kind, om = r.headers["Content-Type"], r.read().decode()
    finally:
        out, _ = finish(proc)
    # What Prometheus asks for: OpenMetrics, read by its reference parser too.
    assert om_kind.startswith("application/openmetrics-text"), om_kind
    om_families = {f.name: f.type for f in openmetrics_families(om)}
    assert om_families["heddle_task_records_out"] == "counter", om_families
    assert om_families["heddle_collective_seconds"] == "histogram", om_families
    families = {f.name: f for f in text_string_to_metric_families(text)}
    kinds = {name: f.type for name, f in families.items()}
    expected = {
        "heddle_task_records_in": "counter",
        "heddle_task_records_out": "counter",
        "heddle_edge_backpressure_ratio": "gauge",
        "heddle_bytes_sent": "counter",
        "heddle_collective_seconds": "histogram",
        "heddle_worker_resident_memory_bytes": "gauge",
        "heddle_worker_cpu_seconds": "counter",
    }
    for name, kind in expected.items():
        assert kinds.get(name) == kind, (name, kinds)
    out_total = sum(s.value for s in families["heddle_task_records_out"].samples)
    assert out_total > 0
    tasks = {s.labels["task"] for s in families["heddle_task_records_in"].samples}
    assert any(t.startswith("window") for t in tasks), tasks
    for s in families["heddle_edge_backpressure_ratio"].samples:
        assert 0.0 <= s.value <= 1.0, s
    for s in families["heddle_worker_resident_memory_bytes"].samples:
        assert s.value > 1 << 20, s
    # Every histogram's buckets are cumulative and end in +Inf equal to its count.
    by_series: dict[tuple, list] = {}
    counts = {}
    for s in families["heddle_collective_seconds"].samples:
        key = (s.labels["operation"], s.labels["algorithm"])
        if s.name.endswith("_bucket"):
            by_series.setdefault(key, []).append((float(s.labels["le"]), s.value))
        elif s.name.endswith("_count"):
            counts[key] = s.value
    assert by_series, "collectives ran (the job's start and end use them)"
    for key, buckets in by_series.items():
        values = [v for _, v in sorted(buckets)]
        assert values == sorted(values) and sorted(buckets)[-1][0] == float("inf"), key
        assert values[-1] == counts[key], key
    assert '"windows"' in out


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    options.add_argument("--window-size=1400,1800")
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def test_the_page_in_chromium_shows_every_task_and_live_throughput():
    if not os.path.exists(CHROMEDRIVER):
        pytest.fail(
            f"NOT TESTED: {CHROMEDRIVER} is missing: apt-get install chromium chromium-driver "
            "(make test-deps installs them)"
        )
    from selenium.webdriver.common.by import By

    heddle = REPO / "target" / "release" / "heddle"
    example = REPO / "target" / "release" / "examples" / "stream_window"
    if not heddle.exists() or not example.exists():
        pytest.fail(f"build {heddle} and {example} first (make test does)")
    args = ["--generate", "--events", "24000000", "--rate", "2000000"]
    proc, url = start(
        [str(heddle), "run", "--dashboard", "127.0.0.1:0", "-n", "2", "--", str(example), *args]
    )
    driver = browser()
    try:
        job = wait_for_graph(url)
        names = [v["name"] for v in job["graph"]["vertices"]]
        driver.get(url)

        def updates() -> int:
            return int(driver.find_element(By.TAG_NAME, "body").get_attribute("data-updates"))

        def figure() -> str:
            return driver.find_element(By.ID, "tasks").text

        def page() -> str:
            return driver.find_element(By.TAG_NAME, "body").text

        until = time.monotonic() + 30
        while updates() < 1 or not all(n in page() for n in names):
            assert time.monotonic() < until, page()
            time.sleep(0.2)
        first, seen = figure(), updates()
        while updates() < seen + 2:
            assert time.monotonic() < until + 30, "the page stopped updating"
            time.sleep(0.2)
        second = figure()
        assert first != second, "the tasks' figures did not change between two reads"
        graph = driver.find_element(By.ID, "graph").text
        for n in names:
            assert n in graph, (n, graph)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / "dashboard.png"
        driver.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
        finish(proc)
        # The page left open says the job ended.
        until = time.monotonic() + 30
        while not driver.find_element(By.ID, "ended").is_displayed():
            assert time.monotonic() < until, "the page never said the job ended"
            time.sleep(0.3)
        assert "job has ended" in driver.find_element(By.ID, "ended").text
    finally:
        driver.quit()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
