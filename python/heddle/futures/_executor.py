"""The root's side of :mod:`heddle.futures`: a ``concurrent.futures.Executor`` whose tasks
run on the other ranks of a communicator.

``submit`` only queues the task: a manager thread owns everything else. It sends queued
tasks to the least loaded workers (up to ``IN_FLIGHT`` each, or their share of a long
queue, so small tasks travel hundreds to a message), waits for results without the GIL,
and completes the futures. A manager waiting for results while a worker has room is woken
by a message the root sends itself; an idle one sleeps on an event. No lock is shared
with ``submit``: the queue is a ``deque`` and the hand-over flags follow the order
"publish, then look" on both sides.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor, Future
from concurrent.futures.thread import BrokenThreadPool
from functools import partial
from typing import Any, Callable

from heddle._heddle import comm as _native
from heddle.comm import Comm
from heddle.futures import _worker
from heddle.futures._retained import Retained
from heddle.futures._shared import job_dir, load_results
from heddle.futures._worker import STOP, TASK, Ref, Task, apply_chunk, dump, wait

#: Tasks a worker may hold at once: enough to hide a round trip, few enough to balance.
IN_FLIGHT = 16
#: With a long queue a worker may hold its share of it, up to this many: small tasks then
#: travel hundreds to a message.
IN_FLIGHT_QUEUED = 4096


class BrokenExecutor(BrokenThreadPool):
    """The executor cannot run tasks any more (a worker was lost, or the link failed)."""


class RemoteTraceback(Exception):
    """The traceback of an exception raised on a worker (its ``__cause__``)."""

    def __init__(self, tb: str) -> None:
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return self.tb


class _Queued:
    __slots__ = ("args", "deps", "fn", "future", "id", "kwargs")

    def __init__(self, task_id: int, future: Future[Any], fn: Any, args: Any, kwargs: Any):
        self.id, self.future, self.fn, self.args, self.kwargs = task_id, future, fn, args, kwargs
        # Tasks whose results it takes by reference on its worker (see _retained).
        self.deps: list[int] = []


class CommPoolExecutor(Executor):
    """Runs tasks on the ranks of ``comm`` other than ``root`` (this process)."""

    def __init__(self, comm: Comm, root: int, result_tag: int, stop_workers: bool) -> None:
        self._comm = comm
        self._result_tag = result_tag
        self._stop_workers = stop_workers
        self._root = root
        self._workers = [r for r in range(comm.size) if r != root]
        # The manager's own: tasks in flight per worker, their futures, sends under way.
        self._inflight = dict.fromkeys(self._workers, 0)
        self._sent: dict[int, Future[Any]] = {}
        # Tasks that must run where their arguments' results are kept, per worker.
        self._pinned: dict[int, deque[_Queued]] = {w: deque() for w in self._workers}
        self._retained = Retained()
        # Where workers on this host put large results for this process to map.
        self._share = job_dir()
        # This executor's futures, by weak reference: which task each is, and a call when
        # one is collected (cheaper than a finalizer).
        self._futures: dict[weakref.ref[Future[Any]], int] = {}
        self._sends: deque[Any] = deque()
        # Shared with submit (see the module's note on the hand-over).
        self._queue: deque[_Queued] = deque()
        self._ids = itertools.count()
        self._blocked = 0  # tasks waiting for futures among their arguments
        self._lock = threading.Lock()  # guards _blocked
        self._event = threading.Event()
        self._sleeping = False
        self._waiting = False
        self._wake_sent = False
        self._own_sends: deque[Any] = deque()
        self._shutdown = False
        self._broken: BaseException | None = None
        self._thread = threading.Thread(target=self._manage, name="heddle-futures", daemon=True)
        self._thread.start()

    # -- the Executor interface -----------------------------------------------------------

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Schedules ``fn(*args, **kwargs)`` on a worker; a future among the arguments is
        replaced by its result once it has one."""
        if self._broken is not None:
            raise BrokenExecutor(f"the executor is broken: {self._broken}")
        if self._shutdown:
            raise RuntimeError("cannot schedule new futures after shutdown")
        future: Future[Any] = Future()
        queued = _Queued(next(self._ids), future, fn, args, kwargs)
        self._futures[weakref.ref(future, self._collected)] = queued.id
        if _has_future(args) or (kwargs and _has_future(kwargs.values())):
            self._when_ready(queued)
        else:
            self._queue.append(queued)
            self._wake()
        return future

    def _wake(self) -> None:
        """Gets the manager to look at the queue (publish first, then this)."""
        if self._sleeping:
            self._event.set()
        elif self._waiting and not self._wake_sent:
            self._wake_sent = True
            self._own_sends.append(
                _native.isend(self._comm, bytearray(0), self._root, self._result_tag)
            )

    def map(
        self,
        fn: Callable[..., Any],
        *iterables: Iterable[Any],
        timeout: float | None = None,
        chunksize: int = 1,
    ) -> Iterator[Any]:
        """As ``Executor.map``; ``chunksize`` items travel and run as one task."""
        if chunksize < 1:
            raise ValueError("chunksize must be >= 1")
        chunks = _chunks(zip(*iterables), chunksize)
        results = super().map(partial(apply_chunk, fn), chunks, timeout=timeout)
        return itertools.chain.from_iterable(results)

    def starmap(
        self,
        fn: Callable[..., Any],
        iterable: Iterable[tuple[Any, ...]],
        timeout: float | None = None,
        chunksize: int = 1,
    ) -> Iterator[Any]:
        """``fn(*args)`` for each tuple of ``iterable`` (mpi4py.futures' ``starmap``)."""
        return self.map(fn, *zip(*iterable), timeout=timeout, chunksize=chunksize)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No new tasks; with ``wait`` returns once every task has finished."""
        self._shutdown = True
        if cancel_futures:
            while self._queue:
                self._queue.popleft().future.cancel()
            for pinned in self._pinned.values():
                while pinned:
                    pinned.popleft().future.cancel()
        self._wake()
        if wait:
            self._thread.join()

    @property
    def num_workers(self) -> int:
        """How many ranks run tasks."""
        return len(self._workers)

    # -- dispatch (the manager thread's) --------------------------------------------------

    def _dispatch(self) -> None:
        for worker, pinned in self._pinned.items():
            room = max(IN_FLIGHT, min(len(pinned), IN_FLIGHT_QUEUED)) - self._inflight[worker]
            if pinned and room > 0:
                self._send(worker, pinned, room)
        while self._queue:
            worker = min(self._workers, key=self._inflight.__getitem__)
            share = -(-len(self._queue) // len(self._workers))  # an even split, rounded up
            room = max(IN_FLIGHT, min(share, IN_FLIGHT_QUEUED)) - self._inflight[worker]
            if room <= 0:
                return
            self._send(worker, self._queue, min(room, share))

    def _send(self, worker: int, source: deque[_Queued], take: int) -> None:
        """Sends ``worker`` up to ``take`` tasks from ``source``."""
        batch: list[Task] = []
        deps: list[int] = []
        while source and len(batch) < take:
            q = source.popleft()
            deps += q.deps
            if q.future.set_running_or_notify_cancel():
                batch.append((q.id, q.fn, q.args, q.kwargs, bool(q.deps)))
                self._sent[q.id] = q.future
        if batch:
            # Released before this batch's own references are dropped: the worker lets
            # go of a result only in a later batch than the last that refers to it.
            release = self._retained.releases(worker)
            try:
                blob = dump((self._result_tag, batch, release, self._share))
            except Exception:
                batch = self._picklable(batch)
                blob = dump((self._result_tag, batch, release, self._share))
            self._retained.dispatched([t[0] for t in batch], worker)
            self._inflight[worker] += len(batch)
            while self._sends and self._sends[0].done:
                self._sends.popleft()
            self._sends.append(_native.isend(self._comm, blob, worker, TASK))
        self._retained.unneed(deps)

    def _picklable(self, batch: list[Task]) -> list[Task]:
        """The tasks of ``batch`` that pickle; the others fail with the reason."""
        keep = []
        for task in batch:
            try:
                dump(task)
                keep.append(task)
            except Exception as e:
                future = self._sent.pop(task[0])
                future.set_exception(e)
        return keep

    def _when_ready(self, queued: _Queued) -> None:
        deps = [
            a for a in itertools.chain(queued.args, queued.kwargs.values()) if isinstance(a, Future)
        ]
        # Our own futures' results may be taken where they are kept, by reference.
        ids = [self._task_id(d) for d in deps]
        ours: list[int] = [i for i in ids if i is not None] if None not in ids else []
        self._retained.need(ours)
        with self._lock:
            self._blocked += 1
        remaining = [len(deps)]

        def resolve(value: Any) -> Any:
            return value.result() if isinstance(value, Future) else value

        def one_done(_: Future[Any]) -> None:
            with self._lock:
                remaining[0] -= 1
                if remaining[0]:
                    return
            failed = next((d for d in deps if d.cancelled() or d.exception()), None)
            keeper = self._retained.keeper(ours) if ours and failed is None else None
            if keeper is not None:
                refs = {id(d): Ref(i) for d, i in zip(deps, ours)}

                def ref(value: Any) -> Any:
                    return refs[id(value)] if isinstance(value, Future) else value

                queued.args = tuple(ref(a) for a in queued.args)
                queued.kwargs = {k: ref(v) for k, v in queued.kwargs.items()}
                queued.deps = ours
                self._pinned[keeper].append(queued)
            elif failed is None:
                queued.args = tuple(resolve(a) for a in queued.args)
                queued.kwargs = {k: resolve(v) for k, v in queued.kwargs.items()}
                self._retained.unneed(ours)
                self._queue.append(queued)
            else:
                self._retained.unneed(ours)
                if queued.future.set_running_or_notify_cancel():
                    cause = (
                        "was cancelled" if failed.cancelled() else f"failed: {failed.exception()!r}"
                    )
                    queued.future.set_exception(RuntimeError(f"an argument's future {cause}"))
            with self._lock:
                self._blocked -= 1
            self._wake()

        for d in deps:
            d.add_done_callback(one_done)

    # -- the manager thread ---------------------------------------------------------------

    def _collected(self, ref: weakref.ref[Future[Any]]) -> None:
        task_id = self._futures.pop(ref, None)
        if task_id is not None:
            self._retained.dropped(task_id)

    def _task_id(self, future: Future[Any]) -> int | None:
        """The id of a task of this executor's whose future ``future`` is."""
        return self._futures.get(weakref.ref(future))

    def _idle(self) -> bool:
        pinned = any(self._pinned.values())
        return not self._sent and not self._queue and not self._blocked and not pinned

    def _room(self) -> bool:
        if any(q and self._inflight[w] < IN_FLIGHT for w, q in self._pinned.items()):
            return True
        return bool(self._queue) and min(self._inflight.values()) < IN_FLIGHT

    def _manage(self) -> None:
        try:
            while True:
                self._dispatch()
                if not self._sent:
                    if self._shutdown and self._idle():
                        break
                    self._sleeping = True
                    pinned = any(self._pinned.values())
                    if not self._queue and not pinned and not (self._shutdown and self._idle()):
                        self._event.wait()
                    self._event.clear()
                    self._sleeping = False
                    continue
                self._waiting = True
                if self._room():
                    self._waiting = False
                    continue
                req = _native.irecv_bytes(self._comm, None, self._result_tag)
                status = wait(req)
                self._waiting = False
                assert status is not None
                if status[0] == self._root:  # a wake-up from submit
                    self._wake_sent = False
                    while self._own_sends and self._own_sends[0].done:
                        self._own_sends.popleft()
                    continue
                data = req.take_bytes()
                assert data is not None
                self._complete(status[0], load_results(data, self._share))
        except BaseException as e:
            self._break(e)
        finally:
            if self._stop_workers:
                stop_workers(self._comm, self._workers)

    def _complete(self, worker: int, outcomes: list[Any]) -> None:
        self._inflight[worker] -= len(outcomes)
        done = [(self._sent.pop(o[0]), o) for o in outcomes]
        self._retained.completed(
            [o[0] for o in outcomes if o[1]], [o[0] for o in outcomes if not o[1]]
        )
        self._dispatch()  # the next batch leaves before the futures run their callbacks
        for future, (_, ok, value, tb) in done:
            if ok:
                future.set_result(value)
            else:
                if tb is not None and isinstance(value, BaseException):
                    value.__cause__ = RemoteTraceback(tb)
                future.set_exception(value)

    def _break(self, error: BaseException) -> None:
        self._broken = error
        futures = list(self._sent.values())
        self._sent.clear()
        while self._queue:
            futures.append(self._queue.popleft().future)
        for pinned in self._pinned.values():
            futures.extend(q.future for q in pinned)
            pinned.clear()
        for f in futures:
            if not f.done():
                if f.running() or f.set_running_or_notify_cancel():
                    f.set_exception(BrokenExecutor(f"the executor is broken: {error}"))


def stop_workers(comm: Comm, workers: list[int]) -> None:
    """Ends the serving loops of ``workers``."""
    sends = [_native.isend(comm, bytearray(1), w, STOP) for w in workers]
    for s in sends:
        _worker.wait(s)


def _has_future(values: Iterable[Any]) -> bool:
    # A loop: cheaper than any() over a generator, and submit runs once per task.
    for v in values:
        if isinstance(v, Future):
            return True
    return False


def _chunks(items: Iterable[tuple[Any, ...]], size: int) -> Iterator[list[tuple[Any, ...]]]:
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk
