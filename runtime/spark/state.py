"""Broadcast state on the driver: built from a source's rows, then shipped as a snapshot."""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from dslc.runtime import user_code
from dslc.runtime.broadcast.state import BroadcastState, Snapshot, thaw
from dslc.runtime.config import PythonCall
from dslc.runtime.schema.arrow import to_arrow_type

from .names import col
from .pinned import PinnedStates
from .session import worker_function


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
    """mapInArrow of a streaming MATCH: each input row once per candidate entry of the pinned
    snapshot, the entry as a struct column named after the alias (so `alias.column` in the
    predicate reads it) and, for the unqualified names of the predicate, as plain columns the
    input does not have. Without `keys` every entry is a candidate (rows x entries pairs); with
    `keys` ((input column, state column) pairs of the predicate's equalities, compiler/plan/
    match_keys.py) only the entries whose key values equal the row's, found in a dict built once
    per task; a NULL key matches nothing, as in SQL. Spark filters the pairs with the predicate.
    (A MATCH written to a stage gets the event time of every source row through
    streaming.with_ticks, so its readers' watermark does not follow only the matched rows.)"""

    def __init__(self, pinned: PinnedStates, state_name: str, fields: tuple[tuple[str, str], ...],
                 flat: tuple[str, ...], alias: str, keys: tuple[tuple[str, str], ...] = (),
                 max_rows: int = 65536):
        self.pinned, self.state_name, self.fields = pinned, state_name, fields
        self.flat, self.alias, self.keys, self.max_rows = flat, alias, keys, max_rows
        self.index: dict[tuple, list[int]] | None = None

    def _entries(self) -> pa.Table:
        snapshot = self.pinned.snapshots()[self.state_name]
        entries = list(snapshot.entries().get(self.state_name, {}).values())
        return pa.table({c: pa.array([thaw(e.get(c)) for e in entries], to_arrow_type(t)) for c, t in self.fields})

    def _output(self, rows: pa.RecordBatch, entries: pa.Table) -> pa.RecordBatch:
        columns = [entries.column(c).combine_chunks() for c, _ in self.fields]
        struct = pa.StructArray.from_arrays(columns, names=[c for c, _ in self.fields])
        flat = [entries.column(c).combine_chunks() for c in self.flat]
        names = list(rows.schema.names) + [self.alias] + list(self.flat)
        arrays = list(rows.columns) + [struct] + flat
        return pa.RecordBatch.from_arrays(arrays, names=names)

    def _scan(self, batch: pa.RecordBatch, state: pa.Table) -> Iterator[pa.RecordBatch]:
        k = state.num_rows
        step = max(1, self.max_rows // k)
        for start in range(0, batch.num_rows, step):
            part = batch.slice(start, step)
            n = part.num_rows
            yield self._output(part.take(pa.array(np.repeat(np.arange(n), k))),
                               state.take(pa.array(np.tile(np.arange(k), n))))

    def _build_index(self, state: pa.Table, types: list[pa.DataType]) -> dict[tuple, list[int]]:
        """Key values -> entry positions; the state's key columns in the input's Arrow types, so
        both sides give the same Python values (time zones, decimals)."""
        index: dict[tuple, list[int]] = {}
        columns = [state.column(s).cast(t).to_pylist() for (_, s), t in zip(self.keys, types)]
        for position, key in enumerate(zip(*columns)):
            if None not in key:
                index.setdefault(key, []).append(position)
        return index

    def _lookup(self, batch: pa.RecordBatch, state: pa.Table) -> Iterator[pa.RecordBatch]:
        by_name = {n.lower(): i for i, n in enumerate(batch.schema.names)}
        positions = [by_name[c.lower()] for c, _ in self.keys]
        if self.index is None:
            self.index = self._build_index(state, [batch.schema.field(i).type for i in positions])
        values = [batch.column(i).to_pylist() for i in positions]
        rows: list[int] = []
        entries: list[int] = []
        for row, key in enumerate(zip(*values)):
            hits = self.index.get(key) if None not in key else None
            if hits:
                rows.extend([row] * len(hits))
                entries.extend(hits)
        for start in range(0, len(rows), self.max_rows):
            yield self._output(batch.take(pa.array(rows[start:start + self.max_rows], pa.int64())),
                               state.take(pa.array(entries[start:start + self.max_rows], pa.int64())))

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        state = self._entries()
        self.index = None
        pairs = self._lookup if self.keys else self._scan
        for batch in batches:
            if state.num_rows:
                yield from pairs(batch, state)


def match_stream(df: DataFrame, *, input_name: str, pinned: PinnedStates, state_name: str, alias: str,
                 predicate: str, state_schema: str, columns: tuple[tuple[str, str], ...],
                 keys: tuple[tuple[str, str], ...] = ()) -> DataFrame:
    """MATCH inside a streaming query: the same rows as `match`, with the snapshot pinned for the
    task's micro-batch (a replay sees the same rules). Each row is paired with the entries whose
    `keys` equal its own (every entry when there are no keys), then Spark filters the pairs with
    the predicate: rows x matching entries work, rows x entries without keys."""
    state_fields = StructType.fromDDL(state_schema).fields
    fields = tuple((f.name, f.dataType.simpleString()) for f in state_fields)
    taken = {c.lower() for c in df.columns} | {alias.lower()}
    flat = tuple(f.name for f in state_fields if f.name.lower() not in taken)
    spark_out = StructType(list(df.schema.fields) + [StructField(alias, StructType(state_fields), True)]
                           + [f for f in state_fields if f.name in flat])
    expand = worker_function(df, _MatchExpand(pinned, state_name, fields, flat, alias, keys))
    joined = df.mapInArrow(expand, spark_out).alias(input_name).where(F.expr(predicate))
    selected = [col(input_name, c) for c in df.columns]
    selected += [col(alias, c).alias(out) for c, out in columns]
    return joined.select(*selected)
