"""Where task results stay on the workers, so that a future passed as an argument of
another task is resolved where that task runs (as Ray does), without its value travelling
back from the root.

Each worker keeps the results of the tasks it ran for as long as their futures live on
the root (as Ray keeps an object while references to it exist): the root releases a
result, in its next batch to that worker, once its future was collected and no waiting
task needs it. A task whose argument futures all came from this executor and are all kept
on one worker is sent to that worker with references in their place; otherwise the root
fills in the values. Used by the manager thread, by ``submit`` and by the garbage
collector's finalizers (hence a re-entrant lock).
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict, deque


class Retained:
    """Which worker keeps which result, and how many waiting tasks still need each."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._where: dict[int, int] = {}  # task -> worker keeping its result
        self._complete: set[int] = set()  # tasks whose result reached the root
        self._dropped: set[int] = set()  # tasks whose future was collected
        self._needed: Counter[int] = Counter()  # task -> dependents not yet sent
        self._release: defaultdict[int, list[int]] = defaultdict(list)
        # Collected futures, noted by the garbage collector without the lock (an append)
        # and taken in by the manager thread.
        self._drops: deque[int] = deque()

    def dispatched(self, tasks: list[int], worker: int) -> None:
        with self._lock:
            self._where.update(dict.fromkeys(tasks, worker))

    def completed(self, ok: list[int], failed: list[int]) -> None:
        """The root has these tasks' outcomes; a failed task's result is kept nowhere."""
        with self._lock:
            self._take_drops()
            for task in failed:
                self._where.pop(task, None)
                self._maybe_release(task)
            self._complete.update(ok)
            for task in self._dropped.intersection(ok):  # most are still referenced
                self._maybe_release(task)

    def dropped(self, task: int) -> None:
        """The task's future was collected: nobody can pass it as an argument any more."""
        self._drops.append(task)

    def _take_drops(self) -> None:
        while self._drops:
            task = self._drops.popleft()
            self._dropped.add(task)
            self._maybe_release(task)

    def need(self, tasks: list[int]) -> None:
        with self._lock:
            self._needed.update(tasks)

    def unneed(self, tasks: list[int]) -> None:
        with self._lock:
            self._needed.subtract(tasks)
            for t in tasks:
                if self._needed[t] <= 0:
                    del self._needed[t]
                    self._maybe_release(t)

    def _maybe_release(self, task: int) -> None:
        if task not in self._dropped or self._needed[task]:
            return
        if task in self._complete:
            self._release[self._where.pop(task)].append(task)
        if task in self._complete or task not in self._where:
            # Released, or never kept (failed, cancelled, or never sent).
            self._complete.discard(task)
            self._dropped.discard(task)

    def keeper(self, tasks: list[int]) -> int | None:
        """The worker keeping every result of ``tasks``, if one does."""
        with self._lock:
            workers = {self._where.get(t) for t in tasks}
            if len(workers) != 1 or None in workers:
                return None
            if not all(t in self._complete for t in tasks):
                return None
            return workers.pop()

    def releases(self, worker: int) -> list[int]:
        """The results ``worker`` may drop, to send with its next batch."""
        with self._lock:
            self._take_drops()
            return self._release.pop(worker, [])
