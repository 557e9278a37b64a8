"""The datasets of the Python examples, made exactly as the Rust examples make them
(crates/heddle/examples/common/text.rs and points.rs), vectorized with numpy:

* ``generate_words(path, megabytes, seed)`` writes the word-count text: 12 words a line from
  a 100,000-word vocabulary with Zipf-like frequencies. Byte for byte the file the Rust
  ``wordcount --generate`` writes (the same name in the temp directory, so either reuses
  the other's); tests/python/test_examples.py checks it against the Rust example.
* ``points(seed, start, end)`` gives the K-means points ``start .. end - 1`` (Gaussian
  blobs; each point can be made alone, so each worker makes only its share). The formula
  is the Rust one; ``log``/``cos``/``sin`` may differ from Rust's in the last bit.
* ``read_points(path)`` reads points from CSV (``x,y`` lines, optional header) or ``.npy``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

VOCABULARY = 100_000
WORDS_PER_LINE = 12
POINTS = 1_000_000
BLOBS = 16

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's output function of state ``z`` (uint64 arrays, wrapping)."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def _stream(seed: int, start: int, n: int) -> np.ndarray:
    """Outputs ``start .. start + n - 1`` of a splitmix64 stream seeded with ``seed``."""
    k = np.arange(start + 1, start + n + 1, dtype=np.uint64)
    return _mix(np.uint64(seed) + k * _GAMMA)


def vocabulary(seed: int) -> list:
    """Distinct lowercase words of 2 to 11 letters, most frequent first."""
    words, seen, drawn, at = [], set(), 0, 0
    lengths, letters = [], b""
    while len(words) < VOCABULARY:
        if at + 12 > len(lengths):  # draw more of the stream
            s = _stream(seed ^ 0x5EED, drawn, 1 << 20)
            lengths = lengths[at:] + (s % np.uint64(10) + np.uint64(2)).tolist()
            letters = letters[at:] + (s % np.uint64(26) + np.uint64(97)).astype(np.uint8).tobytes()
            drawn, at = drawn + len(s), 0
        n = lengths[at]
        w = letters[at + 1 : at + 1 + n].decode()
        at += 1 + n
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def generate_words(path: Path, megabytes: int, seed: int) -> None:
    """Writes about ``megabytes`` MiB of text (whole lines) to ``path``."""
    words = vocabulary(seed)
    vocab = np.frombuffer("".join(words).encode(), dtype=np.uint8)
    vlen = np.array([len(w) for w in words], dtype=np.int64)
    voff = np.cumsum(vlen) - vlen
    cumulative = np.cumsum(1.0 / np.arange(1, VOCABULARY + 1, dtype=np.float64))
    total = cumulative[-1]
    budget, written, line0, chunk = megabytes << 20, 0, 0, 100_000
    tmp = path.with_suffix(".partial")
    with open(tmp, "wb") as out:
        while written < budget:
            s = _stream(seed, line0 * WORDS_PER_LINE, chunk * WORDS_PER_LINE)
            u = (s >> np.uint64(11)).astype(np.float64) / float(1 << 53) * total
            idx = np.minimum(np.searchsorted(cumulative, u, side="left"), VOCABULARY - 1).reshape(
                chunk, WORDS_PER_LINE
            )
            line_len = vlen[idx].sum(axis=1) + WORDS_PER_LINE
            ends = written + np.cumsum(line_len)
            # lines started below the budget
            keep = int(np.searchsorted(ends - line_len, budget, side="left"))
            idx, line_len = idx[:keep], line_len[:keep]
            out.write(_lines(idx, vocab, vlen, voff))
            written += int(line_len.sum())
            line0 += chunk
    os.replace(tmp, path)


def _lines(idx: np.ndarray, vocab: np.ndarray, vlen: np.ndarray, voff: np.ndarray) -> bytes:
    """The text of lines of word indices: words joined by spaces, each line ending in \\n."""
    flat = idx.ravel()
    lens = vlen[flat]
    token = lens + 1  # the word and the separator after it
    starts = np.cumsum(token) - token
    out = np.empty(int(token.sum()), dtype=np.uint8)
    within = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    out[np.repeat(starts, lens) + within] = vocab[np.repeat(voff[flat], lens) + within]
    sep = np.full(flat.shape, ord(" "), dtype=np.uint8).reshape(idx.shape)
    sep[:, -1] = ord("\n")
    out[starts + lens] = sep.ravel()
    return out.tobytes()


def words_file(megabytes: int, seed: int) -> Path:
    """Where the Rust and Python examples keep the generated text."""
    return Path(tempfile.gettempdir()) / f"heddle-words-{megabytes}mb-seed{seed}.txt"


def _unit(z: np.ndarray) -> np.ndarray:
    return ((z >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)


def _mix1(z: np.ndarray) -> np.ndarray:
    return _mix(z + _GAMMA)


def points(seed: int, start: int, end: int) -> np.ndarray:
    """Points ``start .. end - 1`` as a float64 array of shape (n, 2)."""
    b = np.arange(BLOBS, dtype=np.uint64)
    h = _mix1(np.uint64(seed) ^ np.uint64(0xB10B) ^ (b << np.uint64(32)))
    centers = np.stack([_unit(h) * 100.0, _unit(_mix1(h)) * 100.0], axis=1)
    i = np.arange(start, end, dtype=np.uint64)
    h = _mix1((np.uint64(seed) * np.uint64(0x2545F4914F6CDD1D)) ^ i)
    c = centers[(h % np.uint64(BLOBS)).astype(np.int64)]
    u1, u2 = _unit(_mix1(h ^ np.uint64(1))), _unit(_mix1(h ^ np.uint64(2)))
    r = np.sqrt(-2.0 * np.log(u1)) * 2.0
    t = 2.0 * np.pi * u2
    return np.stack([c[:, 0] + r * np.cos(t), c[:, 1] + r * np.sin(t)], axis=1)


def read_points(path: Path) -> np.ndarray:
    """Points from ``.npy`` (float64, shape (n, 2)) or CSV (``x,y`` lines, optional header)."""
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic == b"\x93NUMPY":
        a = np.load(path, mmap_mode="r")
    else:
        with open(path) as f:
            first = f.readline()
        skip = 1 if first[:1].isalpha() else 0
        a = np.loadtxt(path, delimiter=",", skiprows=skip, ndmin=2)
    if a.ndim != 2 or a.shape[1] != 2:
        raise ValueError(f"{path}: expected points of shape (n, 2), got {a.shape}")
    return np.asarray(a, dtype=np.float64)
