"""Data generators and references of the side-by-side benchmark suite (benches/compare).

Only the standard library and numpy: every peer's virtualenv has numpy, and the peer programs
import this file (``sys.path`` gets benches/compare) to check their own output.

* word count: the text comes from Heddle's generator (``wordcount_task --generate``, seeded,
  12 words a line, 100,000-word Zipf vocabulary); the reference is a ``collections.Counter``
  of ``bytes.split()`` over the whole file, computed once and cached as JSON beside the text.
* K-means: 16 seeded Gaussian blobs (``numpy.random.default_rng``), saved as float64 ``.npy``
  of shape (n, 2); the initial centers are the first k points; the reference is a numpy
  Lloyd's algorithm (empty clusters keep their center), cached as ``.npy``.
* sort: 100-byte records as newline-terminated lines (101 bytes each): a 10-byte key of
  ASCII letters and digits, then the record index (20 digits) and 70 bytes of filler
  letters. Letters and digits only, so that every engine can read the lines as text or CSV.
  The reference is the record count and an order-independent checksum: the wrapping sum
  of a 64-bit hash of each record's 100 bytes (the newline excluded).
"""

from __future__ import annotations

import collections
import json
import os
import time
from pathlib import Path

import numpy as np

from mds_reference import MDS_DIM, check_mds, generate_distances, normalized_stress  # noqa: F401

# ---------------------------------------------------------------------------------------------
# Word count


def count_words_file(path: str | os.PathLike) -> dict[str, int]:
    counts: collections.Counter = collections.Counter()
    with open(path, "rb") as f:
        while True:
            block = f.read(64 << 20)
            if not block:
                break
            # Whole lines only: carry the tail over to the next block.
            cut = block.rfind(b"\n")
            if cut >= 0 and len(block) == (64 << 20):
                rest = block[cut + 1 :]
                block = block[: cut + 1]
                f.seek(-len(rest), os.SEEK_CUR)
            counts.update(block.split())
    return {w.decode(): c for w, c in counts.items()}


def wordcount_reference(text: str | os.PathLike) -> Path:
    """Path of the cached reference counts of ``text`` (computed on first use)."""
    text = Path(text)
    ref = text.with_name(text.name + ".counts.json")
    stat = text.stat()
    if ref.exists():
        try:
            meta = json.loads(ref.read_text())
            if meta["bytes"] == stat.st_size and meta["mtime"] == int(stat.st_mtime):
                return ref
        except (ValueError, KeyError):
            pass
    counts = count_words_file(text)
    meta = {
        "bytes": stat.st_size,
        "mtime": int(stat.st_mtime),
        "words": sum(counts.values()),
        "distinct": len(counts),
        "counts": counts,
    }
    tmp = ref.with_suffix(".tmp")
    tmp.write_text(json.dumps(meta))
    tmp.rename(ref)
    return ref


def check_wordcount(got: dict, ref_path: str | os.PathLike) -> tuple[bool, str]:
    """Compares every count (keys may be str or bytes) with the reference."""
    ref = json.loads(Path(ref_path).read_text())
    got = {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in got.items()}
    words, distinct = sum(got.values()), len(got)
    if words != ref["words"] or distinct != ref["distinct"]:
        return False, f"words {words} distinct {distinct}, want {ref['words']} {ref['distinct']}"
    want = ref["counts"]
    bad = [w for w, c in want.items() if got.get(w) != c]
    if bad:
        w = bad[0]
        return False, f"{len(bad)} counts differ, e.g. {w!r}: {got.get(w)} != {want[w]}"
    return True, f"{words} words, {distinct} distinct, every count equal"


def read_wordcount_dir(directory: str | os.PathLike) -> dict[str, int]:
    """``word<TAB>count`` lines of every part file of a directory."""
    got: dict[str, int] = {}
    for part in sorted(Path(directory).iterdir()):
        if not part.is_file() or part.name.startswith((".", "_")):
            continue
        for line in part.read_text().splitlines():
            if line:
                w, c = line.rsplit("\t", 1)
                got[w] = got.get(w, 0) + int(c)
    return got


# ---------------------------------------------------------------------------------------------
# K-means

BLOBS = 16


