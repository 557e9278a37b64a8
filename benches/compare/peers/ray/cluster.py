"""ray.init for every Ray peer program: a local Ray with N CPUs, no dashboard, no usage stats."""

from __future__ import annotations

import os


def init(workers: int = 2):
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    ray.init(
        num_cpus=workers, include_dashboard=False, log_to_driver=False, configure_logging=False
    )
    return ray
