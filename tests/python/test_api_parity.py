"""Every public op of the Rust DataSet, Stream, Session and Communicator has its Python
method, or is listed here as intentionally absent (with the reason) or as missing.

The Rust side is read from the sources (no build): every ``pub fn`` directly inside an
inherent ``impl DataSet<..>`` / ``impl Stream<..>`` / ``impl Session`` block of
crates/heddle-data, and ``impl Communicator`` of crates/heddle-comm. The Python side is
what the installed package's objects (made in a world of one) answer to.

A Rust op is covered by the Python name(s) in RENAMED, else by the same name. A name of
the form ``method(param)`` means the keyword ``param`` of ``method`` (builder methods such
as ``Session::with_partitions`` are arguments of the Python constructor). The tables are
checked both ways so they cannot rot: every entry names a Rust op that exists, every
Python name in RENAMED exists, and an op listed as absent or missing has no Python
method of its own name.
"""

from __future__ import annotations

import functools
import inspect
import re
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

import heddle
from heddle.data import Session

ROOT = Path(__file__).resolve().parents[2]

#: Python class -> (Rust type, directory of the Rust sources that implement it).
RUST_SOURCES: dict[str, tuple[str, str]] = {
    "DataSet": ("DataSet", "crates/heddle-data/src"),
    "Stream": ("Stream", "crates/heddle-data/src"),
    "Session": ("Session", "crates/heddle-data/src"),
    "Comm": ("Communicator", "crates/heddle-comm/src"),
}

#: Rust op -> the Python names that offer it, where they are not the Rust name.
RENAMED: dict[str, dict[str, tuple[str, ...]]] = {
    "DataSet": {
        "iterate_with": ("iterate(checkpoint_dir)",),
        "pipe_with": ("pipe(args)", "pipe(credits)", "pipe(max_record)", "pipe(timeout)"),
    },
    "Stream": {
        "map_chunks": ("map_batches",),
    },
    "Session": {
        "new": ("__init__(comm)",),
        "with_partitions": ("__init__(partitions)",),
        "with_options": ("__init__(memory_budget)", "__init__(spill_dirs)"),
        "with_spill": ("__init__(memory_budget)", "__init__(spill_dirs)"),
        "with_checkpoints": (
            "__init__(checkpoint_interval)",
            "__init__(checkpoint_dir)",
            "__init__(job)",
        ),
        "from_vec": ("from_list",),
        "stream_from_vec": ("stream_from_list",),
        # Helpers the binding's read_csv and read_parquet are built on.
        "csv_header": ("read_csv(header)",),
        "read_parquet_columns": ("read_parquet(columns)",),
    },
    # mpi4py's names: buffer ops are capitalized, their lowercase forms take objects (the
    # Rust `*_object` ops). Python's object `reduce`, `allreduce` and `sendrecv` have no
    # Rust counterpart, so they are not in this table.
    "Comm": {
        "rank": ("rank", "Get_rank"),
        "size": ("size", "Get_size"),
        "split": ("split", "Split"),
        "barrier": ("barrier", "Barrier"),
        "abort": ("Abort",),
        "send": ("Send",),
        "recv": ("Recv",),
        "sendrecv": ("Sendrecv",),
        "send_object": ("send",),
        "recv_object": ("recv",),
        "broadcast": ("Bcast",),
        "broadcast_object": ("bcast",),
        "gather": ("Gather",),
        "gather_object": ("gather",),
        "gatherv": ("Gatherv",),
        "scatter": ("Scatter",),
        "scatter_object": ("scatter",),
        "scatterv": ("Scatterv",),
        "allgather": ("Allgather",),
        "allgather_object": ("allgather",),
        "allgatherv": ("Allgatherv",),
        "alltoall": ("Alltoall",),
        "alltoall_object": ("alltoall",),
        "alltoallv": ("Alltoallv",),
        "reduce": ("Reduce",),
        "allreduce": ("Allreduce",),
        "reduce_scatter": ("Reduce_scatter",),
        "reduce_scatter_block": ("Reduce_scatter_block",),
        "scan": ("Scan", "scan"),
        "exscan": ("Exscan", "exscan"),
    },
}

_CALL_OPTIONS = (
    "the op with CallOptions (forced algorithm, per-call timeout); Python uses the "
    "configured selection and HEDDLE_TIMEOUT_S"
)

