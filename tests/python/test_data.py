"""heddle.data: data sets of Python records, in a world of one (errors, keys, batches) and
in jobs of 2, 3 and 4 workers (tests/python/jobs/data_ops.py checks every transformation
and action against a plain Python computation)."""

import collections
import operator
import time

import numpy as np
import pytest

import heddle
from conftest import assert_all_ok, run_job
from heddle.data import Session


@pytest.fixture(scope="module")
def s():
    return Session(heddle.init())


def test_a_pipeline_in_a_world_of_one(s):
    lines = ["a b a", "b c", ""]
    counts = (
        s.from_list(lines).flat_map(str.split).map(lambda w: (w, 1)).reduce_by_key(operator.add)
    )
    assert sorted(counts.collect()) == [("a", 2), ("b", 2), ("c", 1)]
    assert (s.rank, s.size, s.partitions) == (0, 1, 1)
    assert s.broadcast({"x": 1}) == {"x": 1}
    plan = counts.explain()
    assert "KeyedReduce (dataflow operation)" in plan and "from_vec" in plan, plan


def test_exceptions_in_functions_are_raised_as_themselves(s):
    xs = s.range(10)
    with pytest.raises(ValueError, match="bad 3"):
        xs.map(lambda x: x if x != 3 else (_ for _ in ()).throw(ValueError("bad 3"))).count()
    with pytest.raises(ZeroDivisionError):
        xs.filter(lambda x: 1 / (x - 5)).collect()
    with pytest.raises(TypeError):
        xs.flat_map(lambda x: x).count()  # an int is not iterable
    with pytest.raises(ZeroDivisionError):
        xs.reduce(lambda a, b: a / 0)
    with pytest.raises(KeyError):
        xs.map(lambda x: (x % 2, x)).reduce_by_key(lambda a, b: {}[a]).collect()
    with pytest.raises(RuntimeError, match="sink"):
        xs.for_each(lambda x: (_ for _ in ()).throw(RuntimeError("sink")))
    with pytest.raises(ZeroDivisionError):
        s.generate(3, lambda i: 1 / 0).count()
    with pytest.raises(heddle.ArgumentError, match=r"\(key, value\) pairs"):
        xs.group_by_key().collect()
    assert xs.count() == 10  # still usable


def test_words_split_at_ascii_whitespace_like_bytes_split(s, tmp_path):
    text = (
        "héllo wörld\thello\x0bworld\x0cé\r\n\n  foo\u00a0bar  \u3000baz\n" * 40
        + "last line\x1fno newline"
    )
    (tmp_path / "a.txt").write_text(text, encoding="utf-8")
    (tmp_path / "empty.txt").write_text("")
    want = collections.Counter(w.decode() for w in text.encode().split())
    for name, ds in [
        ("text_file", s.text_file(tmp_path / "a.txt")),
        ("text_blocks", s.text_blocks(tmp_path / "a.txt", block_bytes=5)),
        ("str records", s.from_list(text.split("\n"))),
        ("str blocks", s.from_list([text[:333], text[333:]])),
    ]:
        if name == "str blocks":  # the cut may fall inside a word: count each half's words
            want_here = collections.Counter(
                w.decode() for part in (text[:333], text[333:]) for w in part.encode().split()
            )
        else:
            want_here = want
        assert dict(ds.words().value_counts().collect()) == want_here, name
        assert sorted(ds.words().collect()) == sorted(want_here.elements()), name
    binary = s.text_blocks(tmp_path / "a.txt", block_bytes=64, binary=True).words()
    assert dict(binary.value_counts().collect()) == collections.Counter(text.encode().split())
    assert s.from_list([b"a b", b"a"]).words().collect() == [b"a", b"b", b"a"]
    assert s.text_file(tmp_path / "empty.txt").words().value_counts().collect() == []
    # The native words are ordinary records for any later step.
    lengths = s.text_file(tmp_path / "a.txt").words().map(len).value_counts()
    assert dict(lengths.collect()) == collections.Counter(len(w) for w in want.elements())


