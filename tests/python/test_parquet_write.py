"""DataSet.write_parquet (the native writer, crates/heddle-python/src/data_parquet_write.rs)
against pyarrow as the independent reference: the files read back with ``pq.read_table``
hold the records, with the schema ``pa.Table.from_pylist`` infers from them; values that
have no Parquet form raise DataError and leave nothing behind; jobs of 2 and 3 workers in
tests/python/jobs/parquet_write.py."""

import datetime as dt
import decimal
import subprocess
import sys
import zoneinfo

import pytest

import heddle
from conftest import assert_all_ok, run_job
from heddle.data import Session

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

UTC = dt.timezone.utc
PLUS2 = dt.timezone(dt.timedelta(hours=2))
MINUS530 = dt.timezone(dt.timedelta(hours=-5, minutes=-30))
PARIS = zoneinfo.ZoneInfo("Europe/Paris")

#: Records of every supported kind, each written to one file (a world of one, one partition).
CASES = {
    "ints": [{"a": 1}, {"a": -(2**63)}, {"a": 2**63 - 1}, {"a": 0}],
    "floats": [{"x": 1.5}, {"x": -0.0}, {"x": float("inf")}, {"x": 1e-300}],
    "ints among floats": [{"x": 1}, {"x": 2.5}, {"x": None}, {"x": -(2**53)}],
    "str": [{"s": "héllo ✓ 日本"}, {"s": ""}, {"s": "😀\x00nul"}, {"s": None}],
    "bytes": [{"b": b"\x00\xff"}, {"b": bytearray(b"ab")}, {"b": b""}, {"b": None}],
    "bools": [{"t": True}, {"t": False}, {"t": None}],
    "missing keys": [{"a": 1, "b": "x"}, {"b": "y"}, {"c": None, "a": 3}, {}],
    "a column of only None": [{"a": None, "b": 1}, {"a": None, "b": 2}],
    "lists": [{"l": [1, 2]}, {"l": []}, {"l": None}, {"l": [None, 3]}, {"l": (4, 5)}],
    "lists of lists": [{"l": [[1], [2, 3.5]]}, {"l": [[]]}, {"l": [None]}],
    "lists of only None": [{"l": [None]}, {"l": []}],
    "structs": [{"p": {"x": 1, "y": "a"}}, {"p": {"y": "b", "z": 2.5}}, {"p": None}],
    "lists of structs": [{"l": [{"k": 1}, {"k": 2, "v": "x"}, None]}, {"l": []}],
    "structs of lists": [{"p": {"xs": [1, 2], "n": {"deep": True}}}, {"p": {"xs": None}}],
    "naive datetimes": [
        {"t": dt.datetime(2024, 2, 29, 23, 59, 59, 999_999)},
        {"t": dt.datetime(1969, 12, 31, 0, 0, 0, 1)},
        {"t": dt.datetime(1, 1, 1)},
        {"t": dt.datetime(9999, 12, 31, 23, 59, 59)},
        {"t": None},
    ],
    "datetimes in UTC": [{"t": dt.datetime(2020, 1, 1, 12, tzinfo=UTC)}, {"t": None}],
    "datetimes in one fixed zone": [
        {"t": dt.datetime(2020, 1, 1, 12, tzinfo=PLUS2)},
        {"t": dt.datetime(1960, 6, 1, tzinfo=PLUS2)},
    ],
    "datetimes in a negative zone": [{"t": dt.datetime(2020, 1, 1, 1, tzinfo=MINUS530)}],
    "datetimes in a zoneinfo zone": [
        {"t": dt.datetime(2020, 1, 1, 12, tzinfo=PARIS)},
        {"t": dt.datetime(2020, 7, 1, 12, tzinfo=PARIS)},
    ],
    "datetimes in several zones": [
        {"t": dt.datetime(2020, 1, 1, 12, tzinfo=UTC)},
        {"t": dt.datetime(2020, 1, 1, 12, tzinfo=PLUS2)},
        {"t": dt.datetime(2020, 1, 1, 12, tzinfo=PARIS)},
    ],
    "dates": [
        {"d": dt.date(2024, 2, 29)},
        {"d": dt.date(1900, 3, 1)},
        {"d": dt.date(1, 1, 1)},
        {"d": dt.date(9999, 12, 31)},
        {"d": None},
    ],
    "many kinds at once": [
        {"i": i, "f": i / 3, "s": f"r{i}", "b": bytes([i]), "ok": i % 2 == 0, "n": None}
        for i in range(50)
    ],
    "not dicts: ints": [1, 2, None, 3],
    "not dicts: str": ["a", None, "ü", ""],
    "not dicts: tuples": [(1, 2), (3,), ()],
    "not dicts: dates": [dt.date(2020, 1, 2), None],
}