#: Rust ops Python does without on purpose -> why (one line).
INTENTIONALLY_ABSENT: dict[str, dict[str, str]] = {
    "DataSet": {
        "flat_map_reduce_by_key": (
            "its Combiner (borrowed keys) is a Rust allocation saver; in Python it is "
            "flat_map(...).reduce_by_key(...)"
        ),
    },
    "Stream": {},
    "Session": {
        "worker_checkpoints": "the per-worker checkpoints behind "
        "DataSet.iterate(checkpoint_dir=...), which Python reaches through that",
        "with_threads": "Python sessions run one executor thread (Python code holds the GIL)",
        "abort_handle": "the binding wires it to Ctrl-C (KeyboardInterrupt) in every run",
    },
    "Comm": {
        "send_as": "dtype-tagged bytes, what Send is built on (a Python buffer has its dtype)",
        "recv_as": "dtype-tagged bytes, what Recv is built on (a Python buffer has its dtype)",
        "send_bytes": "untyped bytes: Python's Send takes any buffer, bytes included",
        "recv_bytes": "a message of unknown length: Python gets those as objects (recv)",
        "config": "the Rust settings struct; Python sets HEDDLE_* variables, reads timeout",
        "abort_handle": "runtime plumbing (the launcher's reporter); Python has Abort",
        "open_edge": "dataflow edge channels of the task runtime, not a user op",
        "world_rank": "rank translation for abort reports; heddle.init()'s world has them",
        "check_aborted": (
            "every waiting Python call raises heddle.JobAborted, and the abort watcher "
            "(heddle._abort) ends an idle worker; there is nothing left to poll"
        ),
        "tcp_peers": "a transport diagnostic of the Rust tests and benchmarks, not a user op",
        "park": "an executor's idle sleep on the doorbell; Python's own waits use it already",
        "park_unless": "the executor's idle sleep that a stop or abort ends; not a user op",
        "waker": "ends an executor's idle sleep (for stop and abort handles); not a user op",
        "sleeps_until_woken": "whether park can sleep long: executor plumbing, as park",
        # Non-blocking and wildcard point-to-point are Python's through heddle.MPI, with
        # mpi4py's Request and Status (test_mpi_api.py, test_mpi4py_compat.py).
        "isend": "heddle.MPI: Comm.Isend (buffers), Comm.isend (objects)",
        "isend_bytes": "heddle.MPI: Comm.isend (objects travel as bytes)",
        "isend_raw": "heddle.MPI: what Comm.Isend is built on (a Python buffer)",
        "irecv": "heddle.MPI: Comm.Irecv (buffers), Comm.irecv (objects)",
        "irecv_bytes": "heddle.MPI: what Comm.irecv is built on",
        "irecv_raw": "heddle.MPI: what Comm.Irecv is built on (a Python buffer)",
        "recv_any": "heddle.MPI: Comm.Recv with ANY_SOURCE/ANY_TAG and a Status",
        "probe": "heddle.MPI: Comm.Probe/probe",
        "iprobe": "heddle.MPI: Comm.Iprobe/iprobe",
        "self_comm": "heddle.MPI.COMM_SELF",
        "shadow": "where heddle.MPI's non-blocking collectives run (Ibarrier, Iallreduce, ...)",
        # Synchronous sends, displacements, datatypes and non-blocking collectives are
        # Python's through heddle.MPI (mpi4py's names), checked against mpi4py.
        "issend": "heddle.MPI: Comm.Issend (buffers), Comm.issend (objects)",
        "issend_bytes": "heddle.MPI: Comm.issend (objects travel as bytes)",
        "issend_raw": "heddle.MPI: what Comm.Issend is built on (a Python buffer)",
        "ssend": "heddle.MPI: Comm.Ssend/ssend",
        "send_typed": "heddle.MPI: Comm.Send with a derived datatype ([buf, TYPE])",
        "recv_typed": "heddle.MPI: Comm.Recv with a derived datatype ([buf, TYPE])",
        **{
            f"{op}_blocks": f"heddle.MPI: Comm.{op.capitalize()} with [buf, (counts, displs), TYPE]"
            for op in ("gatherv", "scatterv", "allgatherv", "alltoallv")
        },
        **{
            op: f"heddle.MPI: Comm.I{op[1:]} (a schedule over point-to-point messages)"
            for op in (
                "ibarrier ibcast ireduce iallreduce igather igatherv iscatter iscatterv "
                "iallgather iallgatherv ialltoall ialltoallv iscan iexscan "
                "ireduce_scatter_block ireduce_scatter"
            ).split()
        },
        **{
            f"{op}_with": _CALL_OPTIONS
            for op in (
                "barrier",
                "broadcast",
                "gather",
                "gatherv",
                "scatter",
                "scatterv",
                "allgather",
                "allgatherv",
                "alltoall",
                "alltoallv",
                "reduce",
                "allreduce",
                "reduce_scatter",
                "reduce_scatter_block",
                "scan",
                "exscan",
            )
        },
    },
}

