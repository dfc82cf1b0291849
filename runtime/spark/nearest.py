"""NEAREST BY on Spark: the right side read once and indexed on the driver, the left side probed
per partition by mapInArrow (runtime/vectors/ does the work; this module moves it).

`index_side` is an action: it reads the right side (a SOURCE read once, in STREAMING too, or any
bounded relation in BATCH), builds the index and says what it built (explain --physical and the
metrics file show it). The index reaches the executors as a broadcast variable (classic
sessions; each worker process unpickles it once) or inside the task's function (Spark Connect).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.types import StructField, StructType

from dslc.runtime.vectors.arrays import vectors
from dslc.runtime.vectors.index import IndexInfo, VectorIndex
from dslc.runtime.vectors.probe import ProbeSpec, probe_batches
from dslc.runtime.vectors.spark_math import FUNCTIONS

from .session import is_connect, worker_function


@dataclass
class IndexedSide:
    """The right side as the probes need it: its rows (Arrow), their index, their Spark schema."""

    index: VectorIndex
    rows: pa.Table
    schema: StructType

    @property
    def info(self) -> IndexInfo:
        return self.index.info


def index_side(df: DataFrame, *, operator: str, line: int, column: str, function: str, similarity: bool,
               approx: bool) -> IndexedSide:
    """Driver, an action: read `df` (the right side) once and index its `column`."""
    side = build_side(df.toArrow(), df.schema, column=column, function=function, similarity=similarity,
                      approx=approx)
    say_built(side.info, operator=operator, line=line)
    return side


def build_side(rows: pa.Table, schema: StructType, *, column: str, function: str, similarity: bool,
               approx: bool) -> IndexedSide:
    """The index of `rows`' `column` (the right side's rows in Arrow, `schema` as Spark types them)."""
    matrix, complete, lengths = vectors(rows.column(column))
    present = frozenset(int(n) for n in np.unique(lengths[lengths >= 0]))
    index = VectorIndex(matrix, complete, present, metric=FUNCTIONS[function], similarity=similarity,
                        approx=approx, function=function)
    return IndexedSide(index, rows, schema)


def say_built(info: IndexInfo, *, operator: str, line: int, version: int | None = None) -> None:
    """One line on stderr: what was built, how big, how fast (a BROADCAST's version too)."""
    of = "" if version is None else f" (state version {version})"
    print(f"dslc: {operator} (line {line}): NEAREST BY index{of} of {info.rows} rows ({info.indexed} vectors of "
          f"{info.dim} dimensions): {info.kind}, {info.bytes / 1e6:.1f} MB, built in {info.build_seconds:.2f}s",
          file=sys.stderr)


def output_schema(df: DataFrame, right: StructType, alias: str) -> tuple[StructType, tuple[str, ...]]:
    """The probe's output columns (the left's, the right row as a struct named `alias`, the right
    columns the left lacks, flat) and the names of those flat columns."""
    taken = {name.lower() for name in df.columns} | {alias.lower()}
    flat = tuple(f.name for f in right.fields if f.name.lower() not in taken)
    schema = StructType(list(df.schema.fields) + [StructField(alias, right, True)]
                        + [f for f in right.fields if f.name in flat])
    return schema, flat


def probe(df: DataFrame, side: IndexedSide, *, operator: str, line: int, vector: str, k: int, outer: bool,
          alias: str, metrics: Any = None) -> DataFrame:
    """Each row of `df` (the left side) with its k best right rows: its columns, the right row as a
    struct named `alias`, and the right columns `df` does not have under their own names."""
    schema, flat = output_schema(df, side.schema, alias)
    spec = ProbeSpec(operator=operator, line=line, vector=vector, k=k, outer=outer, alias=alias, flat=flat)
    spark = df.sparkSession
    shipped = side if is_connect(spark) else spark.sparkContext.broadcast(side)
    sink = metrics.sink() if metrics is not None and not getattr(metrics, "on_connect", True) else None
    if sink is not None:        # once, from the driver: what the probes searched
        sink({operator: {"index_rows": side.info.indexed, "index_bytes": side.info.bytes,
                         "index_build_seconds": round(side.info.build_seconds, 6)}})
    return df.mapInArrow(worker_function(df, _Probe(spec, shipped, sink)), schema)


class _Probe:
    """The mapInArrow function: one partition of left rows through the probe."""

    def __init__(self, spec: ProbeSpec, shipped, sink):
        self.spec, self.shipped, self.sink = spec, shipped, sink

    def __call__(self, batches):
        side = self.shipped if isinstance(self.shipped, IndexedSide) else self.shipped.value
        try:
            yield from probe_batches(self.spec, side.index, side.rows, batches, self.sink)
        except ValueError as exc:
            raise RuntimeError(f"operator '{self.spec.operator}' (line {self.spec.line}) NEAREST BY: {exc}") from exc
