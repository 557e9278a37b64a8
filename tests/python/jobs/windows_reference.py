"""Plain Python windowing: the references the stream tests compare heddle.data windows
with. Results are tuples ``(key, start, end, value, records, update)``, sorted."""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Callable

Result = tuple[object, int, int, object, int, bool]


def starts(t: int, size: int, slide: int) -> list[int]:
    """Starts of the windows of ``size`` every ``slide`` (from 0) that contain time ``t``."""
    return [s for s in range(t - t % slide, -1, -slide) if s + size > t]


def plain_windows(
    events: Iterable[tuple[object, object, int]], size: int, slide: int, reduce: Callable
) -> list[Result]:
    """Every ``(key, value, time)`` event in each window containing it, nothing late."""
    acc: dict = {}
    for key, value, t in events:
        for s in starts(t, size, slide):
            held = acc.get((key, s))
            acc[(key, s)] = (value, 1) if held is None else (reduce(held[0], value), held[1] + 1)
    return sorted((k, s, s + size, v, n, False) for (k, s), (v, n) in acc.items())


def event_windows(
    events, size: int, slide: int, out_of_orderness: int, lateness: int, reduce: Callable
) -> tuple[list[Result], int]:
    """Event-time windows of one source taking ``(key, value, time)`` events in order: the
    watermark trails the largest time seen by ``out_of_orderness`` and fires the windows it
    passes; a record for a fired window re-emits it (``update``) until the watermark is
    ``lateness`` past the window's end, after which the record is dropped and counted; the
    end of the input fires every window left. Returns the results and the late count."""
    out: list[Result] = []
    windows: dict = {}  # (start, key) -> [value, records, fired]
    watermark, latest, late = 0, 0, 0

    def fire(mark: int, final: bool = False) -> None:
        for (s, k), w in sorted(windows.items(), key=lambda item: item[0][0]):
            end = s + size
            if end <= mark or final:
                if not w[2]:
                    w[2] = True
                    out.append((k, s, end, w[0], w[1], False))
                if final or end + lateness <= mark:
                    del windows[(s, k)]

    for key, value, t in events:
        for s in starts(t, size, slide):
            end = s + size
            if watermark and end + lateness <= watermark:
                late += 1
                continue
            w = windows.get((s, key))
            if w is None:
                fired = bool(watermark) and end <= watermark
                windows[(s, key)] = [value, 1, fired]
                if fired:
                    out.append((key, s, end, value, 1, True))
            else:
                w[0], w[1] = reduce(w[0], value), w[1] + 1
                if w[2]:
                    out.append((key, s, end, w[0], w[1], True))
        latest = max(latest, t)
        if latest - out_of_orderness > watermark:
            watermark = latest - out_of_orderness
            fire(watermark)
    fire(watermark, final=True)
    return sorted(out), late


def count_windows(
    events: Iterable[tuple[object, object]], size: int, slide: int, reduce: Callable
) -> list[Result]:
    """Count windows over each key's values in arrival order: the last ``size`` values
    (fewer at first) after every ``slide``-th; tumbling when ``size == slide`` (only full
    windows)."""
    seen: dict = collections.defaultdict(list)
    out: list[Result] = []
    for key, value in events:
        vals = seen[key]
        vals.append(value)
        n = len(vals)
        if (size == slide and n % size == 0) or (size != slide and n % slide == 0):
            held = vals[max(0, n - size) :]
            acc = held[0]
            for v in held[1:]:
                acc = reduce(acc, v)
            out.append((key, n - len(held), n, acc, len(held), False))
    return sorted(out)


def session_windows(
    events: Iterable[tuple[object, object, int]], gap: int, reduce: Callable
) -> list[Result]:
    """Sessions of each key: its times sorted, split where the next is ``gap`` or more
    after the last; a session ends ``gap`` after its last time."""
    per_key: dict = collections.defaultdict(list)
    for key, value, t in events:
        per_key[key].append((t, value))
    out: list[Result] = []
    for key, items in per_key.items():
        items.sort(key=lambda tv: tv[0])
        first, last, acc, n = items[0][0], items[0][0], items[0][1], 1
        for t, v in items[1:]:
            if t - last >= gap:
                out.append((key, first, last + gap, acc, n, False))
                first, acc, n = t, v, 0
            else:
                acc = reduce(acc, v)
            last, n = t, n + 1
        out.append((key, first, last + gap, acc, n, False))
    return sorted(out)


def as_tuples(results) -> list[Result]:
    """``Windowed`` results as sorted plain tuples."""
    return sorted(tuple(w) for w in results)