#: User-facing Rust ops Python lacks so far (reported, not failed).
MISSING_IN_PYTHON: dict[str, dict[str, str]] = {
    "DataSet": {
        "materialize": "materialized stages (multi-stage batch resume) are Rust-only so far",
    },
    "Stream": {},
    "Session": {
        "with_alignment_timeout": "Python sessions take the alignment timeout from "
        "HEDDLE_CHECKPOINT_ALIGNMENT_TIMEOUT_S (heddle run --alignment-timeout) only so far",
    },
    "Comm": {},
}


# --- the Rust side ------------------------------------------------------------------------

_CHAR = re.compile(r"'(?:\\(?:u\{[0-9a-fA-F]{1,6}\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'")
_RAW_STRING = re.compile(r'b?r(#*)"')
_ATTRS = r"\s*(?:#!?\[[^\]]*\]\s*)*"  # an item's attributes
_PUB_FN = re.compile(
    _ATTRS + r"pub\s+(?:(?:const|async|unsafe|default)\s+|extern\s+)*fn\s+([A-Za-z_]\w*)"
)
_IMPL = re.compile(_ATTRS + r"(?:unsafe\s+)?impl\b")
_TYPE_PATH = re.compile(r"\s*(?:::\s*)?(?:[A-Za-z_]\w*\s*::\s*)*([A-Za-z_]\w*)")
_TEST_MOD = re.compile(r"#\[cfg\(test\)\][\s\S]*\bmod\s+\w+\s*$")


def _blank(text: str) -> str:
    """``text`` with every character but line ends made a space (offsets stay)."""
    return re.sub(r"[^\n]", " ", text)


def strip_comments_and_strings(src: str) -> str:
    """``src`` with comments (doc comments too, nested block comments), string and char
    literals blanked out, so braces and ``pub fn`` in them do not count."""
    out: list[str] = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        word_before = i > 0 and (src[i - 1].isalnum() or src[i - 1] == "_")
        raw = None if word_before else _RAW_STRING.match(src, i)
        if src.startswith("//", i):
            end = src.find("\n", i)
            end = n if end < 0 else end
        elif src.startswith("/*", i):
            depth, end = 0, i
            while end < n:
                if src.startswith("/*", end):
                    depth, end = depth + 1, end + 2
                elif src.startswith("*/", end):
                    depth, end = depth - 1, end + 2
                    if depth == 0:
                        break
                else:
                    end += 1
        elif raw is not None:
            close = src.find('"' + raw.group(1), raw.end())
            end = n if close < 0 else close + 1 + len(raw.group(1))
        elif c == '"':
            end = i + 1
            while end < n and src[end] != '"':
                end += 2 if src[end] == "\\" else 1
            end += 1
        elif c == "'" and (char := _CHAR.match(src, i)) is not None:
            end = char.end()
        else:
            out.append(c)
            i += 1
            continue
        out.append(_blank(src[i:end]))
        i = end
    return "".join(out)