def test_value_counts_of_any_records_and_word_errors(s, tmp_path):
    records = [3, 3, "3", 3.0, True, (1, ("x", None)), (1, ("x", None)), b"3", None, 10**30, 10**30]
    got = s.from_list(records).value_counts().collect()
    want = [
        (3, 2),
        ("3", 1),
        (3.0, 1),
        (True, 1),
        ((1, ("x", None)), 2),
        (b"3", 1),
        (None, 1),
        (10**30, 2),
    ]
    assert sorted(map(repr, got)) == sorted(map(repr, want))
    with pytest.raises(TypeError, match=r"words\(\) splits str or bytes records, not int"):
        s.range(3).words().count()
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9 au lait\n")
    with pytest.raises(heddle.DataError, match=r"latin1.txt.*UTF-8"):
        s.text_file(tmp_path / "latin1.txt").words().value_counts().collect()
    assert sorted(
        s.text_blocks(tmp_path / "latin1.txt", binary=True).words().value_counts().collect()
    ) == [(b"au", 1), (b"caf\xe9", 1), (b"lait", 1)]


def test_sort_of_lines_natively_and_of_python_records(tmp_path):
    rng = np.random.default_rng(3)
    words = ["zeta", "Äpfel", "apple", "", "日本", "apple pie", "b", "a\tb", "émile", "zz"]
    lines = [
        words[i] + " " + str(rng.integers(0, 50)) for i in rng.integers(0, len(words), 3000)
    ] + ["", "", "last"]
    (tmp_path / "in.txt").write_text("\n".join(lines), encoding="utf-8")  # no final newline
    s = Session(heddle.init(), memory_budget=20_000)  # runs spill
    # UTF-8 byte order = code point order
    assert s.text_file(tmp_path / "in.txt").sort().collect() == sorted(lines)
    by3 = s.text_file(tmp_path / "in.txt").sort(key_bytes=3).collect()
    assert [x.encode()[:3] for x in by3] == sorted(x.encode()[:3] for x in lines)
    assert sorted(by3) == sorted(lines)
    s.text_file(tmp_path / "in.txt").sort().write_text(tmp_path / "out")
    assert "".join(p.read_text() for p in sorted((tmp_path / "out").iterdir())) == "".join(
        x + "\n" for x in sorted(lines)
    )
    # Python records: by themselves, or by a prefix of str / bytes.
    xs = [int(x) for x in rng.integers(-1000, 1000, 2000)]
    assert s.from_list(xs).sort().collect() == sorted(xs)
    assert s.from_list(lines).sort().collect() == sorted(lines)
    bs = [x.encode() for x in lines]
    assert [b[:2] for b in s.from_list(bs).sort(key_bytes=2).collect()] == sorted(b[:2] for b in bs)
    assert s.text_file(tmp_path / "in.txt").map(str.upper).sort().collect() == sorted(
        x.upper() for x in lines
    )
    with pytest.raises(TypeError, match="sorts str or bytes records, not int"):
        s.from_list(xs).sort(key_bytes=2)
    with pytest.raises(ValueError, match="key_bytes"):
        s.from_list(xs).sort(key_bytes=-1)
    with pytest.raises(heddle.ArgumentError, match=r"spill directory .*nope does not exist"):
        Session(heddle.init(), spill_dirs=[tmp_path / "nope"])


def test_parquet_files_read_and_written_against_pyarrow(s, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [
        {
            "id": i,
            "name": f"n{i} ü",
            "score": i / 4,
            "tags": [i, i + 1],
            "maybe": None if i % 3 else i,
        }
        for i in range(1000)
    ]
    # 16 row groups
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "in.parquet", row_group_size=64)
    ds = s.read_parquet(tmp_path / "in.parquet")
    assert ds.collect() == rows
    assert s.read_parquet(tmp_path / "in.parquet", columns=["score", "id"]).collect() == [
        {"score": r["score"], "id": r["id"]} for r in rows
    ]
    ds.filter(lambda r: r["id"] % 2 == 0).write_parquet(tmp_path / "out")
    assert sorted(pq.read_table(tmp_path / "out").to_pylist(), key=lambda r: r["id"]) == [
        r for r in rows if r["id"] % 2 == 0
    ]
    # not dicts: one column "item"
    s.range(10).map(lambda x: x * x).write_parquet(tmp_path / "squares")
    assert pq.read_table(tmp_path / "squares").column_names == ["item"]
    assert sorted(s.read_parquet(tmp_path / "squares").collect()) == [x * x for x in range(10)]
    with pytest.raises(heddle.ArgumentError, match="no column 'nope'"):
        s.read_parquet(tmp_path / "in.parquet", columns=["id", "nope"])
    (tmp_path / "fake.parquet").write_text("not parquet")
    with pytest.raises(heddle.DataError, match=r"fake\.parquet: not a Parquet file"):
        s.read_parquet(tmp_path / "fake.parquet")
    with pytest.raises(heddle.ArgumentError, match="no readable file"):
        s.read_parquet(tmp_path / "missing-*.parquet")