#: The kinds heddle's own read_parquet reads back as they were written.
READ_BACK = [name for name in CASES if "date" not in name]


def reference(records):
    """What pyarrow makes of the records: dicts as columns, other records as ``item``.
    ``from_pylist`` takes the columns of the first record only; heddle takes the union of
    every record's keys (in first-seen order), so the records get each key first."""
    if isinstance(records[0], dict):
        keys = list(dict.fromkeys(k for r in records for k in r))
        return pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in records])
    return pa.table({"item": records})


@pytest.fixture(scope="module")
def s():
    return Session(heddle.init())


@pytest.mark.parametrize("case", list(CASES))
def test_files_hold_the_records_with_pyarrows_schema(s, tmp_path, case):
    records = CASES[case]
    s.from_list(records).write_parquet(tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "_SUCCESS",
        "part-00000.parquet",
    ]
    got = pq.read_table(tmp_path / "out" / "part-00000.parquet")
    want = reference(records)
    assert got.schema.equals(want.schema), (got.schema, want.schema)
    assert got.to_pylist() == want.to_pylist()


@pytest.mark.parametrize("case", READ_BACK)
def test_heddles_reader_reads_back_what_was_written(s, tmp_path, case):
    records = CASES[case]
    s.from_list(records).write_parquet(tmp_path / "out")
    want = reference(records).to_pylist()
    if not isinstance(records[0], dict):
        want = [row["item"] for row in want]
    assert s.read_parquet(tmp_path / "out").collect() == want


def test_a_round_trip_gives_back_the_records(s, tmp_path):
    records = [
        {"id": i, "name": f"n{i} ü", "score": i / 4, "tags": [i, i + 1], "blob": b"x" * i}
        for i in range(300)
    ]
    s.from_list(records).write_parquet(tmp_path / "rows")
    assert s.read_parquet(tmp_path / "rows").collect() == records
    s.from_list(["a", "b", ""]).write_parquet(tmp_path / "items")
    assert s.read_parquet(tmp_path / "items").collect() == ["a", "b", ""]


def test_aware_datetimes_are_stored_in_utc(s, tmp_path):
    t = dt.datetime(2020, 1, 1, 12, tzinfo=PLUS2)
    s.from_list([{"t": t}]).write_parquet(tmp_path / "out")
    got = pq.read_table(tmp_path / "out").column("t").cast(pa.int64()).to_pylist()
    assert got == [int(t.timestamp()) * 1_000_000]


def test_each_partition_is_one_file_and_empty_ones_none(tmp_path):
    s3 = Session(heddle.init(), partitions=3)
    s3.from_list([{"k": i} for i in range(7)]).write_parquet(tmp_path / "seven")
    parts = sorted(p.name for p in (tmp_path / "seven").glob("part-*"))
    assert parts == [f"part-{i:05d}.parquet" for i in range(3)]
    rows = [r for p in parts for r in pq.read_table(tmp_path / "seven" / p).to_pylist()]
    assert sorted(r["k"] for r in rows) == list(range(7))
    s3.from_list([{"k": 1}]).write_parquet(tmp_path / "one")
    assert len(list((tmp_path / "one").glob("part-*"))) == 1


