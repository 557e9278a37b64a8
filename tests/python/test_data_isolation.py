"""Data-API stages as isolated processes (``ds.resources(memory=...)`` or
``isolation="process"``): the same records as threads and as ``collections.Counter``;
each partition of the stage in a process forked from its worker; a stage over its memory
contract, or raising, fails the action naming the stage; what it prints is not lost; a
stage that cannot be a process is refused by name; the same on several workers."""

import collections
import os
import subprocess
import sys
import textwrap

import pytest

import heddle
from conftest import assert_all_ok, run_job
from heddle.data import Session
from heddle.task import Resources

LINES = [" ".join(f"w{(i * 7 + k) % 23}" for k in range(i % 9)) for i in range(2000)]


@pytest.fixture(scope="module")
def session():
    return Session(heddle.init(), partitions=2)


def counts(session, **contract):
    words = session.from_list(LINES).flat_map(str.split)
    if contract:
        words = words.resources(**contract)
    pairs = words.map(lambda w: (w, 1))
    if contract:
        pairs = pairs.resources(**contract)
    return dict(pairs.reduce_by_key(lambda a, b: a + b).collect())


@pytest.mark.parametrize(
    "contract",
    [
        {},
        {"memory": "256MiB"},
        {"isolation": "process"},
        {"resources": Resources(cpus=0.5, memory="256MiB")},
        {"memory": "256MiB", "isolation": "thread"},
    ],
)
def test_isolated_stages_give_the_records_threads_give(session, contract):
    want = collections.Counter(w for line in LINES for w in line.split())
    assert counts(session, **contract) == want


def pids(session, **contract):
    return set(session.range(0, 200).map(lambda _: os.getpid()).resources(**contract).collect())


def test_each_partition_runs_in_a_process_of_its_own(session):
    me = os.getpid()
    isolated = pids(session, memory="128MiB")
    assert me not in isolated and len(isolated) == session.partitions, isolated
    assert pids(session) == {me}
    assert pids(session, memory="128MiB", isolation="thread") == {me}


def hog(x):
    import numpy as np

    return x + int(np.ones(256 << 20, dtype=np.uint8).sum())  # 256 MiB touched


def test_a_stage_over_its_memory_contract_fails_by_name(session):
    with pytest.raises(heddle.HeddleError) as failed:
        session.range(0, 2).map(hog).resources(memory="64MiB").collect()
    text = str(failed.value)
    assert "map" in text and "memory contract of 64 MiB" in text, text
    # The worker and its next action are untouched.
    assert sorted(session.range(0, 5).map(lambda x: x * x).collect()) == [0, 1, 4, 9, 16]


def refuse(x):
    if x == 3:
        raise ValueError(f"refusing {x} in the stage")
    return x


def test_an_exception_in_an_isolated_stage_names_it(session):
    with pytest.raises(heddle.HeddleError, match=r"(?s)map.*ValueError: refusing 3"):
        session.range(0, 10).map(refuse).resources(isolation="process").collect()
    assert sorted(session.range(0, 3).collect()) == [0, 1, 2]


def test_what_an_isolated_stage_prints_is_not_lost(tmp_path):
    script = tmp_path / "prints.py"
    script.write_text(
        textwrap.dedent(
            """
            import heddle
            from heddle.data import Session

            def say(x):
                print("said from the isolated stage", x)
                return x

            s = Session(heddle.init())
            s.from_list(["x"]).map(say).resources(isolation="process").collect()
            """
        )
    )
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True
    )
    assert "said from the isolated stage x" in out.stdout, out


def test_stages_that_cannot_be_processes_are_refused_by_name(session):
    with pytest.raises(
        heddle.HeddleError, match=r"vertex '\w+#\d+' asks to run as an isolated process"
    ):
        session.range(0, 3).resources(isolation="process").collect()
    with pytest.raises(ValueError, match="isolation='vm'"):
        session.range(0, 3).map(abs).resources(isolation="vm")


@pytest.mark.parametrize("n", [2])
def test_isolated_stages_on_every_worker(n):
    job = run_job(n, "data_isolation.py")
    assert_all_ok(job, n)
