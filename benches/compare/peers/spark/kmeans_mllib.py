"""K-means, Spark MLlib (pyspark.mllib KMeans.train with the first k points as the initial
model, epsilon 0 so that it runs every iteration; the DataFrame-based pyspark.ml KMeans
cannot take initial centers). The job is the train call (MLlib converts and caches the
vectors in the JVM inside it); the Python RDD of points is materialized before."""

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common
from session import session

from pyspark.mllib.clustering import KMeans, KMeansModel

args = common.parser(__doc__).parse_args()
spark = session("kmeans-mllib", args.workers, args.partitions)
sc = spark.sparkContext
t_ready = time.perf_counter()

points = np.load(args.input)
rdd = sc.parallelize(np.array_split(points, args.partitions), args.partitions).flatMap(list).cache()
rdd.count()

t0 = time.perf_counter()
model = KMeans.train(
    rdd,
    args.k,
    maxIterations=args.iterations,
    epsilon=0.0,
    initialModel=KMeansModel(list(points[: args.k])),
)
centers = np.array([np.asarray(c) for c in model.clusterCenters])
job_s = time.perf_counter() - t0

t1 = time.perf_counter()
ok, detail = common.reference.check_kmeans(centers, args.ref)
verify_s = time.perf_counter() - t1
spark.stop()
common.emit(
    system="spark",
    variant="MLlib",
    workload="kmeans",
    ok=ok,
    detail=detail,
    job_s=round(job_s, 3),
    verify_s=round(verify_s, 3),
    t_ready=t_ready,
)
sys.exit(0 if ok else 1)
