"""Unit tests in a world of one (no launcher): the API surface, every collective's local
semantics against numpy, argument checking and the exception hierarchy."""

import builtins
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import heddle
from heddle import errors

DTYPES = [
    np.float32,
    np.float64,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
]


@pytest.fixture(scope="module")
def comm():
    return heddle.init()


def run_python(code: str, env=None, timeout=60):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("HEDDLE_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        check=False,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_world_of_one(comm):
    assert isinstance(comm, heddle.Comm)
    assert (comm.rank, comm.size) == (0, 1)
    assert (comm.Get_rank(), comm.Get_size()) == (0, 1)
    assert heddle.init() is comm
    assert heddle.is_initialized()
    assert repr(comm) == "<heddle.Comm rank=0 size=1>"
    assert comm.timeout > 0
    comm.Barrier()
    comm.barrier()


def test_version_and_exports():
    assert heddle.__version__ == "0.1.0"
    for name in heddle.__all__:
        assert getattr(heddle, name) is not None, name
    assert heddle.SUM is heddle.comm.SUM
    assert repr(heddle.SUM) == "heddle.SUM" and heddle.MAX.name == "MAX"
    assert repr(heddle.IN_PLACE) == "heddle.IN_PLACE"


def test_ops_and_in_place_pickle_as_singletons():
    for op in (
        heddle.SUM,
        heddle.PROD,
        heddle.MAX,
        heddle.MIN,
        heddle.LAND,
        heddle.LOR,
        heddle.BAND,
        heddle.BOR,
        heddle.BXOR,
    ):
        assert pickle.loads(pickle.dumps(op)) is op
    assert pickle.loads(pickle.dumps(heddle.IN_PLACE)) is heddle.IN_PLACE


def test_exception_hierarchy():
    for cls in (errors.ConfigError, errors.ArgumentError, errors.CommError, errors.LaunchError):
        assert issubclass(cls, heddle.HeddleError)
    assert issubclass(heddle.TimeoutError, heddle.CommError)
    assert issubclass(heddle.TimeoutError, builtins.TimeoutError)
    assert issubclass(heddle.WorkerFailed, heddle.CommError)
    assert issubclass(heddle.ArgumentError, ValueError) and issubclass(
        heddle.ArgumentError, TypeError
    )
    assert issubclass(heddle.ConfigError, ValueError)
    assert str(heddle.TimeoutError("waited")) == "waited"


@pytest.mark.parametrize("dtype", DTYPES)
def test_reductions_in_a_world_of_one(comm, dtype):
    x = (np.arange(10) % 5).astype(dtype)
    out = np.zeros_like(x)
    comm.Allreduce(x, out, op=heddle.SUM)
    np.testing.assert_array_equal(out, x)
    y = x.copy()
    comm.Allreduce(heddle.IN_PLACE, y, op=heddle.MAX)
    np.testing.assert_array_equal(y, x)
    out = np.zeros_like(x)
    comm.Reduce(x, out, op=heddle.MIN, root=0)
    np.testing.assert_array_equal(out, x)
    out = np.zeros_like(x)
    comm.Reduce_scatter_block(x, out, op=heddle.SUM)
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("dtype", [*DTYPES, np.complex64, np.bool_])
def test_data_movement_in_a_world_of_one(comm, dtype):
    x = (np.arange(6) % 2).astype(dtype)
    b = x.copy()
    comm.Bcast(b, root=0)
    np.testing.assert_array_equal(b, x)
    for method in (comm.Gather, comm.Scatter):
        out = np.zeros_like(x)
        method(x, out, root=0)
        np.testing.assert_array_equal(out, x)
    for method in (comm.Allgather, comm.Alltoall):
        out = np.zeros_like(x)
        method(x, out)
        np.testing.assert_array_equal(out, x)
    out = np.zeros_like(x)
    comm.Allgatherv(x, [out, [6]])
    np.testing.assert_array_equal(out, x)


def test_allreduce_does_not_touch_sendbuf_and_writes_recvbuf_memory(comm):
    send = np.arange(5, dtype=np.float64)
    base = np.zeros(9)
    comm.Allreduce(send, base[2:7])
    np.testing.assert_array_equal(base, [0, 0, 0, 1, 2, 3, 4, 0, 0])
    np.testing.assert_array_equal(send, np.arange(5))


OVERLAPPING = {
    # name: the call with sendbuf and recvbuf views of 3 elements of one array
    "Allreduce": lambda c, s, r: c.Allreduce(s, r, op=heddle.SUM),
    "Reduce": lambda c, s, r: c.Reduce(s, r, op=heddle.SUM, root=0),
    "Reduce_scatter_block": lambda c, s, r: c.Reduce_scatter_block(s, r, op=heddle.SUM),
    "Allgather": lambda c, s, r: c.Allgather(s, r),
    "Alltoall": lambda c, s, r: c.Alltoall(s, r),
    "Gatherv": lambda c, s, r: c.Gatherv(s, [r, [3]], root=0),
    "Allgatherv": lambda c, s, r: c.Allgatherv(s, [r, [3]]),
    "Scatterv": lambda c, s, r: c.Scatterv([s, [3]], r, root=0),
    "Alltoallv": lambda c, s, r: c.Alltoallv([s, [3]], [r, [3]]),
}


@pytest.mark.parametrize("send_at, recv_at", [(1, 0), (0, 1)])
@pytest.mark.parametrize("name", sorted(OVERLAPPING))
def test_a_sendbuf_overlapping_the_recvbuf_is_read_before_it_is_written(
    comm, name, send_at, recv_at
):
    """As if the send buffer were copied first (MPI forbids the aliasing; numpy slices make
    it easy): recvbuf gets the old values of the overlapping sendbuf."""
    a = np.arange(1.0, 6.0)
    want = a[send_at : send_at + 3].copy()
    OVERLAPPING[name](comm, a[send_at : send_at + 3], a[recv_at : recv_at + 3])
    np.testing.assert_array_equal(a[recv_at : recv_at + 3], want)


def test_point_to_point_with_oneself(comm):
    comm.Send(np.arange(4, dtype=np.int32), dest=0, tag=5)
    comm.Send(np.arange(3, dtype=np.int32) + 10, dest=0, tag=6)
    buf = np.zeros(8, dtype=np.int32)
    assert comm.Recv(buf, source=0, tag=6) == 3
    np.testing.assert_array_equal(buf[:3], [10, 11, 12])
    assert comm.Recv(buf, source=0, tag=5) == 4
    np.testing.assert_array_equal(buf[:4], [0, 1, 2, 3])
    out = np.zeros(4)
    assert comm.Sendrecv(np.ones(4), dest=0, sendtag=1, recvbuf=out, source=0) == 4
    np.testing.assert_array_equal(out, np.ones(4))


def test_objects_in_a_world_of_one(comm):
    obj = {"a": np.arange(20_000, dtype=np.int64), "b": [1, "two", (3.0,)]}
    assert comm.bcast(obj) is obj
    (g,) = comm.gather(obj)
    np.testing.assert_array_equal(g["a"], obj["a"])
    assert g["b"] == obj["b"]
    assert comm.allgather(7) == [7]
    assert comm.scatter(["x"]) == "x"
    assert comm.alltoall([{"k": 1}]) == [{"k": 1}]
    assert comm.allreduce(5, op=heddle.MAX) == 5
    assert comm.reduce(np.array([1, 2]), op=heddle.SUM).tolist() == [1, 2]
    comm.send(obj, dest=0, tag=9)
    got = comm.recv(source=0, tag=9)
    np.testing.assert_array_equal(got["a"], obj["a"])
    assert got["a"].flags.writeable
    assert comm.sendrecv("ping", dest=0, source=0) == "ping"


def test_split_in_a_world_of_one(comm):
    sub = comm.split(3, key=1)
    assert isinstance(sub, heddle.Comm) and (sub.rank, sub.size) == (0, 1)
    assert comm.Split(heddle.UNDEFINED) is None
    assert comm.split(None) is None


@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda c: c.Allreduce(np.zeros(3), np.zeros(4)), "must hold 4 elements"),
        (
            lambda c: c.Allreduce(np.zeros(4, dtype=np.int32), np.zeros(4)),
            "different element types",
        ),
        (
            lambda c: c.Allreduce(heddle.IN_PLACE, np.zeros(4), op=heddle.BXOR),
            "needs integer or bool",
        ),
        (lambda c: c.Allreduce(heddle.IN_PLACE, np.zeros(4, dtype=bool), op=heddle.PROD), "bool"),
        (lambda c: c.Allreduce(heddle.IN_PLACE, np.zeros(4, dtype=np.float16)), "reductions need"),
        (lambda c: c.Allreduce(heddle.IN_PLACE, np.zeros(4), op=max), "op must be one of"),
        (lambda c: c.Allreduce(heddle.IN_PLACE, (1, 2)), "must be a buffer"),
        (lambda c: c.Allreduce(heddle.IN_PLACE, b"abcdefgh"), "writable"),
        (lambda c: c.Allreduce(heddle.IN_PLACE, np.zeros((4, 4))[:, 1]), "contiguous"),
        (lambda c: c.Bcast(np.zeros(2), root=1), "root 1 is outside"),
        (lambda c: c.Gather(np.zeros(2), None, root=0), "must pass a recvbuf"),
        (lambda c: c.Gather(np.zeros(2), np.zeros(3), root=0), "one sendbuf per rank"),
        (lambda c: c.Scatter(None, np.zeros(2), root=0), "must pass a sendbuf"),
        (lambda c: c.Alltoall(np.zeros(2), np.zeros(3)), "as many as recvbuf"),
        (lambda c: c.Gatherv(np.zeros(2), [np.zeros(2), [1, 1]], root=0), "2 counts for 1 ranks"),
        (lambda c: c.Allgatherv(np.zeros(2), [np.zeros(2), [2], "d"]), "[buffer, counts]"),
        (lambda c: c.Send(np.zeros(2), dest=-1), "dest -1 is outside"),
        (lambda c: c.Recv(np.zeros(2), source=0, tag=2**32), "tag"),
        (lambda c: c.Sendrecv(np.zeros(1), 0, recvbuf=np.zeros(1)), "ANY_SOURCE"),
        (
            lambda c: c.Sendrecv(
                np.zeros(1), 0, sendtag=1, recvbuf=np.zeros(1), source=0, recvtag=2
            ),
            "one tag",
        ),
        (lambda c: c.scatter([1, 2], root=0), "one per rank"),
        (lambda c: c.alltoall([]), "one per rank"),
        (lambda c: c.recv(source=None), "ANY_SOURCE"),
        (lambda c: c.allreduce(1, op="max"), "op must be"),
    ],
)
def test_bad_arguments_raise_argument_error(comm, call, needle):
    with pytest.raises(heddle.ArgumentError) as info:
        call(comm)
    assert needle in str(info.value)


def test_buffer_errors_keep_the_python_cause(comm):
    with pytest.raises(heddle.ArgumentError) as info:
        comm.Allreduce(heddle.IN_PLACE, np.zeros(8)[::2])
    assert info.value.__cause__ is not None


def test_task_and_data_are_submodules_loaded_on_first_use():
    assert heddle.task.TaskGraph and heddle.data.Session
    with pytest.raises(AttributeError):
        heddle.no_such_thing  # noqa: B018


def test_config_errors():
    p = run_python("import heddle; heddle.init()", env={"HEDDLE_TIMEOUT_S": "soon"})
    assert (
        p.returncode == 1
        and "heddle.errors.ConfigError" in p.stderr
        and "HEDDLE_TIMEOUT_S" in p.stderr
    ), p.stderr
    p = run_python("import heddle; heddle.init()", env={"HEDDLE_TIMEOUT": "5"})
    assert "ConfigError" in p.stderr and "did you mean HEDDLE_TIMEOUT_S" in p.stderr, p.stderr


def test_timeout_error_and_the_gil_is_released_while_blocked():
    p = run_python(
        """
        import threading, time, numpy as np, heddle
        comm = heddle.init()
        ticks = 0
        stop = False
        def spin():
            global ticks
            while not stop:
                ticks += 1
                time.sleep(0.001)
        t = threading.Thread(target=spin); t.start()
        time.sleep(0.05)
        before = ticks
        try:
            comm.Recv(np.zeros(1), source=0, tag=1)   # nobody sends: times out
        except heddle.TimeoutError as e:
            during = ticks - before
            print("timeout", isinstance(e, TimeoutError), during > 0)
        stop = True; t.join()
        """,
        env={"HEDDLE_TIMEOUT_S": "0.5"},
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["timeout", "True", "True"], p.stdout


def test_ctrl_c_ends_a_blocked_call_in_a_world_of_one():
    import signal
    import time

    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import numpy as np, heddle\nc = heddle.init()\nprint('ready', "
            "flush=True)\nc.Recv(np.zeros(1), source=0, tag=1)\n",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("HEDDLE_")},
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # let it enter Recv
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 130, (proc.returncode, err)
    assert "interrupted (SIGINT) while blocked" in err


def test_keyboard_interrupt_still_works_in_python_code():
    import signal
    import time

    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time, heddle\nheddle.init()\nprint('ready', flush=True)\n"
            "try:\n    time.sleep(60)\n"
            "except KeyboardInterrupt:\n    print('caught', flush=True)\n",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("HEDDLE_")},
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0 and out.strip() == "caught", (proc.returncode, out, err)


