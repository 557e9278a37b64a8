"""The SparkSession every Spark peer program uses: local[N] (one JVM, N task slots), driver
memory set before the JVM starts, no UI, few shuffle partitions (the 200 default is for
clusters; adaptive query execution stays on and coalesces them further)."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from pyspark.sql import SparkSession


def session(name: str, workers: int = 2, shuffle_partitions: int = 8, driver_memory: str = "8g"):
    spark = (
        SparkSession.builder.master(f"local[{workers}]")
        .appName(name)
        .config("spark.driver.memory", driver_memory)  # before getOrCreate starts the JVM
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(shuffle_partitions))
        .config("spark.sql.files.maxPartitionBytes", str(32 << 20))
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