def test_pyarrow_is_not_imported(tmp_path):
    code = (
        "import sys; sys.modules['pyarrow'] = None\n"
        "import heddle; from heddle.data import Session\n"
        f"Session(heddle.init()).from_list([{{'a': 1}}]).write_parquet({str(tmp_path)!r})\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert pq.read_table(tmp_path).to_pylist() == [{"a": 1}]


#: Records that cannot be written, and what the error says.
BAD = {
    "str among ints": (
        [{"a": 1}, {"a": 2}, {"a": "x"}],
        r"partition 0, record 2, column 'a': a value of type str among values of type int",
    ),
    "int among str": (
        [{"a": "x"}, {"a": 1}],
        r"record 1, column 'a': a value of type int among .* str",
    ),
    "bool among ints": (
        [{"a": 1}, {"a": True}],
        r"record 1, column 'a': a value of type bool among",
    ),
    "str among floats in a list": (
        [{"l": [1.5]}, {"l": [2, "x"]}],
        r"record 1, column 'l\[\]': a value of type str among values of type float",
    ),
    "list among structs": (
        [{"p": {"x": 1}}, {"p": [1]}],
        r"column 'p': a value of type list among .* dict",
    ),
    "an int beyond int64": (
        [{"a": 1}, {"a": 2**63}],
        r"record 1, column 'a': the int 9223372036854775808 does not fit",
    ),
    "an object": (
        [{"a": object()}],
        r"record 0, column 'a': a value of type object has no Parquet type",
    ),
    "a Decimal": (
        [{"a": 1, "d": decimal.Decimal("1.5")}],
        r"column 'd': a value of type Decimal has no Parquet type",
    ),
    "naive and aware datetimes": (
        [{"t": dt.datetime(2020, 1, 1)}, {"t": dt.datetime(2020, 1, 1, tzinfo=UTC)}],
        r"record 1, column 't': naive and timezone-aware datetimes",
    ),
    "a key that is not a str": ([{"a": 1}, {2: 3}], r"record 1: the dict key 2 is of type int"),
    "a dict among other records": (
        [1, {"a": 1}],
        r"record 1: a record of type dict among records that are not dicts",
    ),
    "an item among dicts": ([{"a": 1}, 5], r"record 1: a record of type int among dicts"),
    "an empty struct": ([{"p": {}}], r"column 'p': a dict with no keys"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_values_without_a_parquet_form_raise_and_write_nothing(s, tmp_path, case):
    records, message = BAD[case]
    out = tmp_path / "out"
    s.from_list([{"old": 1}]).write_parquet(out)
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(heddle.DataError, match=message) as raised:
        s.from_list(records).write_parquet(out, mode="overwrite")
    assert "write_parquet: partition 0" in str(raised.value)
    assert sorted(p.name for p in out.iterdir()) == before
    assert pq.read_table(out).to_pylist() == [{"old": 1}]
    with pytest.raises(heddle.DataError):
        s.from_list(records).write_parquet(tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists() or not any((tmp_path / "fresh").iterdir())


def test_the_error_says_what_to_do_and_names_the_partition(tmp_path):
    s3 = Session(heddle.init(), partitions=3)
    records = [{"a": i} for i in range(8)] + [{"a": "late"}]
    with pytest.raises(heddle.DataError) as raised:
        s3.from_list(records).write_parquet(tmp_path / "out")
    text = str(raised.value)
    assert "partition 2, record " in text and "column 'a'" in text, text
    assert "str" in text and "write_json_lines" in text, text


@pytest.mark.parametrize("n", [2, 3])
def test_write_parquet_on_workers(n, tmp_path):
    job = run_job(n, "parquet_write.py", str(tmp_path))
    assert_all_ok(job, n)
    assert all(rep["checks"] == 4 for rep in job.reports.values()), job.reports
