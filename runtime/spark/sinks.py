"""SINK statements in BATCH mode, and the PYTHON sink shared with streaming."""
from __future__ import annotations

from typing import Iterator

from pyspark.sql import DataFrame

from dslc.runtime import user_code
from dslc.runtime.config import PythonCall

#: SINK connector → Spark data source format (batch and streaming writers).
FORMATS = {"PARQUET": "parquet", "JSON": "json", "CSV": "csv", "KAFKA": "kafka"}


class PythonSink:
    """SINK ... TO PYTHON 'module:function': function(rows) once per partition, rows as dicts; a
    class is opened before and closed after each partition (after a failure too)."""

    def __init__(self, ref: str, folder: str):
        self.call = PythonCall(ref, (folder,))

    def __call__(self, rows: Iterator) -> None:
        with user_code.opened(user_code.resolve(self.call)) as function:
            function(row.asDict(recursive=True) for row in rows)


def write_batch(df: DataFrame, *, connector: str, path: str | None, mode: str, partition_by: tuple[str, ...],
                options: dict[str, str], folder: str) -> None:
    """Write a DataFrame once, as the SINK statement says."""
    if connector == "CONSOLE":
        df.show(n=int(options.get("numRows", 20)), truncate=options.get("truncate", "false") != "false")
        return
    if connector == "PYTHON":
        df.foreachPartition(PythonSink(path, folder))
        return
    writer = df.write.format(FORMATS[connector]).mode(mode.lower()).options(**options)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.save(path) if path else writer.save()