def test_input_errors_name_the_file_and_line(s, tmp_path):
    (tmp_path / "rows.csv").write_text('a,b\n1,2\n"unclosed,3\n')
    (tmp_path / "rows.jsonl").write_text('{"a": 1}\n\n[1, 2\n')
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9\n")
    with pytest.raises(heddle.DataError, match=r"rows.jsonl line 3"):
        s.read_json_lines(tmp_path / "rows.jsonl").count()
    assert s.read_json_lines(tmp_path / "rows.jsonl", on_malformed="skip").collect() == [{"a": 1}]
    with pytest.raises(heddle.DataError, match=r"latin1.txt.*UTF-8"):
        s.text_file(tmp_path / "latin1.txt").count()
    with pytest.raises(heddle.DataError, match=r"UTF-8"):
        s.text_blocks(tmp_path / "latin1.txt").count()
    assert s.text_blocks(tmp_path / "latin1.txt", binary=True).collect() == [b"caf\xe9\n"]
    for source in (s.text_file, s.text_blocks, s.read_json_lines, s.read_csv):
        with pytest.raises(heddle.ArgumentError, match="no readable file"):
            source(tmp_path / "missing-*.txt")
    with pytest.raises(ValueError, match="on_malformed"):
        s.read_csv(tmp_path / "rows.csv", on_malformed="ignore")


def test_csv_rows_of_the_wrong_width_fail_or_are_skipped(s, tmp_path):
    import csv
    import io

    # CRLF, blank, no final newline
    text = 'name,qty,note\r\nx,1,a\r\n\r\ny,2\r\nz,3,c,extra\r\n"w,v",4,d'
    (tmp_path / "ragged.csv").write_text(text, newline="")
    with pytest.raises(
        heddle.DataError, match=r"ragged.csv line 4.*expected 3 fields \(as the header of .*found 2"
    ):
        s.read_csv(tmp_path / "ragged.csv").collect()
    before = s.skipped_rows()
    rows = s.read_csv(tmp_path / "ragged.csv", on_malformed="skip").collect()
    reference = [
        r for r in csv.DictReader(io.StringIO(text)) if None not in r and None not in r.values()
    ]
    assert (
        rows
        == reference
        == [{"name": "x", "qty": "1", "note": "a"}, {"name": "w,v", "qty": "4", "note": "d"}]
    )
    assert s.skipped_rows() - before == 2
    assert s.read_csv(tmp_path / "ragged.csv", header=False, on_malformed="skip").collect() == [
        ["name", "qty", "note"],
        ["x", "1", "a"],
        ["w,v", "4", "d"],
    ]


def test_data_sets_of_two_sessions_do_not_mix(s):
    other = Session(heddle.init())
    with pytest.raises(heddle.ArgumentError, match="different sessions"):
        s.range(3).union(other.range(3))
    with pytest.raises(heddle.ArgumentError, match="different sessions"):
        s.range(3).map(lambda x: (x, x)).join(other.range(3).map(lambda x: (x, x)))


