"""The Dask cluster every Dask peer program uses: a distributed LocalCluster of N worker
processes with one thread each (Python code holds the GIL, so processes, as Dask's docs
advise), no dashboard."""

from __future__ import annotations


def client(workers: int = 2):
    from dask.distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
    )
    return Client(cluster)