def generate_points(path: str | os.PathLike, n: int, seed: int = 1) -> Path:
    path = Path(path)
    if path.exists():
        return path
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-100.0, 100.0, size=(BLOBS, 2))
    blob = rng.integers(0, BLOBS, size=n)
    points = centers[blob] + rng.normal(0.0, 4.0, size=(n, 2))
    tmp = path.with_name(path.name + ".tmp.npy")
    np.save(tmp, points.astype(np.float64))
    tmp.rename(path)
    return path


def lloyd(points: np.ndarray, k: int, iterations: int) -> np.ndarray:
    """Lloyd's algorithm from the first k points (an empty cluster keeps its center)."""
    centers = points[:k].copy()
    x2 = (points * points).sum(1)
    for _ in range(iterations):
        labels = assign(points, centers, x2)
        centers = update(points, labels, centers)
    return centers


def assign(points: np.ndarray, centers: np.ndarray, x2=None) -> np.ndarray:
    # Exact squared distances (no |x|^2 - 2xc + |c|^2 shortcut: ties must break like a plain
    # loop's within rounding), in blocks to bound memory.
    out = np.empty(len(points), dtype=np.int64)
    for lo in range(0, len(points), 1 << 16):
        p = points[lo : lo + (1 << 16)]
        d = ((p[:, None, :] - centers[None, :, :]) ** 2).sum(-1)
        out[lo : lo + len(p)] = d.argmin(1)
    return out


