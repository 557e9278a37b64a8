"""heddle._report: what a task-graph job reports — counters per task instance, what an
isolated instance's process used, the checkpoints completed (re-exported by
:mod:`heddle.task`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ProcessUsage:
    """What an isolated task's process used, measured from outside it when it ended."""

    #: Peak memory: its control group's peak, else its peak resident set.
    peak_bytes: int
    #: CPU seconds, user and system.
    cpu_s: float
    #: Seconds from its start to its end.
    wall_s: float
    #: Seconds from its worker placing it to its first call answered (groups made,
    #: forked from the worker, moved into the groups, first call).
    start_s: float
    #: Of ``start_s``, the seconds making the groups and moving the process in.
    confine_s: float
    #: ``"cgroup v1"``, ``"cgroup v2"``, ``"rlimit"`` (no groups could be made) or ``"none"``.
    enforcement: str


@dataclass(frozen=True)
class TaskStats:
    """Counters of one task instance (``process``: what its process used, for an isolated
    instance)."""

    task: str
    worker: int
    executed: int
    ticks: int
    emitted: int
    discarded: int
    process: ProcessUsage | None = None

    @staticmethod
    def _from(d: dict[str, Any]) -> TaskStats:
        usage = d.pop("process", None)
        return TaskStats(**d, process=ProcessUsage(**usage) if usage else None)


@dataclass(frozen=True)
class CheckpointStats:
    """One completed checkpoint of a streaming job (reported by rank 0)."""

    checkpoint: int
    #: Milliseconds from its trigger to the last acknowledgement.
    duration_ms: float
    #: Bytes of state over all tasks.
    bytes: int
    #: Taken when every source had ended.
    last: bool


@dataclass(frozen=True)
class Report:
    """What a job did on this worker: passes run, seconds from the first pass to the end
    of the last, the counters of the task instances on this worker, and (on rank 0 of a
    checkpointed job) the checkpoints completed."""

    passes: int
    job_s: float
    tasks: list[TaskStats]
    checkpoints: list[CheckpointStats] = field(default_factory=list)

    @staticmethod
    def _from(d: dict[str, Any]) -> Report:
        return Report(
            d["passes"],
            d["job_s"],
            [TaskStats._from(t) for t in d["tasks"]],
            [CheckpointStats(*c) for c in d.get("checkpoints", [])],
        )
