"""What a SOURCE needs beyond Spark's reader: its rows counted for the run's outcome, and the
sources Spark has no batch reader for.

Spark's `rate` source is streaming-only. In BATCH, RATE yields a fixed run of `numRows` rows
(default: ten seconds' worth, `rowsPerSecond` × 10) with the same columns and spacing as the
streaming source: `value` counts from 0 and `timestamp` advances by 1/rowsPerSecond seconds
from the job's start.
"""
from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from . import counting, outcome
from .session import parallelism


def counted(df: DataFrame, name: str) -> DataFrame:
    """SOURCE `name`'s frame with its rows counted as they are read (counting.py)."""
    df, count = counting.counted(df, f"source-{name}")
    outcome.source(name, count)
    return df


def rate_batch(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    """The batch counterpart of `spark.readStream.format('rate')`."""
    options = {key.lower(): value for key, value in options.items()}   # as case-insensitive as Spark's
    per_second = int(options.get("rowspersecond", "1"))
    if per_second <= 0:
        raise ValueError(f"RATE rowsPerSecond must be positive, got {per_second}")
    rows = int(options.get("numrows", str(per_second * 10)))
    partitions = int(options.get("numpartitions", str(parallelism(spark))))
    start = F.date_trunc("second", F.current_timestamp())
    return (spark.range(0, rows, 1, max(1, partitions))
            .select((start + F.make_dt_interval(secs=F.col("id") / F.lit(per_second))).alias("timestamp"),
                    F.col("id").alias("value")))
