"""The TableEnvironment every PyFlink peer program uses: a local mini-cluster with N slots
(parallelism N), batch or streaming execution."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("PYFLINK_CLIENT_EXECUTABLE", sys.executable)


def table_env(workers: int = 2, batch: bool = True):
    from pyflink.table import EnvironmentSettings, TableEnvironment

    settings = (
        EnvironmentSettings.in_batch_mode() if batch else EnvironmentSettings.in_streaming_mode()
    )
    t_env = TableEnvironment.create(settings)
    conf = t_env.get_config()
    conf.set("parallelism.default", str(workers))
    conf.set("python.executable", sys.executable)
    return t_env
