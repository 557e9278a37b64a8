"""heddle.data on every worker of the job: each transformation and action against a plain
Python computation of the same thing (run on every rank). argv[1]: a directory shared by
the ranks (input and output files)."""

import collections
import json
import operator
import sys
import traceback
from pathlib import Path

import numpy as np

import heddle
from heddle.data import Session

comm = heddle.init()
s = Session(comm)
shared = Path(sys.argv[1])
rank, size = comm.rank, comm.size
failures = []
checks = 0


def check(name, got, want):
    global checks
    checks += 1
    if got != want:
        failures.append(f"{name}: got {str(got)[:300]} want {str(want)[:300]}")


def on_root(name, got, want):
    """collect() gives rank 0 the records and the others None."""
    check(name, got if rank == 0 else got is None, want if rank == 0 else True)


def skewed_words(n, seed=7):
    rng = np.random.default_rng(seed)
    return ["the" if x % 2 == 0 else f"w{x % 97}" for x in rng.integers(0, 1 << 30, n)]


try:
    # Word count: lines from a list (the same list on every rank), Counter reference.
    words = skewed_words(20_000)
    lines = [" ".join(words[i : i + 7]) for i in range(0, len(words), 7)]
    counts = (
        s.from_list(lines)
        .flat_map(lambda line: [(w, 1) for w in line.split()])
        .reduce_by_key(operator.add)
    )
    got = counts.collect()
    on_root("word count", dict(got) if got is not None else None, dict(collections.Counter(words)))
    check("word count collect_all", dict(counts.collect_all()), dict(collections.Counter(words)))

    # Element-wise steps and actions.
    xs = s.range(0, 1000)
    evens = xs.filter(lambda x: x % 2 == 0).map(lambda x: x * 3)
    check("count", evens.count(), 500)
    check("reduce", evens.reduce(operator.add), sum(x * 3 for x in range(0, 1000, 2)))
    check(
        "flat_map",
        sorted(xs.flat_map(lambda x: [x, x] if x % 10 == 0 else []).collect_all()),
        sorted(list(range(0, 1000, 10)) * 2),
    )
    check("map_partitions", sum(xs.map_partitions(lambda p: [len(p)]).collect_all()), 1000)
    check("partitions", len(xs.map_partitions(lambda p: [len(p)]).collect_all()), size)
    check(
        "key_by",
        sorted(
            xs.key_by(lambda x: x % 3)
            .filter(lambda kv: kv[0] == 2)
            .map(lambda kv: kv[1])
            .collect_all()
        ),
        [x for x in range(1000) if x % 3 == 2],
    )
    check("collect order", xs.collect_all(), list(range(1000)))
    check("empty count", s.range(5, 5).count(), 0)
    check("empty reduce", s.range(5, 5).reduce(operator.add), None)
    check("negative range", s.range(-5, 5).collect_all(), list(range(-5, 5)))
    check("generate", s.generate(100, lambda i: i * i).collect_all(), [i * i for i in range(100)])
    check(
        "union",
        sorted(xs.union(s.range(0, 10)).collect_all()),
        sorted(list(range(1000)) + list(range(10))),
    )
    check(
        "distinct",
        sorted(s.from_list([i % 17 for i in range(500)]).distinct().collect_all()),
        list(range(17)),
    )
    check("repartition", sorted(xs.repartition().collect_all()), list(range(1000)))

    # Records of every kind cross workers (repartition deals them out).
    objs = [
        None,
        True,
        3,
        -(2**70),
        2.5,
        "ünïcode",
        b"\x00bytes",
        (1, ("a", None)),
        [1, 2],
        {"k": [1.5]},
        frozenset({1, 2}),
        np.arange(5000, dtype=np.int32),
        np.float32(1.5),
    ]
    moved = s.from_list(objs * 3).repartition().collect_all()
    check("objects cross workers", sorted(map(repr, moved)), sorted(map(repr, objs * 3)))

    # Keyed operations against dicts; keys of many types.
    keys = [
        None,
        False,
        True,
        0,
        1,
        1.0,
        -7,
        2**80,
        -(2**80),
        np.int64(5),
        0.5,
        -0.0,
        "a",
        "b",
        b"a",
        ("t", 1),
        ("t", (2, None)),
        frozenset({3}),
    ]
    pairs = [(keys[i % len(keys)], i) for i in range(3000)]

    def canon(k):  # the key identity heddle uses: value and type (numpy ints are ints)
        if isinstance(k, np.integer):
            k = int(k)
        if isinstance(k, float) and k == 0.0:
            k = 0.0
        return (type(k).__name__, repr(k))

    want = collections.defaultdict(int)
    for k, v in pairs:
        want[canon(k)] += v
    got = s.from_list(pairs).reduce_by_key(operator.add).collect_all()
    check("reduce_by_key keys", sorted((canon(k), v) for k, v in got), sorted(want.items()))

    grouped = s.from_list(pairs).group_by_key().collect_all()
    want_g = collections.defaultdict(list)
    for k, v in pairs:
        want_g[canon(k)].append(v)
    check(
        "group_by_key",
        sorted((canon(k), sorted(vs)) for k, vs in grouped),
        sorted((k, sorted(vs)) for k, vs in want_g.items()),
    )

    # `acc + [v]`, not `[*acc, v]`: the accumulator must still be the list zero value.
    agg = (
        s.from_list([(i % 5, i) for i in range(200)])
        .aggregate_by_key([], lambda acc, v: acc + [v], lambda a, b: a + b)  # noqa: RUF005
        .collect_all()
    )
    check(
        "aggregate_by_key",
        sorted((k, sorted(vs)) for k, vs in agg),
        [(k, [i for i in range(200) if i % 5 == k]) for k in range(5)],
    )

    left = [(i % 13, f"l{i}") for i in range(60)]
    right = [(i % 17, f"r{i}") for i in range(40)]
    inner = sorted((k, (v, w)) for k, v in left for k2, w in right if k == k2)
    check("join", sorted(s.from_list(left).join(s.from_list(right)).collect_all()), inner)
    lj = inner + [(k, (v, None)) for k, v in left if k not in {k2 for k2, _ in right}]
    check(
        "left_join",
        sorted(s.from_list(left).left_join(s.from_list(right)).collect_all(), key=repr),
        sorted(lj, key=repr),
    )
    fo = lj + [(k, (None, w)) for k, w in right if k not in {k2 for k2, _ in left}]
    check(
        "full_outer_join",
        sorted(s.from_list(left).full_outer_join(s.from_list(right)).collect_all(), key=repr),
        sorted(fo, key=repr),
    )

    # sort_by_key: globally sorted in partition order, stable per key.
    rng = np.random.default_rng(3)
    ks = [int(k) for k in rng.integers(-1000, 1000, 3000)] + [5] * 500  # skewed
    recs = [(k, i) for i, k in enumerate(ks)]
    srecs = [(w, i) for i, w in enumerate(skewed_words(2000, seed=11))]
    frecs = [(float(x), i) for i, x in enumerate(rng.normal(size=500))]
    for name, rs in (("ints", recs), ("str", srecs), ("float", frecs)):
        # Globally sorted by key in partition order (equal keys from different partitions
        # arrive in any order), every record once.
        got = s.from_list(rs).sort_by_key().collect_all()
        check(f"sort_by_key {name} keys", [k for k, _ in got], sorted(k for k, _ in rs))
        check(f"sort_by_key {name} records", sorted(got), sorted(rs))

    # cache and iterate.
    cached = xs.map(lambda x: x + 1).cache()
    check("cache", cached.count(), 1000)
    check("cache reuse", cached.reduce(operator.add), sum(range(1, 1001)))
    last, steps = s.from_list([1, 2, 3]).iterate(
        10, lambda d: d.map(lambda x: x * 2), lambda a, b: b.reduce(max) > 50
    )
    check("iterate", (sorted(last.collect_all()), steps), ([32, 64, 96], 5))

    # map_batches: numpy, lists, dict columns, pyarrow (when installed).
    check(
        "map_batches numpy",
        xs.map_batches(lambda a: a * 2, batch_size=64).collect_all(),
        [x * 2 for x in range(1000)],
    )
    check(
        "map_batches 2-D",
        s.from_list([(i, i * 0.5) for i in range(300)])
        .map_batches(lambda a: a[:, ::-1], batch_size=7)
        .collect_all(),
        [(i * 0.5, float(i)) for i in range(300)],
    )
    check(
        "map_batches list",
        xs.map_batches(lambda b: [sum(b)], batch_size=None, batch_format="list")
        .collect_all()
        .__len__(),
        size,
    )
    dicts = [{"a": i, "b": float(i)} for i in range(100)]
    check(
        "map_batches dict columns",
        s.from_list(dicts).map_batches(lambda c: {"a": c["a"] + 1, "b": c["b"] * 2}).collect_all(),
        [{"a": i + 1, "b": 2.0 * i} for i in range(100)],
    )
    try:
        import pyarrow as pa

        arrow = (
            s.from_list(dicts)
            .map_batches(lambda rb: rb.select(["b"]), batch_size=10, batch_format="pyarrow")
            .collect_all()
        )
        check("map_batches pyarrow", arrow, [{"b": float(i)} for i in range(100)])
        check(
            "map_batches pyarrow values",
            xs.map_batches(lambda rb: rb, batch_format="pyarrow").collect_all(),
            list(range(1000)),
        )
    except ImportError:
        pass
    blocks = s.from_numpy(np.arange(10_000, dtype=np.float64).reshape(-1, 2), rows_per_block=333)
    check(
        "numpy blocks",
        blocks.map(lambda b: b.sum(axis=0)).reduce(np.add).tolist(),
        np.arange(10_000, dtype=np.float64).reshape(-1, 2).sum(axis=0).tolist(),
    )

    # Files: text lines and blocks, CSV, JSON lines; part files written and read back.
    inp = shared / "input"
    if rank == 0:
        inp.mkdir()
        (inp / "a.txt").write_text("".join(f"line {i} ünï\n" for i in range(500)))
        (inp / "b.txt").write_text("x y\r\nz")  # CRLF, no final newline
        (inp / "t.csv").write_text("name,score\n" + "".join(f'"n,{i}",{i}\n' for i in range(50)))
        (inp / "j.jsonl").write_text(
            "".join(
                json.dumps({"i": i, "v": [i, None]}) + "\n" + ("\n" if i % 10 == 0 else "")
                for i in range(40)
            )
        )
        (inp / "bad.jsonl").write_text('{"ok": 1}\n{broken\n{"ok": 2}\n')
    comm.barrier()
    text_lines = [f"line {i} ünï" for i in range(500)] + ["x y", "z"]
    check("text_file glob", s.text_file(inp / "*.txt").collect_all(), text_lines)
    for bb in (7, 100, 1 << 20):
        blocks = s.text_blocks(inp / "*.txt", block_bytes=bb).collect_all()
        check(f"text_blocks {bb}", "".join(blocks).replace("\r\n", "\n").splitlines(), text_lines)
        check(f"text_blocks {bb} whole lines", all(b.endswith("\n") for b in blocks), True)
    check(
        "text_blocks binary",
        b"".join(s.text_blocks(inp / "a.txt", 50, binary=True).collect_all()),
        (inp / "a.txt").read_bytes(),
    )
    # Lines sorted natively across workers (equal keys' order is unspecified).
    check("text_file sort", s.text_file(inp / "*.txt").sort().collect_all(), sorted(text_lines))
    by4 = s.text_file(inp / "*.txt").sort(key_bytes=4).collect_all()
    check(
        "text_file sort by 4 bytes",
        ([x.encode()[:4] for x in by4], sorted(by4)),
        (sorted(x.encode()[:4] for x in text_lines), sorted(text_lines)),
    )
    check(
        "sort of Python records",
        s.from_list(list(range(500, 0, -1))).sort().collect_all(),
        list(range(1, 501)),
    )
    # Words split and counted natively (text from files) or from Python str records: against
    # collections.Counter of bytes.split() over the raw bytes of the files.
    raw = (inp / "a.txt").read_bytes() + (inp / "b.txt").read_bytes()
    word_counts = collections.Counter(w.decode() for w in raw.split())
    for name, text in [
        ("text_file", s.text_file(inp / "*.txt")),
        ("text_blocks 7", s.text_blocks(inp / "*.txt", block_bytes=7)),
        ("text_blocks 1 MiB", s.text_blocks(inp / "*.txt", block_bytes=1 << 20)),
        ("from_list", s.from_list(text_lines)),
    ]:
        got = text.words().value_counts().collect()
        on_root(
            f"{name} words value_counts", dict(got) if got is not None else None, dict(word_counts)
        )
        check(f"{name} words", sorted(text.words().collect_all()), sorted(word_counts.elements()))
    binary_counts = dict(
        s.text_blocks(inp / "*.txt", 50, binary=True).words().value_counts().collect_all()
    )
    check("binary words value_counts", binary_counts, dict(collections.Counter(raw.split())))
    mixed = [1, 2, 2, "x", (1, "a"), (1, "a"), 1.0, True, None, None, b"x"]
    check(
        "value_counts of any records",
        sorted(map(repr, s.from_list(mixed).value_counts().collect_all())),
        sorted(
            map(
                repr,
                [
                    (1, 1),
                    (2, 2),
                    ("x", 1),
                    ((1, "a"), 2),
                    (1.0, 1),
                    (True, 1),
                    (None, 2),
                    (b"x", 1),
                ],
            )
        ),
    )
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = [{"id": i, "word": f"w{i % 13}", "x": i * 0.5} for i in range(3000)]
        if rank == 0:
            pq.write_table(pa.Table.from_pylist(rows), inp / "rows.parquet", row_group_size=128)
        comm.barrier()
        pds = s.read_parquet(inp / "rows.parquet")
        # Row groups are dealt round robin to the partitions (as the Rust API deals them).
        check("read_parquet", sorted(pds.collect_all(), key=lambda r: r["id"]), rows)
        check(
            "read_parquet columns",
            s.read_parquet(inp / "rows.parquet", columns=["id"]).count(),
            3000,
        )
        pds.write_parquet(shared / "parquet-out")
        check(
            "write_parquet",
            sorted(pq.read_table(shared / "parquet-out").to_pylist(), key=lambda r: r["id"]),
            rows,
        )
    except ImportError:
        pass
    check(
        "read_csv header",
        s.read_csv(inp / "t.csv").collect_all(),
        [{"name": f"n,{i}", "score": str(i)} for i in range(50)],
    )
    check("read_csv rows", s.read_csv(inp / "t.csv", header=False).count(), 51)
    check(
        "read_json_lines",
        s.read_json_lines(inp / "j.jsonl").collect_all(),
        [{"i": i, "v": [i, None]} for i in range(40)],
    )
    check(
        "malformed json skipped",
        s.read_json_lines(inp / "bad.jsonl", on_malformed="skip").collect_all(),
        [{"ok": 1}, {"ok": 2}],
    )
    check("skipped rows", s.skipped_rows(), 1)

    out = shared / "out"
    counts.map(lambda wc: f"{wc[0]}\t{wc[1]}").write_text(out / "text")
    s.from_list([{"a": i, "t": (i, "x")} for i in range(30)]).write_json_lines(out / "json")
    s.from_list([(i, f"q,{i}", None) for i in range(30)]).write_csv(out / "csv")
    comm.barrier()
    parts = sorted((out / "text").iterdir())
    check(
        "part files", [p.name for p in parts], ["_SUCCESS"] + [f"part-{i:05d}" for i in range(size)]
    )
    written = dict(line.split("\t") for p in parts for line in p.read_text().splitlines())
    check("write_text", {k: int(v) for k, v in written.items()}, dict(collections.Counter(words)))
    jl = [
        json.loads(line)
        for p in sorted((out / "json").iterdir())
        for line in p.read_text().splitlines()
    ]
    check("write_json_lines", jl, [{"a": i, "t": [i, "x"]} for i in range(30)])
    import csv as _csv

    rows = [
        r for p in sorted((out / "csv").iterdir()) for r in _csv.reader(p.read_text().splitlines())
    ]
    check("write_csv", rows, [[str(i), f"q,{i}", ""] for i in range(30)])

    # A Python exception inside an action on several workers aborts the whole job (see
    # abort_data.py in test_jobs.py); in a world of one the session stays usable
    # (test_data.py).
    plan = counts.explain()
    check(
        "explain",
        all(x in plan for x in ("KeyedReduce (dataflow operation)", "chained in memory", "worker")),
        True,
    )
except Exception:
    failures.append(traceback.format_exc())

print(json.dumps({"ok": not failures, "checks": checks, "failures": failures}))
