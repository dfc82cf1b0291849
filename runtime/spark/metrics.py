"""Runtime metrics from executors to the driver, through a Spark accumulator."""
from __future__ import annotations

import json
import os
import sys
from typing import Any

from pyspark import AccumulatorParam
from pyspark.sql import SparkSession

from dslc.runtime.metrics import format_summary, merge, summary


class _MetricsParam(AccumulatorParam):
    """Accumulates {operator: metrics} dicts by adding them up."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, a: dict, b: dict) -> dict:
        for name, item in b.items():
            a[name] = merge(a[name], item) if name in a else merge({}, item)
        return a


class MetricsCollector:
    """One accumulator for every chain of the job; `report()` prints the per-operator summary."""

    def __init__(self, spark: SparkSession):
        self._acc = spark.sparkContext.accumulator({}, _MetricsParam())

    def sink(self):
        """A picklable callable for the chain function to report a task's metrics with."""
        acc = self._acc
        return lambda metrics: acc.add({name: m for name, m in metrics.items()})

    def value(self) -> dict[str, dict[str, Any]]:
        """Merged metrics per operator (driver only)."""
        return dict(self._acc.value)

    def report(self, stream=None) -> None:
        """JSON to $DSLC_METRICS_FILE when set (`dslc run` reads it and prints a table), else human lines on stderr."""
        merged = self.value()
        if not merged:
            return   # a job without Python operators has nothing to report
        target = os.environ.get("DSLC_METRICS_FILE")
        if target:
            with open(target, "w", encoding="utf-8") as handle:
                json.dump({n: summary(m) for n, m in merged.items()}, handle, sort_keys=True)
            return
        stream = stream or sys.stderr
        print("dslc: operator metrics", file=stream)
        for name in sorted(merged):
            print("  " + format_summary({**merged[name], "operator": name}), file=stream)