def test_keys_compare_by_value_and_type_and_sort_as_python_does(s):
    keys = [
        3,
        -(2**70),
        2**64 + 1,
        -1,
        0,
        2.5,
        -0.5,
        float("inf"),
        "b",
        "a",
        "ab",
        "",
        b"z",
        b"",
        (1, "a"),
        (1,),
        (0, "z", None),
        None,
        True,
        False,
    ]
    got = [k for k, _ in s.from_list([(k, i) for i, k in enumerate(keys)]).sort_by_key().collect()]
    by_type = {}
    for k in keys:
        by_type.setdefault(type(k), []).append(k)
    order = [type(None), bool, int, float, str, bytes, tuple]
    assert got == [k for t in order for k in sorted(by_type[t])]
    pairs = [
        (1, "int"),
        (1.0, "float"),
        (True, "bool"),
        (np.int64(1), "np"),
        ((1, 2), "t"),
        ((1, 2), "t2"),
        (-0.0, "nz"),
        (0.0, "z"),
    ]
    grouped = {repr(k): sorted(v) for k, v in s.from_list(pairs).group_by_key().collect()}
    assert grouped == {
        "1": ["int", "np"],
        "1.0": ["float"],
        "True": ["bool"],
        "(1, 2)": ["t", "t2"],
        "-0.0": ["nz", "z"],
    } or grouped == {
        "1": ["int", "np"],
        "1.0": ["float"],
        "True": ["bool"],
        "(1, 2)": ["t", "t2"],
        "0.0": ["nz", "z"],
    }


def test_map_batches_formats(s):
    xs = s.range(100)
    assert xs.map_batches(lambda a: a**2, batch_size=16).collect() == [x * x for x in range(100)]
    assert xs.map_batches(lambda b: [len(b)], batch_size=30, batch_format="list").collect() == [
        30,
        30,
        30,
        10,
    ]
    assert xs.map_batches(lambda a: None).collect() == []
    assert xs.map_batches(lambda a: np.float64(a.sum()), batch_size=None).collect() == [4950.0]
    with pytest.raises(ValueError, match="batch_format"):
        xs.map_batches(lambda a: a, batch_format="pandas")
    pa = pytest.importorskip("pyarrow")
    import pyarrow.compute  # noqa: F401

    rows = s.from_list([{"x": i, "y": str(i)} for i in range(10)])
    out = rows.map_batches(
        lambda rb: pa.RecordBatch.from_pydict({"x2": pa.compute.multiply(rb.column("x"), 2)}),
        batch_size=4,
        batch_format="pyarrow",
    )
    assert out.collect() == [{"x2": 2 * i} for i in range(10)]


def test_word_count_matches_a_counter(s, tmp_path):
    text = "".join(f"w{i % 7} w{i % 3} x\n" for i in range(1000))
    (tmp_path / "t.txt").write_text(text)
    counts = (
        s.text_blocks(tmp_path / "t.txt", block_bytes=1000, binary=True)
        .map_partitions(
            lambda blocks: collections.Counter(w for b in blocks for w in b.split()).items()
        )
        .reduce_by_key(operator.add)
        .collect()
    )
    assert dict(counts) == {w.encode(): n for w, n in collections.Counter(text.split()).items()}


@pytest.mark.parametrize("n", [2, 3, 4])
def test_data_sets_on_workers(n, tmp_path):
    job = run_job(n, "data_ops.py", str(tmp_path))
    assert_all_ok(job, n)
    assert all(rep["checks"] >= 55 for rep in job.reports.values()), job.reports


def test_words_of_one_long_line_match_counter(s, tmp_path):
    """One 3 MB line of dense short tokens (read in 64 KiB blocks, most of them inside the
    line) counts like ``Counter(bytes.split())``, as the same words on short lines do."""
    import random

    rng = random.Random(5)
    words = [f"w{rng.randrange(700)}" for _ in range(600_000)]
    line = " ".join(words).encode()
    (tmp_path / "one.txt").write_bytes(b"first line\n" + line + b"\nlast")
    want = collections.Counter((b"first line\n" + line + b"\nlast").split())
    got = dict(s.text_file(tmp_path / "one.txt").words().value_counts().collect())
    assert got == {w.decode(): n for w, n in want.items()}
    blocks = s.text_blocks(tmp_path / "one.txt", block_bytes=4096).collect()
    assert b"".join(b.encode() for b in blocks) == b"first line\n" + line + b"\nlast\n"


def test_writers_refuse_replace_or_append_like_spark_save_modes(s, tmp_path):
    out = tmp_path / "out"
    s.range(10).write_text(out)
    assert (out / "_SUCCESS").exists()
    with pytest.raises(heddle.ArgumentError, match=r"out already holds .* overwrite or append"):
        s.range(3).write_json_lines(out)
    with pytest.raises(ValueError, match="mode must be"):
        s.range(3).write_text(out, mode="replace")
    s.range(3).write_csv(out, mode="overwrite")
    parts = sorted(p.name for p in out.iterdir() if p.name.startswith("part-"))
    assert [x for p in parts for x in (out / p).read_text().splitlines()] == ["0", "1", "2"]
    s.range(3, 5).write_text(out, mode="append")
    assert sorted(x for p in out.glob("part-*") for x in p.read_text().splitlines()) == [
        "0",
        "1",
        "2",
        "3",
        "4",
    ]
    # A failed write leaves nothing that looks like output, and keeps what was there.
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(ZeroDivisionError):
        s.range(10).map(lambda x: 1 // (x - 7)).write_text(out, mode="overwrite")
    assert sorted(p.name for p in out.iterdir()) == before
    failed = tmp_path / "failed"
    with pytest.raises(ZeroDivisionError):
        s.range(10).map(lambda x: 1 // (x - 7)).write_text(failed)
    assert not failed.exists() or list(failed.iterdir()) == []


def test_read_parquet_value_types_columns_and_partitions_against_pyarrow(s, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "i8": pa.array([1, -2, None], pa.int8()),
            "u64": pa.array([0, 2**64 - 1, 7], pa.uint64()),
            "f32": pa.array([0.5, float("inf"), None], pa.float32()),
            "ok": [True, False, None],
            "blob": [b"\x00\xff", b"", None],
            "text": ["a", None, "\u00fc"],
            "nested": [{"x": 1, "y": [1.5]}, None, {"x": 3, "y": []}],
            "lists": [[["a"]], [], None],
        }
    )
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=2)
    assert s.read_parquet(tmp_path / "t.parquet").collect() == table.to_pylist()
    picked = s.read_parquet(tmp_path / "t.parquet", columns=["text", "i8"]).collect()
    want = pq.read_table(tmp_path / "t.parquet", columns=["text", "i8"]).to_pylist()
    assert picked == want and [list(r) for r in picked] == [["text", "i8"]] * 3
    # Row groups are dealt round robin to the partitions, as the Rust API deals them.
    s3 = Session(s.comm, partitions=3)
    pq.write_table(pa.table({"n": list(range(10))}), tmp_path / "n.parquet", row_group_size=2)
    got = s3.read_parquet(tmp_path / "n.parquet").collect()
    groups = [list(range(g, min(g + 2, 10))) for g in range(0, 10, 2)]
    want_order = [x for p in range(3) for g in groups[p::3] for x in g]
    assert got == [{"n": x} for x in want_order]


def test_write_parquet_commits_like_the_other_writers(s, tmp_path):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    out = tmp_path / "pq"
    s.from_list([{"a": i} for i in range(6)]).write_parquet(out)
    assert (out / "_SUCCESS").exists() and not any(
        p.name.startswith("_temporary") for p in out.iterdir()
    )
    with pytest.raises(heddle.ArgumentError, match="already holds"):
        s.from_list([{"a": 1}]).write_parquet(out)
    s.from_list([{"a": 9}]).write_parquet(out, mode="overwrite")
    assert pq.read_table(out).to_pylist() == [{"a": 9}]


def test_stages_declare_resources_checked_and_held_to(s):
    # A contract within what the worker offers changes nothing but placement.
    squares = s.range(0, 4).map(lambda x: x * x).resources(cpus=0.5, memory="64MiB")
    assert squares.collect() == [0, 1, 4, 9]
    # One that fits no worker fails the action before anything runs, naming the stage.
    with pytest.raises(heddle.PlanError, match=r"map#\d+\[0\] does not fit.*memory"):
        s.range(0, 4).map(lambda x: x + 1).resources(memory="1024TiB").collect()
    with pytest.raises(ValueError, match="not an amount of bytes"):
        s.range(0, 4).resources(net_bytes_per_s="fast")
    # 2 MiB of records held to 2 MiB/s on the edge after the stage: about 1 s (an upper
    # bound on the rate only, with room for the bucket's 50 ms burst and the last message
    # sent before it is paid for: a slower machine only sends slower).
    blocks = s.range(0, 512).map(lambda i: bytes(4096)).resources(net_bytes_per_s="2MiB")
    started = time.monotonic()
    assert blocks.repartition().count() == 512
    elapsed = time.monotonic() - started
    assert (2 << 20) / elapsed / s.partitions <= 1.1 * (2 << 20), elapsed