INTERRUPTED_RUNS = {
    # A data-set action whose Python function runs for every record of a huge range.
    "data action": "s.range(0, 10**12).filter(lambda x: False).count()",
    # Words split and counted from 10 million Python strings.
    "value_counts action": "s.from_list(['a b'] * 10**7).words().value_counts().count()",
    # A task job whose source never ends.
    "task job": textwrap.dedent(
        """\
        from heddle.task import Compute, Edge, Job, Source, TaskGraph
        class Forever(Source):
            def next(self, ctx):
                ctx.emit(1)
                return True
        class Sink(Compute):
            def execute(self, ctx, x):
                pass
        g = TaskGraph()
        src = g.source("forever", 1, lambda i: Forever())
        g.connect(src, g.compute("sink", 1, lambda i: Sink()), Edge.hash())
        Job(comm, g).run()"""
    ),
    # A stream run whose generator never ends.
    "stream run": "s.stream_generate(lambda i: i).filter(lambda x: x < 0).run()",
}


@pytest.mark.parametrize("what", sorted(INTERRUPTED_RUNS))
def test_ctrl_c_in_a_job_raises_keyboard_interrupt_and_the_session_stays_usable(what):
    """Ctrl-C aborts a running job, action or stream on its worker: KeyboardInterrupt is
    raised (catchable, as in a notebook), and later actions run normally."""
    import signal
    import time

    code = (
        "import heddle, time\nfrom heddle.data import Session\ncomm = heddle.init()\ns = "
        "Session(comm)\n"
        "print('ready', flush=True)\nstart = time.time()\ntry:\n"
        + textwrap.indent(INTERRUPTED_RUNS[what], "    ")
        + "\nexcept KeyboardInterrupt as e:\n    print('caught', type(e).__name__, flush=True)\n"
        "print('after', s.range(0, 1000).map(lambda x: 2 * x).reduce(lambda a, b: a + b), "
        "flush=True)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("HEDDLE_")},
    )
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        time.sleep(1.0)  # well inside the run
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, (proc.returncode, out, err)
    assert out.split("\n")[:2] == ["caught KeyboardInterrupt", "after 999000"], (out, err)
