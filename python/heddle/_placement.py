"""heddle._placement: what a task graph's instances request and how schedulers place them
on workers (re-exported by :mod:`heddle.task`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Union

from heddle._heddle import task as _task
from heddle.comm import Comm


@dataclass(frozen=True)
class Resources:
    """What each instance of a vertex requests: ``cpus`` cores (fractions allowed, above 0),
    ``memory`` bytes (an int, or an amount such as ``"200MiB"``, ``"1.5GiB"``, kept as
    bytes), ``hosts`` holding its input (preferred by :class:`DataLocality`), and
    ``net_bytes_per_s``: bytes per second of records it may send on its edges (an amount
    too; 0, no limit), enforced by a token bucket in front of its edges;
    ``io_bytes_per_s``: bytes per second it may read from and write to each block device;
    ``isolation``: where a task-graph compute instance or a data-API record-wise stage's
    partition runs — ``"thread"`` (of its
    worker), ``"process"`` (forked from its worker, confined to ``cpus``, ``memory`` and
    ``io_bytes_per_s`` by control groups; its records cross shared memory, so they must
    pickle) or ``"auto"`` (the default: a process when there is memory or an I/O rate to
    enforce); ``expected``: calls per second each instance expects of its methods,
    ``{"execute": 50_000}`` (Squirrel's expected usage; ``execute`` and ``tick``): the plan
    says what a process's channel costs at that rate, admission holds it, and a task that
    runs well over it is reported. A bad amount raises ``ValueError`` saying what is wrong.

    >>> Resources(cpus=0.5, memory="200MiB", net_bytes_per_s="8MiB").net_bytes_per_s
    8388608
    >>> Resources(memory="64MiB", isolation="process").isolation
    'process'
    """

    cpus: float = 1.0
    memory: int | str = 0
    hosts: tuple[str, ...] = ()
    net_bytes_per_s: int | str = 0
    io_bytes_per_s: int | str = 0
    isolation: str = "auto"
    expected: Mapping[str, float] | tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        pairs = self.expected.items() if isinstance(self.expected, Mapping) else self.expected
        try:
            expected = tuple((str(m), float(r)) for m, r in pairs)
        except (TypeError, ValueError):
            raise ValueError(
                f"Resources(expected={self.expected!r}): a mapping of method to calls per "
                "second, e.g. {'execute': 50000}"
            ) from None
        object.__setattr__(self, "expected", expected)
        if self.isolation not in ("auto", "thread", "process"):
            raise ValueError(
                f"Resources(isolation={self.isolation!r}): use 'auto', 'thread' or 'process'"
            )
        for name in ("memory", "net_bytes_per_s", "io_bytes_per_s"):
            amount: object = getattr(self, name)
            if isinstance(amount, str):
                object.__setattr__(self, name, _task.parse_bytes(amount))
            elif not isinstance(amount, int) or isinstance(amount, bool) or amount < 0:
                raise ValueError(
                    f"Resources({name}={amount!r}): bytes at least 0, or e.g. '200MiB'"
                )
        try:
            _task.parse_cpus(repr(float(self.cpus)))
        except (TypeError, ValueError) as e:
            raise ValueError(f"Resources(cpus={self.cpus!r}): {e}") from None

    def rates(self) -> list[tuple[str, float]]:
        """``expected`` as ``(method, calls per second)`` pairs."""
        e = self.expected
        return list(e.items()) if isinstance(e, Mapping) else list(e)

    def amounts(self) -> tuple[float, int, int, int, str]:
        """``(cpus, memory, net_bytes_per_s, io_bytes_per_s, isolation)`` as the native
        layer takes them for a data-API stage."""
        return (
            float(self.cpus),
            int(self.memory),
            int(self.net_bytes_per_s),
            int(self.io_bytes_per_s),
            self.isolation,
        )


@dataclass(frozen=True)
class WorkerSpec:
    """One worker as schedulers see it."""

    rank: int
    host: str
    cpus: float
    memory: int

    @staticmethod
    def discover(comm: Comm) -> list[WorkerSpec]:
        """Every worker of ``comm`` with its host and its share of the host's cores and
        memory (collective: every worker must call it)."""
        return [WorkerSpec(*w) for w in _task.discover(comm)]


@dataclass(frozen=True)
class RoundRobin:
    """Instance i of every vertex on worker ``i mod workers`` (instances of one-to-one
    vertices end up together, so direct edges chain). Memory requests are checked; cpu may
    be shared."""

    name: str = field(default="round_robin", init=False)


@dataclass(frozen=True)
class FirstFit:
    """Bin packing: each instance, in vertex order, on the first worker with enough cpu
    and memory left."""

    name: str = field(default="first_fit", init=False)


@dataclass(frozen=True)
class DataLocality:
    """Instances whose request names hosts go, round robin, to workers on those hosts with
    room; others (and any that do not fit there) to the worker with the most free cpu."""

    name: str = field(default="data_locality", init=False)


Scheduler = Union[RoundRobin, FirstFit, DataLocality]
