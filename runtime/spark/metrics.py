"""Runtime metrics from executors to the driver, through a Spark accumulator."""
from __future__ import annotations

import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import Any

from pyspark import AccumulatorParam
from pyspark.sql import SparkSession

from dslc.runtime.metrics import all_failed_warnings, format_table, merge, summary


class _MetricsParam(AccumulatorParam):
    """Accumulates {operator: metrics} dicts by adding them up."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, a: dict, b: dict) -> dict:
        for name, item in b.items():
            a[name] = merge(a[name], item) if name in a else merge({}, item)
        return a


class MetricsCollector:
    """One accumulator for every chain of the job; `report()` writes the run's metrics file and
    prints the per-operator table."""

    def __init__(self, spark: SparkSession):
        self._spark = spark
        self._acc = spark.sparkContext.accumulator({}, _MetricsParam())

    def sink(self):
        """A picklable callable for the chain function to report a task's metrics with."""
        acc = self._acc
        return lambda metrics: acc.add({name: m for name, m in metrics.items()})

    def value(self) -> dict[str, dict[str, Any]]:
        """Merged metrics per operator (driver only)."""
        return dict(self._acc.value)

    def report(self, stream=None) -> str | None:
        """Write the run's JSON metrics file, print the table (stderr, or $DSLC_METRICS_SUMMARY), a
        warning per operator whose every element failed, and the file's path; return the path."""
        return publish(self._spark, self.value(), stream)


def publish(spark: SparkSession, merged: dict[str, dict[str, Any]], stream=None) -> str | None:
    """What an operator of the job sees at its end, the same under `dslc run` and spark-submit."""
    if not merged:
        return None   # a job without Python operators has nothing to report
    stream = stream or sys.stderr
    operators = {name: summary(m) for name, m in sorted(merged.items())}
    warnings = all_failed_warnings(operators)
    pipeline = spark.conf.get("spark.app.name", "dslc")
    finished = dt.datetime.now(dt.timezone.utc)
    document = {"pipeline": pipeline, "application_id": _conf(spark, "spark.app.id"),
                "finished_at": finished.isoformat(timespec="seconds"), "operators": operators,
                "warnings": warnings}
    path = metrics_path(spark, pipeline, finished)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    table = format_table(operators)
    summary_file = os.environ.get("DSLC_METRICS_SUMMARY") or _conf(spark, "spark.dslc.metrics.summary")
    if summary_file:
        with open(summary_file, "a", encoding="utf-8") as handle:
            handle.write(table + "\n")
    else:
        print(table, file=stream)
    for warning in warnings:
        print(f"dslc: warning: {warning}", file=stream)
    print(f"dslc: metrics written to {path}", file=stream)
    stream.flush()
    return str(path)


def metrics_path(spark: SparkSession, pipeline: str, when: dt.datetime) -> Path:
    """$DSLC_METRICS_FILE, else <dir>/<pipeline>-<UTC time>.json where dir is $DSLC_METRICS_DIR,
    `spark.dslc.metrics.dir`, or target/metrics beside the .flow file (a path on the driver)."""
    exact = os.environ.get("DSLC_METRICS_FILE")
    if exact:
        return Path(exact)
    folder = (os.environ.get("DSLC_METRICS_DIR") or _conf(spark, "spark.dslc.metrics.dir")
              or str(Path(_conf(spark, "spark.dslc.flow.folder") or ".") / "target" / "metrics"))
    stem = f"{pipeline}-{when.strftime('%Y%m%dT%H%M%SZ')}"
    path, n = Path(folder) / f"{stem}.json", 1
    while path.exists():     # two runs within one second
        n += 1
        path = Path(folder) / f"{stem}-{n}.json"
    return path


def _conf(spark: SparkSession, key: str) -> str | None:
    try:
        return spark.conf.get(key, None) or None
    except Exception:   # a key Spark Connect's server refuses to read
        return None
