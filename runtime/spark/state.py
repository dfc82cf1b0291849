"""Broadcast state on the driver: built from a source's rows, then shipped as a snapshot."""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dslc.runtime import user_code
from dslc.runtime.broadcast import BroadcastState, Snapshot
from dslc.runtime.config import PythonCall

from .names import col


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