def _impl_target(header: str) -> str | None:
    """The type an inherent ``impl`` header is for (``impl<T: X> a::DataSet<T> where ..``
    gives ``DataSet``); ``None`` for a trait impl or no impl."""
    m = _IMPL.match(header)
    if m is None:
        return None
    rest = header[m.end() :].lstrip()
    if rest.startswith("<"):  # the impl's generic parameters
        depth, j = 0, 0
        while j < len(rest):
            if rest.startswith("->", j):
                j += 2
                continue
            depth += {"<": 1, ">": -1}.get(rest[j], 0)
            j += 1
            if depth == 0:
                break
        rest = rest[j:]
    rest = re.split(r"\bwhere\b", rest)[0]
    depth = 0
    for j, ch in enumerate(rest):  # `Trait<..> for Type` at the top level: a trait impl
        depth += {"<": 1, ">": -1, "(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and re.match(r"\bfor\b", rest[j:]) and (j == 0 or rest[j - 1].isspace()):
            return None
    target = _TYPE_PATH.match(rest)
    return None if target is None else target.group(1)


def rust_pub_fns(src: str) -> Iterator[tuple[str, str]]:
    """``(type, fn)`` for every ``pub fn`` directly inside an inherent impl block of
    ``src`` (not ``pub(crate)`` or the like, not in a ``#[cfg(test)]`` module)."""
    code = strip_comments_and_strings(src)
    # One frame per open brace: (impl target or None, in a test module, saved paren depth).
    frames: list[tuple[str | None, bool, int]] = []
    header_start, parens = 0, 0
    for i, ch in enumerate(code):
        if ch in "([":
            parens += 1
        elif ch in ")]":
            parens -= 1
        elif ch == ";" and parens == 0:
            header_start = i + 1
        elif ch == "{":
            header = code[header_start:i]
            owner, in_test = frames[-1][:2] if frames else (None, False)
            fn = _PUB_FN.match(header)
            if owner is not None and not in_test and fn is not None:
                yield owner, fn.group(1)
            in_test = in_test or _TEST_MOD.search(header) is not None
            frames.append((_impl_target(header), in_test, parens))
            header_start, parens = i + 1, 0
        elif ch == "}":
            parens = frames.pop()[2] if frames else 0
            header_start = i + 1


def rust_ops(rust_type: str, directory: str) -> list[str]:
    """The public ops of ``rust_type`` in the ``.rs`` files under ``directory``."""
    files = sorted((ROOT / directory).rglob("*.rs"))
    assert files, f"no Rust sources under {directory}"
    ops: list[str] = []
    for path in files:
        for owner, name in rust_pub_fns(path.read_text(encoding="utf-8")):
            if owner == rust_type and name not in ops:
                ops.append(name)
    return ops


# --- the Python side ----------------------------------------------------------------------

_PARAM = re.compile(r"(\w+)\((\w+)\)")


@pytest.fixture(scope="module")
def python_objects() -> dict[str, object]:
    """One object of each Python class, made in a world of one."""
    comm = heddle.init()
    session = Session(comm)
    return {
        "DataSet": session.range(1),
        "Stream": session.stream_from_list([]),
        "Session": session,
        "Comm": comm,
    }


def python_has(obj: object, name: str) -> bool:
    """Whether ``obj`` has the public attribute ``name``, or for ``method(param)``
    whether its ``method`` takes ``param``."""
    m = _PARAM.fullmatch(name)
    if m is None:
        return not name.startswith("_") and hasattr(obj, name)
    try:
        params = inspect.signature(getattr(obj, m.group(1))).parameters
    except (AttributeError, TypeError, ValueError):
        return False
    return m.group(2) in params


def public_names(obj: object) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


# --- the checks ---------------------------------------------------------------------------

CLASSES = list(RUST_SOURCES)


@functools.cache
def _ops(cls: str) -> tuple[str, ...]:
    return tuple(rust_ops(*RUST_SOURCES[cls]))


def _covering(cls: str, op: str) -> tuple[str, ...]:
    return RENAMED[cls].get(op, (op,))


def _lines(entries: Iterable[str]) -> str:
    return "".join(f"\n  {e}" for e in entries)


def test_the_parser_sees_through_comments_strings_and_nesting() -> None:
    src = r"""
        //! pub fn in_crate_doc() {}
        impl<'a, K: Fn(&str) -> u8, V> crate::data::DataSet<(K, [V; 2])>
        where
            K: Clone,
        {
            /// ```
            /// pub fn in_doc() { }
            /// ```
            pub fn kept(&self, x: [u8; 4]) -> &'a str { let s = "pub fn no() {"; s }
            pub(crate) fn internal(&self) { let c = '{'; let r = r#"}"#; }
            /* pub fn block() { /* nested */ } */
            pub const fn kept_too<F: Fn() -> ()>(&self) -> Result<(), ()> {
                fn helper() {}
                Ok(())
            }
            fn private(&self) {}
        }
        impl<T> Clone for DataSet<T> { pub fn clone(&self) -> Self { todo!() } }
        impl Stream<u8> { #[inline] pub unsafe fn raw(&self) {} }
        #[cfg(test)]
        mod tests { impl DataSet<u8> { pub fn test_only(&self) {} } }
    """
    assert list(rust_pub_fns(src)) == [
        ("DataSet", "kept"),
        ("DataSet", "kept_too"),
        ("Stream", "raw"),
    ]


@pytest.mark.parametrize("cls", CLASSES)
def test_every_rust_op_is_in_python_or_listed(cls: str, python_objects: dict[str, object]) -> None:
    obj = python_objects[cls]
    unaccounted: list[str] = []
    gained: list[str] = []
    for op in _ops(cls):
        if op in INTENTIONALLY_ABSENT[cls]:
            continue
        present = any(python_has(obj, name) for name in _covering(cls, op))
        if op in MISSING_IN_PYTHON[cls]:
            if present:
                gained.append(op)
        elif not present:
            unaccounted.append(f"{op} (looked for {', '.join(_covering(cls, op))})")
    assert not unaccounted, (
        f"Rust ops of {cls} with no Python counterpart: map them in RENAMED, or list them "
        f"in INTENTIONALLY_ABSENT (with the reason) or MISSING_IN_PYTHON:{_lines(unaccounted)}"
    )
    assert not gained, f"{cls} has these now; drop them from MISSING_IN_PYTHON:{_lines(gained)}"


@pytest.mark.parametrize("cls", CLASSES)
def test_the_tables_name_what_exists(cls: str, python_objects: dict[str, object]) -> None:
    obj = python_objects[cls]
    ops = set(_ops(cls))
    tables = {
        "RENAMED": set(RENAMED[cls]),
        "INTENTIONALLY_ABSENT": set(INTENTIONALLY_ABSENT[cls]),
        "MISSING_IN_PYTHON": set(MISSING_IN_PYTHON[cls]),
    }
    problems: list[str] = []
    for table, keys in tables.items():
        problems += [f"{table}: {op} is no Rust op of {cls}" for op in sorted(keys - ops)]
        for other, other_keys in tables.items():
            if table < other:
                problems += [f"{op} is in both {table} and {other}" for op in keys & other_keys]
    for op, names in RENAMED[cls].items():
        problems += [
            f"RENAMED: {op} -> {n}: no such Python name" for n in names if not python_has(obj, n)
        ]
        if names == (op,):
            problems.append(f"RENAMED: {op} -> {op} says nothing; drop it")
    for table in ("INTENTIONALLY_ABSENT", "MISSING_IN_PYTHON"):
        problems += [
            f"{table}: {op} is a Python name of {cls}; drop it (or map it in RENAMED)"
            for op in sorted(tables[table])
            if python_has(obj, op)
        ]
    reasons = {**INTENTIONALLY_ABSENT[cls], **MISSING_IN_PYTHON[cls]}
    problems += [
        f"{op}: the reason is empty or not one line"
        for op, why in reasons.items()
        if not why.strip() or "\n" in why
    ]
    assert not problems, f"stale entries for {cls}:{_lines(problems)}"


def test_report_the_parity() -> None:
    """Prints the counts and the ops missing in Python (shown with ``pytest -s``); the
    missing ones also appear in pytest's warnings summary. Passes: deciding is a human's."""
    lines = ["Rust op -> Python parity (ops: mapped / intentionally absent / missing):"]
    missing: list[str] = []
    for cls in CLASSES:
        ops = _ops(cls)
        absent = [op for op in ops if op in INTENTIONALLY_ABSENT[cls]]
        lacking = [op for op in ops if op in MISSING_IN_PYTHON[cls]]
        mapped = len(ops) - len(absent) - len(lacking)
        lines.append(
            f"  {cls} ({RUST_SOURCES[cls][0]}): {len(ops)} ops: {mapped} mapped / "
            f"{len(absent)} absent / {len(lacking)} missing"
        )
        missing += [f"{cls}.{op}: {MISSING_IN_PYTHON[cls][op]}" for op in lacking]
    lines.append("Missing in Python:" + (_lines(missing) or " none"))
    print("\n".join(lines))
    if missing:
        warnings.warn("Rust ops not yet in Python:" + _lines(missing), stacklevel=1)
