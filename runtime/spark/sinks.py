"""SINK statements in BATCH mode, and the PYTHON sink shared with streaming; what a SINK
says when its write fails.

Every SINK counts the rows it writes (counting.py) and, when Spark cannot write them, ends the
run with one line naming the SINK, its line, its path and Spark's cause (`Mkdirs failed to
create ...`), never a Py4JJavaError: Spark's trace goes to the run's log (failure.run_main).
"""
from __future__ import annotations

import contextlib
from typing import Iterator

from pyspark.sql import DataFrame

from dslc.runtime import exit_codes, user_code
from dslc.runtime.config import PythonCall

from . import counting, outcome
from .causes import deepest, spark_cause

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


@contextlib.contextmanager
def writing(df: DataFrame, name: str, line: int, path: str | None = None) -> Iterator[DataFrame]:
    """SINK of stream `name` (at `line`, writing to `path` as the .flow file says): yields `df`
    with its rows counted for the run's outcome; a write that fails in the block ends the run
    with one line naming the SINK (exit code 1)."""
    counted, count = counting.counted(df, f"sink-{name}")
    record = outcome.sink(name, line, path, count)
    try:
        yield counted
    except Exception as exc:
        if not is_write_failure(exc):
            raise       # the rows could not be made (a source, an ENRICH): not this SINK's failure
        raise failed(name, line, path, exc) from exc
    record["written"] = True


#: the kinds of Java exception a file system raises when it cannot write
_WRITE_ERRORS = ("java.io.", "java.nio.file.", "org.apache.hadoop.fs.", "org.apache.hadoop.security.")
#: ... and the frames of a read, whose failures are the source's
_READING = ("FileScanRDD", "RecordReader", "DataSourceRDD", "ParquetFileFormat$$anonfun$buildReader")
#: what a write failure's text says when there is no Java exception to ask (Spark Connect)
_WRITE_TEXTS = ("Mkdirs failed", "ParentNotDirectoryException", "FileAlreadyExistsException", "Permission denied",
                "Read-only file system", "No space left on device", "PATH_ALREADY_EXISTS")


def is_write_failure(error: BaseException) -> bool:
    """True when `error` is the file system refusing the write (its innermost cause an I/O error
    raised while writing), not a failure to make the rows that a write action ran into."""
    inner = deepest(error)
    if inner is not None:
        try:
            kind = str(inner.getClass().getName())
            frames = [str(frame) for frame in list(inner.getStackTrace())[:60]]
            return kind.startswith(_WRITE_ERRORS) and not any(r in f for f in frames for r in _READING)
        except Exception:  # noqa: BLE001 - a Java object that cannot be asked: the text below
            pass
    text = str(error)
    return "PythonException" not in text and any(marker in text for marker in _WRITE_TEXTS)


def failed(name: str, line: int, path: str | None, error: BaseException) -> outcome.RunStop:
    """The run's stop for a SINK whose write failed with `error`."""
    where = f" to '{path}'" if path else ""
    return outcome.RunStop(f"SINK {name} (line {line}) could not write{where}: {spark_cause(error)}",
                           exit_codes.FAILED)


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
