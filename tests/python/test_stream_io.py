"""heddle.data stream sources and sinks in a world of one: a socket source and sink, a
growing file followed to its end marker, and a real redis-server's streams as source and
sink (windows and the rest: test_stream.py)."""

import operator
import socket
import subprocess
import threading
import time

import pytest

import heddle
from heddle.data import Session, Window


@pytest.fixture(scope="module")
def s():
    return Session(heddle.init())


def serve_lines(lines):
    """A TCP server that sends ``lines`` to its first client, then closes; its address."""
    server = socket.create_server(("127.0.0.1", 0))

    def send():
        conn, _ = server.accept()
        with conn:
            conn.sendall("".join(f"{x}\n" for x in lines).encode())
        server.close()

    threading.Thread(target=send, daemon=True).start()
    return server.getsockname()


def collect_lines():
    """A TCP server that keeps every line its clients send; its address and a function
    waiting for the lines."""
    server = socket.create_server(("127.0.0.1", 0))
    got, done = [], threading.Event()

    def receive():
        conn, _ = server.accept()
        with conn, conn.makefile(encoding="utf-8") as f:
            got.extend(line.rstrip("\n") for line in f)
        server.close()
        done.set()

    threading.Thread(target=receive, daemon=True).start()

    def lines():
        assert done.wait(30), "the sink did not close its connection"
        return got

    return server.getsockname(), lines


def test_socket_source_and_sink(s):
    source = serve_lines([f"line {i} é" for i in range(500)])
    sink, received = collect_lines()
    s.socket_text(source).map(str.upper).write_socket(sink)
    assert received() == [f"LINE {i} É" for i in range(500)]


def test_a_growing_file_is_followed_until_its_end_marker(s, tmp_path):
    path = tmp_path / "log.txt"

    def grow():
        for batch in range(5):
            with open(path, "a", encoding="utf-8") as f:
                f.writelines(f"event {batch * 40 + i}\n" for i in range(40))
            time.sleep(0.01)
        with open(path, "a", encoding="utf-8") as f:
            f.write("END\n")

    writer = threading.Thread(target=grow)
    writer.start()
    s.follow_file(path, end_marker="END").filter(lambda x: x.endswith("7")).write_lines(
        tmp_path / "out"
    )
    writer.join()
    lines = [x for p in sorted((tmp_path / "out").iterdir()) for x in p.read_text().splitlines()]
    assert sorted(lines) == sorted(f"event {i}" for i in range(200) if i % 10 == 7)


def test_redis_stream_source(s, redis_url):
    port = redis_url
    cli = ["redis-cli", "-p", str(port)]
    for i in range(120):
        subprocess.run(
            [*cli, "XADD", "events", "*", "word", f"w{i % 4}", "n", str(i)],
            check=True,
            capture_output=True,
        )
    subprocess.run([*cli, "XADD", "events", "*", "__end__", "1"], check=True, capture_output=True)
    entries = s.redis_stream(f"redis://127.0.0.1:{port}/", "events", end_field="__end__").collect()
    assert [e[1] for e in entries] == [{"word": f"w{i % 4}", "n": str(i)} for i in range(120)]
    assert all(isinstance(e[0], str) and "-" in e[0] for e in entries)
    counts = (
        s.redis_stream(f"redis://127.0.0.1:{port}/", "events", end_field="__end__")
        .map(lambda e: (e[1]["word"], 1))
        .window(Window.tumbling_count(10), operator.add)
        .collect()
    )
    assert sorted((w.key, w.value) for w in counts) == sorted(
        (f"w{k}", 10) for k in range(4) for _ in range(3)
    )


def test_redis_stream_sink(s, redis_url):
    port = redis_url
    url = f"redis://127.0.0.1:{port}/"
    s.stream_from_list([f"r{i}" for i in range(300)] + ["日本 ü"]).write_redis(url, "out")
    listed = subprocess.run(
        ["redis-cli", "-p", str(port), "XLEN", "out"], check=True, capture_output=True, text=True
    ).stdout
    assert int(listed) == 301
    # Read back with the source, ended by an entry of our own.
    subprocess.run(
        ["redis-cli", "-p", str(port), "XADD", "out", "*", "__end__", "1"],
        check=True,
        capture_output=True,
    )
    back = s.redis_stream(url, "out", end_field="__end__").map(lambda e: e[1]["value"]).collect()
    assert back == [f"r{i}" for i in range(300)] + ["日本 ü"]
    # An unbounded stream into Redis, stopped after a number of records.
    s.stream_generate(lambda i: i).write_redis(url, "numbers", max_records=500)
    n = int(
        subprocess.run(
            ["redis-cli", "-p", str(port), "XLEN", "numbers"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    assert n >= 500
    with pytest.raises(heddle.DataError, match=r"127\.0\.0\.1:1"):
        s.stream_from_list(["x"]).write_redis("redis://127.0.0.1:1/", "nowhere")