def partial_sums(points: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """(k, 3): per-center sums of x, y and the count, for the points nearest to it."""
    labels = assign(points, centers)
    k = len(centers)
    return np.stack(
        [
            np.bincount(labels, weights=points[:, 0], minlength=k),
            np.bincount(labels, weights=points[:, 1], minlength=k),
            np.bincount(labels, minlength=k).astype(np.float64),
        ],
        axis=1,
    )


def centers_from_sums(sums: np.ndarray, centers: np.ndarray) -> np.ndarray:
    new = centers.copy()
    nonempty = sums[:, 2] > 0
    new[nonempty] = sums[nonempty, :2] / sums[nonempty, 2:3]
    return new


def update(points, labels, centers):
    k = len(centers)
    sums = np.stack(
        [
            np.bincount(labels, weights=points[:, 0], minlength=k),
            np.bincount(labels, weights=points[:, 1], minlength=k),
            np.bincount(labels, minlength=k).astype(np.float64),
        ],
        axis=1,
    )
    return centers_from_sums(sums, centers)


def kmeans_reference(points_path: str | os.PathLike, k: int, iterations: int) -> Path:
    points_path = Path(points_path)
    ref = points_path.with_name(f"{points_path.stem}.k{k}.i{iterations}.centers.npy")
    if not ref.exists():
        centers = lloyd(np.load(points_path), k, iterations)
        tmp = ref.with_name(ref.name + ".tmp.npy")
        np.save(tmp, centers)
        tmp.rename(ref)
    return ref


def check_kmeans(centers, ref_path: str | os.PathLike, tol: float = 1e-6) -> tuple[bool, str]:
    want = np.load(ref_path)
    got = np.asarray(centers, dtype=np.float64).reshape(-1, 2)
    if got.shape != want.shape:
        return False, f"{got.shape[0]} centers, want {want.shape[0]}"
    err = float(np.abs(got - want).max())
    return err < tol, f"max center error {err:.2e} (tolerance {tol:g})"


def read_centers_csv(path: str | os.PathLike) -> np.ndarray:
    rows = []
    for line in Path(path).read_text().splitlines():
        parts = line.split(",")
        try:
            rows.append([float(parts[0]), float(parts[1])])
        except (ValueError, IndexError):
            continue  # header
    return np.array(rows)


# ---------------------------------------------------------------------------------------------
# Sort

RECORD = 100
KEY = 10
LINE = RECORD + 1
ALPHABET = np.frombuffer(
    b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", np.uint8
)
CHUNK = 1 << 20  # records per chunk when generating and checking


def generate_records(path: str | os.PathLike, n: int, seed: int = 7) -> Path:
    path = Path(path)
    if path.exists() and path.stat().st_size == n * LINE:
        return path
    rng = np.random.default_rng(seed)
    tmp = path.with_name(path.name + ".tmp")
    powers = 10 ** np.arange(19, -1, -1, dtype=np.uint64)
    with open(tmp, "wb") as f:
        for lo in range(0, n, CHUNK):
            m = min(CHUNK, n - lo)
            rec = np.empty((m, LINE), np.uint8)
            rec[:, :KEY] = ALPHABET[rng.integers(0, len(ALPHABET), size=(m, KEY))]
            idx = np.arange(lo, lo + m, dtype=np.uint64)
            rec[:, KEY : KEY + 20] = (idx[:, None] // powers[None, :] % 10).astype(np.uint8) + ord(
                "0"
            )
            rec[:, KEY + 20 : RECORD] = (idx % 26).astype(np.uint8)[:, None] + ord("A")
            rec[:, RECORD] = ord("\n")
            f.write(rec.tobytes())
    tmp.rename(path)
    return path


_WEIGHTS = (
    np.arange(25, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15 & 0xFFFFFFFF)
    + np.uint64(0x632BE59BD9B4E019)
) | np.uint64(1)


def records_checksum(records: np.ndarray) -> int:
    """Order-independent checksum of (m, 100) uint8 records."""
    words = np.ascontiguousarray(records[:, :RECORD]).view("<u4").astype(np.uint64)  # (m, 25)
    with np.errstate(over="ignore"):
        h = (words * _WEIGHTS[None, :]).sum(axis=1, dtype=np.uint64)
        h ^= h >> np.uint64(29)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(32)
        return int(h.sum(dtype=np.uint64))


def key_ints(records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keys of (m, >=10) uint8 records as (hi, lo) integers that sort like the key bytes."""
    k = np.ascontiguousarray(records[:, :KEY])
    hi = k[:, :8].copy().view(">u8").ravel().astype(np.uint64)
    lo = k[:, 8:10].copy().view(">u2").ravel().astype(np.uint64)
    return hi, lo


def _record_files(directory: Path) -> list[Path]:
    files = [
        p
        for p in sorted(directory.iterdir())
        if p.is_file() and not p.name.startswith((".", "_")) and not p.name.endswith(".crc")
    ]
    return files


def iter_records(path: Path):
    """(m, 100) uint8 chunks of a file of 100-byte records or 101-byte lines."""
    size = path.stat().st_size
    if size == 0:
        return
    with open(path, "rb") as f:
        head = f.read(LINE)
        stride = (
            LINE if len(head) == LINE and head[RECORD] == ord("\n") and size % LINE == 0 else RECORD
        )
        if size % stride:
            raise ValueError(f"{path}: {size} bytes is not a whole number of records")
        f.seek(0)
        while True:
            buf = f.read(CHUNK * stride)
            if not buf:
                break
            yield np.frombuffer(buf, np.uint8).reshape(-1, stride)[:, :RECORD]


def input_reference(path: str | os.PathLike) -> Path:
    """Cached {records, checksum} of a sort input."""
    path = Path(path)
    ref = path.with_name(path.name + ".ref.json")
    stat = path.stat()
    if ref.exists():
        meta = json.loads(ref.read_text())
        if meta.get("bytes") == stat.st_size and meta.get("mtime") == int(stat.st_mtime):
            return ref
    count, total = 0, 0
    for rec in iter_records(path):
        count += len(rec)
        total = (total + records_checksum(rec)) & 0xFFFFFFFFFFFFFFFF
    ref.write_text(
        json.dumps(
            {
                "bytes": stat.st_size,
                "mtime": int(stat.st_mtime),
                "records": count,
                "checksum": total,
            }
        )
    )
    return ref


def check_sorted_dir(directory: str | os.PathLike, ref_path: str | os.PathLike) -> tuple[bool, str]:
    """The part files of ``directory`` (in name order) hold the input's records in key
    order: non-decreasing keys within and across files, same count, same checksum."""
    ref = json.loads(Path(ref_path).read_text())
    count, total = 0, 0
    last = None
    files = _record_files(Path(directory))
    for path in files:
        for rec in iter_records(path):
            hi, lo = key_ints(rec)
            if last is not None and (hi[0], lo[0]) < last:
                return False, f"{path.name}: first key below the previous file's last"
            bad = (hi[1:] < hi[:-1]) | ((hi[1:] == hi[:-1]) & (lo[1:] < lo[:-1]))
            if bad.any():
                return (
                    False,
                    f"{path.name}: keys out of order at record {count + int(bad.argmax()) + 1}",
                )
            last = (hi[-1], lo[-1])
            count += len(rec)
            total = (total + records_checksum(rec)) & 0xFFFFFFFFFFFFFFFF
    if count != ref["records"]:
        return False, f"{count} records in {len(files)} files, want {ref['records']}"
    if total != ref["checksum"]:
        return False, "checksum differs from the input's"
    return True, f"{count} records in {len(files)} files, in key order, checksum equal"


# ---------------------------------------------------------------------------------------------
# Streaming keyed windowed count

EVENT_KEYS = 1000
WINDOW_MS = 10_000
EVENTS_PER_S = 10_000
JITTER_MS = 2_000


def generate_events(directory: str | os.PathLike, n: int, files: int = 20, seed: int = 3) -> Path:
    """``ts_ms,key`` CSV lines in ``files`` files (part-00000.csv, ... in time order) and all
    in one file beside them: event times at EVENTS_PER_S, each up to JITTER_MS late (out of
    order), uniform keys."""
    directory = Path(directory)
    done = directory / "_COMPLETE"
    if done.exists() and events_single_file(directory).exists():
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    ts = np.arange(n, dtype=np.int64) * 1000 // EVENTS_PER_S + 1_700_000_000_000
    ts -= rng.integers(0, JITTER_MS, size=n)
    keys = rng.integers(0, EVENT_KEYS, size=n)
    with open(events_single_file(directory), "w") as every:
        for i in range(files):
            lo, hi = n * i // files, n * (i + 1) // files
            lines = (
                "\n".join(f"{t},{k}" for t, k in zip(ts[lo:hi].tolist(), keys[lo:hi].tolist()))
                + "\n"
            )
            (directory / f"part-{i:05d}.csv").write_text(lines)
            every.write(lines)
    counts = np.zeros(
        (int(ts.max() // WINDOW_MS - ts.min() // WINDOW_MS) + 1, EVENT_KEYS), np.int64
    )
    np.add.at(counts, (ts // WINDOW_MS - ts.min() // WINDOW_MS, keys), 1)
    np.save(directory.parent / (directory.name + ".counts.npy"), counts)
    (directory.parent / (directory.name + ".first_window.txt")).write_text(
        str(int(ts.min() // WINDOW_MS))
    )
    done.write_text("")
    return directory


def events_single_file(directory: str | os.PathLike) -> Path:
    """The same events as one file, in the same order (for sources that read a directory's
    files in parallel or in no particular order, so that event time stays in order)."""
    return Path(directory).parent / (Path(directory).name + ".all.csv")


def streaming_reference(directory: str | os.PathLike) -> Path:
    return Path(directory).parent / (Path(directory).name + ".counts.npy")


def check_window_counts(got: dict, ref_path: str | os.PathLike) -> tuple[bool, str]:
    """``got``: {(window index = start_ms // WINDOW_MS, key): count}."""
    ref_path = Path(ref_path)
    want = np.load(ref_path)
    first = int(
        (ref_path.parent / ref_path.name.replace(".counts.npy", ".first_window.txt")).read_text()
    )
    have = np.zeros_like(want)
    for (w, k), c in got.items():
        i = int(w) - first
        if not (0 <= i < want.shape[0] and 0 <= int(k) < want.shape[1]):
            return False, f"window {w} key {k} outside the input's range"
        have[i, int(k)] = c
    if not np.array_equal(have, want):
        bad = int((have != want).sum())
        return (
            False,
            f"{bad} (window, key) counts differ; events {int(have.sum())}, want {int(want.sum())}",
        )
    return True, f"{int(want.sum())} events, {int((want > 0).sum())} (window, key) counts equal"


def read_window_counts_dir(directory: str | os.PathLike) -> dict[tuple[int, int], int]:
    """``window,key,count`` lines of every part file of a directory (the latest line of a
    (window, key) wins, as in an update-mode sink)."""
    got: dict[tuple[int, int], int] = {}
    for part in sorted(Path(directory).iterdir()):
        if not part.is_file() or part.name.startswith((".", "_")):
            continue
        for line in part.read_text().splitlines():
            if line:
                w, k, c = line.split(",")
                got[(int(w), int(k))] = int(c)
    return got


# ---------------------------------------------------------------------------------------------
# Trivial tasks


def task_value(i: int) -> int:
    return i * i


def tasks_reference(n: int) -> int:
    return sum(task_value(i) for i in range(n))


class Timer:
    """``with Timer() as t: ...`` then ``t.s``."""

    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.s = time.perf_counter() - self.t0
        return False


def emit(**fields) -> None:
    """The JSON line every program prints last."""
    print(json.dumps(fields), flush=True)
