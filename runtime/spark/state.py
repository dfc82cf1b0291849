"""Broadcast state on the driver: built from a source's rows, then shipped as a snapshot."""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from dslc.runtime import user_code
from dslc.runtime.arrow_types import to_arrow_type
from dslc.runtime.broadcast import BroadcastState, Snapshot, thaw
from dslc.runtime.config import PythonCall

from .names import col
from .pinned import PinnedStates


def _rows(df: DataFrame):
    """The source's rows in order: by file name, then by position in the file, as dicts.

    Spark packs files into partitions by size, so partition order alone is not file order.
    """
    ordered = (df.withColumn("__dslc_file", F.input_file_name())
               .withColumn("__dslc_pos", F.monotonically_increasing_id())
               .orderBy("__dslc_file", "__dslc_pos")
               .drop("__dslc_file", "__dslc_pos"))
    return (row.asDict(recursive=True) for row in ordered.toLocalIterator())


def changelog_state(name: str, df: DataFrame, *, key: str, op: str | None) -> Snapshot:
    """Apply every row in order: OP 'delete' removes KEY, anything else upserts."""
    state = BroadcastState([name])
    state.apply_changelog(name, _rows(df), key=key, op=op)
    return state.snapshot()


def function_state(name: str, df: DataFrame, *, ref: str, folder: str) -> Snapshot:
    """BROADCAST ... USING PYTHON: the user function applies each row to the read-write view."""
    state = BroadcastState([name])
    with user_code.opened(user_code.resolve(PythonCall(ref, (folder,)))) as function:
        state.apply_function(name, _rows(df), function)
    return state.snapshot()


def match(spark: SparkSession, df: DataFrame, *, input_name: str, state: Snapshot, state_name: str,
          alias: str, predicate: str, state_schema: str, columns: tuple[tuple[str, str], ...]) -> DataFrame:
    """MATCH: one row per (input row, matching state entry), as a broadcast join."""
    entries = list(state.entries().get(state_name, {}).values())
    names = [c for c, _ in columns]
    rows = [tuple(e.get(c) for c in names) for e in entries]
    state_df = spark.createDataFrame(rows, schema=state_schema)
    joined = df.alias(input_name).join(F.broadcast(state_df.alias(alias)), F.expr(predicate), "inner")
    selected = [col(input_name, c) for c in df.columns]
    selected += [col(alias, c).alias(out) for c, out in columns]
    return joined.select(*selected)


class _MatchExpand:
    """mapInArrow of a streaming MATCH: each input row once per entry of the pinned snapshot, the
    entry as a struct column named after the alias (so `alias.column` in the predicate reads it)
    and, for the unqualified names of the predicate, as plain columns the input does not have."""

    def __init__(self, pinned: PinnedStates, state_name: str, fields: tuple[tuple[str, str], ...],
                 flat: tuple[str, ...], alias: str, max_rows: int = 65536):
        self.pinned, self.state_name, self.fields = pinned, state_name, fields
        self.flat, self.alias, self.max_rows = flat, alias, max_rows

    def _entries(self) -> pa.Table:
        snapshot = self.pinned.snapshots()[self.state_name]
        entries = list(snapshot.entries().get(self.state_name, {}).values())
        return pa.table({c: pa.array([thaw(e.get(c)) for e in entries], to_arrow_type(t)) for c, t in self.fields})

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        state = self._entries()
        k = state.num_rows
        if k == 0:
            return
        step = max(1, self.max_rows // k)
        for batch in batches:
            for start in range(0, batch.num_rows, step):
                part = batch.slice(start, step)
                n = part.num_rows
                left = part.take(pa.array(np.repeat(np.arange(n), k)))
                right = state.take(pa.array(np.tile(np.arange(k), n)))
                columns = [right.column(c).combine_chunks() for c, _ in self.fields]
                struct = pa.StructArray.from_arrays(columns, names=[c for c, _ in self.fields])
                flat = [right.column(c).combine_chunks() for c in self.flat]
                names = list(left.schema.names) + [self.alias] + list(self.flat)
                yield pa.RecordBatch.from_arrays(list(left.columns) + [struct] + flat, names=names)


def match_stream(df: DataFrame, *, input_name: str, pinned: PinnedStates, state_name: str, alias: str,
                 predicate: str, state_schema: str, columns: tuple[tuple[str, str], ...]) -> DataFrame:
    """MATCH inside a streaming query: the same rows as `match`, with the snapshot pinned for the
    task's micro-batch (a replay sees the same rules). Each row is paired with every entry, then
    Spark filters the pairs with the predicate, so the cost grows with rows x entries."""
    state_fields = StructType.fromDDL(state_schema).fields
    fields = tuple((f.name, f.dataType.simpleString()) for f in state_fields)
    taken = {c.lower() for c in df.columns} | {alias.lower()}
    flat = tuple(f.name for f in state_fields if f.name.lower() not in taken)
    spark_out = StructType(list(df.schema.fields) + [StructField(alias, StructType(state_fields), True)]
                           + [f for f in state_fields if f.name in flat])
    expanded = df.mapInArrow(_MatchExpand(pinned, state_name, fields, flat, alias), spark_out)
    joined = expanded.alias(input_name).where(F.expr(predicate))
    selected = [col(input_name, c) for c in df.columns]
    selected += [col(alias, c).alias(out) for c, out in columns]
    return joined.select(*selected)
