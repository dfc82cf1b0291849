"""STREAMING mode: the queries of a job and waiting for them.

A job is one or more Structured Streaming queries (docs/streaming.md): one per BROADCAST state
(its rules, applied between micro-batches), one per stage (a chain's output computed once into an
exactly-once folder under the CHECKPOINT and read back as a stream), one per dead-letter folder,
and one per SINK. With TRIGGER AVAILABLE NOW each query that others read runs to its end before
they start, so they see everything it wrote.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery
from pyspark.sql.types import StructField, StructType

from dslc.runtime import user_code
from dslc.runtime.broadcast.state import BroadcastState, SnapshotStore
from dslc.runtime.config import PythonCall

from . import ceiling, chains, counting, lineage, metrics, outcome, sinks
from .names import col
from .pinned import caught_up, forget_caught_up, state_root
from .session import batch_function, start_query, worker_function
from .sinks import FORMATS, PythonSink


def trigger_args(trigger: str | None) -> dict:
    """`available-now` / `every=10s` → DataStreamWriter.trigger keyword arguments."""
    if not trigger:
        return {}
    if trigger == "available-now":
        return {"availableNow": True}
    match = re.fullmatch(r"every=(\d+(?:\.\d+)?)(ms|s|m|h)", trigger)
    if match:
        seconds = float(match.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[match.group(2)]
        return {"processingTime": f"{seconds:g} seconds"}
    raise ValueError(f"unknown trigger {trigger!r}: use available-now or every=10s")


def _start(writer: DataStreamWriter, checkpoint: Path, trigger: str | None, path: str | None = None) -> StreamingQuery:
    """Every query of a job: its own checkpoint folder, the job's trigger, then start."""
    writer = writer.option("checkpointLocation", str(checkpoint))
    args = trigger_args(trigger)
    if args:
        writer = writer.trigger(**args)
    query = start_query(writer, path)
    metrics.track(query)
    return query


#: The column of a stage's rows that only carry an event time (with_ticks).
TICK = "__dslc_event_time_tick"


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class StreamingState:
    """A broadcast state whose source is a streaming query; snapshots versioned in the checkpoint.

    Each rules micro-batch is applied once (by batch id) and stored as a new snapshot version;
    data micro-batches pin the version applied when they start (pinned.py), so a replayed batch
    sees the same rules, and a restarted job restores the state from the last applied version.
    """

    def __init__(self, spark: SparkSession, name: str, checkpoint: str, *, key: str | None, op: str | None,
                 ref: str | None, folder: str):
        self.spark = spark
        self.name = name
        self.key, self.op, self.ref, self.folder = key, op, ref, folder
        self.root = state_root(checkpoint, name)
        self.store = SnapshotStore(self.root / "snapshots")
        self.lock = threading.Lock()
        self.query: StreamingQuery | None = None
        self.keeper: threading.Thread | None = None
        forget_caught_up(self.root)     # a mark of an earlier run says nothing about this one
        self.state, self.applied_batch = self._restore()
        if not self.store.versions():
            self.store.write(self.state.snapshot())   # the empty state, for batches before any rules

    def __getstate__(self) -> dict:
        """What a Spark Connect server's foreachBatch worker gets (apply_batch runs there): no
        session, query or lock of this process."""
        return {k: v for k, v in self.__dict__.items() if k not in ("spark", "query", "lock", "keeper")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, spark=None, query=None, lock=threading.Lock(), keeper=None)

    def _restore(self) -> tuple[BroadcastState, int]:
        marker = self.root / "applied.json"
        if marker.is_file():
            applied = json.loads(marker.read_text())
            return BroadcastState.restore(self.store.read(applied["version"])), applied["batch_id"]
        return BroadcastState([self.name]), -1

    def apply_batch(self, batch: DataFrame, batch_id: int) -> None:
        """foreachBatch of the state's source: apply rows in order, once per batch id."""
        rows = [row.asDict(recursive=True) for row in batch.toLocalIterator()]
        with self.lock:
            if batch_id <= self.applied_batch:
                return  # a replay of a rules batch already applied and recorded
            if self.ref is None:
                self.state.apply_changelog(self.name, rows, key=self.key, op=self.op)
            else:
                with user_code.opened(user_code.resolve(PythonCall(self.ref, (self.folder,)))) as function:
                    self.state.apply_function(self.name, rows, function)
            self.store.write(self.state.snapshot())
            self.applied_batch = batch_id
            _atomic_write(self.root / "applied.json",
                          json.dumps({"batch_id": batch_id, "version": self.state.version}))

    def start(self, source: DataFrame, trigger: str | None) -> StreamingQuery:
        """Start the state's own query; with AVAILABLE NOW, finish it before any data batch.
        With a continuous trigger, the rules query runs at least every RULES_INTERVAL_S and a
        thread marks when it last had nothing left to apply (pinned.caught_up), so a data
        micro-batch pins a version with every rule update that had arrived when it started."""
        writer = source.writeStream.foreachBatch(batch_function(source, self.apply_batch))
        writer = writer.queryName(f"dslc_state_{self.name}")
        self.query = _start(writer, self.root / "query", _rules_trigger(trigger))
        if trigger == "available-now":
            self.query.awaitTermination()
        else:      # the rules already there apply before the first data micro-batch
            caught_up(self.root, time.time(), self.query.processAllAvailable)
            self.keeper = threading.Thread(target=self._keep_up, name=f"dslc-state-{self.name}", daemon=True)
            self.keeper.start()
        return self.query

    def _keep_up(self) -> None:
        """Driver thread: again and again, wait until the rules query has applied everything that
        had arrived, then record that moment; ends with the query (a failure is await_queries')."""
        while self.query is not None and self.query.isActive:
            try:
                caught_up(self.root, time.time(), self.query.processAllAvailable)
            except Exception:  # noqa: BLE001 - the query failed or stopped: await_queries reports it
                return


#: The longest a rules query waits between two looks at its source under a continuous trigger.
RULES_INTERVAL_S = 0.25


def _rules_trigger(trigger: str | None) -> str | None:
    """A rules query looks for updates at least every RULES_INTERVAL_S (a data micro-batch waits
    for it to catch up, pinned.py); AVAILABLE NOW and the default trigger are kept."""
    args = trigger_args(trigger)
    if "processingTime" not in args:
        return trigger
    seconds = float(args["processingTime"].split()[0])
    return trigger if seconds <= RULES_INTERVAL_S else f"every={RULES_INTERVAL_S:g}s"


def _finished_first(query: StreamingQuery, trigger: str | None) -> StreamingQuery:
    """With AVAILABLE NOW, a query that other queries read ends before they start."""
    if trigger == "available-now":
        query.awaitTermination()
    return query


def stage_folder(checkpoint: str, stage: str) -> Path:
    """The exactly-once folder of a stage (data files and Spark's _spark_metadata log)."""
    return Path(checkpoint) / "stages" / stage / "data"


def write_stage(df: DataFrame, stage: str, checkpoint: str, trigger: str | None) -> StreamingQuery:
    """The query that computes a shared chain once: Spark's streaming file sink (parquet) into the
    stage folder; only files committed in its _spark_metadata log are visible to readers."""
    writer = df.writeStream.format("parquet").outputMode("append").queryName(f"dslc_{stage}")
    query = _start(writer, Path(checkpoint) / "stages" / stage / "query", trigger, str(stage_folder(checkpoint, stage)))
    return _finished_first(query, trigger)


def _latest(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow over one event-time column: each batch's latest value (none when all NULL)."""
    for batch in batches:
        latest = pc.max(batch.column(0))
        if latest.is_valid:
            yield pa.RecordBatch.from_arrays([pa.array([latest.as_py()], batch.schema.field(0).type)],
                                             names=batch.schema.names)


def with_ticks(df: DataFrame, clock: DataFrame, column: str) -> DataFrame:
    """`df`'s rows (TICK false) and, per Arrow batch of `clock`, one TICK row: every column NULL
    but the batch's latest event time. `clock` is the query's watermarked root (its SOURCE, or
    the stage it reads), taken before any filter or call: the stage's readers declare the
    WATERMARK on these rows too, so it follows every row the source read, not only the rows
    that reached the stage (a pushed-down WHERE, dslc test's end-of-input rows). When the
    column was pruned away before the stage (no reader after it needs event time), the stage
    has no watermark to carry (read_stage declares none) and its rows go as they are."""
    name = next((f.name for f in df.schema.fields if f.name.lower() == column.lower()), None)
    if name is None:
        return df
    root = next(f.name for f in clock.schema.fields if f.name.lower() == column.lower())
    field = StructField(name, df.schema[name].dataType, True)
    times = clock.select(col(root).alias(name))
    latest = times.mapInArrow(worker_function(times, _latest), StructType([field]))
    ticks = latest.select(*[col(name) if f.name == name else F.lit(None).cast(f.dataType).alias(f.name)
                            for f in df.schema.fields], F.lit(True).alias(TICK))
    return df.withColumn(TICK, F.lit(False)).unionByName(ticks)


def read_stage(spark: SparkSession, stage: str, checkpoint: str, schema,
               watermark: tuple[str, str] | None = None) -> DataFrame:
    """A stage folder as a stream (Spark's file source lists only committed files), with the
    event-time WATERMARK of its rows declared again, TICK rows (with_ticks) included: they move
    the watermark as every row of the source did. `without_ticks` then leaves the data rows;
    the frame with its ticks is the clock of a later stage of the same query."""
    folder = stage_folder(checkpoint, stage)
    folder.mkdir(parents=True, exist_ok=True)
    df = spark.readStream.schema(schema).parquet(str(folder))
    # the column may have been pruned away before the stage (no reader after it needs it)
    if watermark and watermark[0] in schema.fieldNames():
        df = df.withWatermark(*watermark)
    return df


def without_ticks(df: DataFrame, column: str | None = None) -> DataFrame:
    """A stage read's data rows. A TICK row always has its event time; naming the column keeps
    Spark from pushing the filter below the watermark (it pushes only conditions that do not
    read the event-time column)."""
    if TICK not in df.columns:
        return df
    keep = ~F.col(TICK) | col(column).isNull() if column else ~F.col(TICK)
    return df.where(keep).drop(TICK)


def write_dead_letters(df: DataFrame, operators: tuple[str, ...], path: str, name: str, checkpoint: str,
                       trigger: str | None) -> StreamingQuery:
    """The dead letters of `operators` as JSON lines, through Spark's streaming text sink (exactly
    once: a replayed micro-batch does not add them again)."""
    outcome.dead_letters(path, operators)
    letters = chains.dead_letters_of(df, operators[0])
    for operator in operators[1:]:
        letters = letters.unionByName(chains.dead_letters_of(df, operator))
    writer = letters.writeStream.format("text").outputMode("append").queryName(f"dslc_{name}")
    return _start(writer, Path(checkpoint) / name, trigger, path)


def write_quarantine(lines: DataFrame, folder: str, name: str, checkpoint: str, trigger: str | None) -> StreamingQuery:
    """One quarantine folder of an EXPECT (`lines`: expectations.quarantine_of / quarantine_letters)
    through Spark's streaming text sink, in a query of its own: exactly once, as dead letters."""
    writer = lines.writeStream.format("text").outputMode("append").queryName(f"dslc_{name}")
    return _start(writer, Path(checkpoint) / name, trigger, folder)


def write_stream(df: DataFrame, name: str, checkpoint: str, trigger: str | None, *, connector: str,
                 path: str | None, mode: str, partition_by: tuple[str, ...], options: dict[str, str],
                 folder: str, stream: str | None = None, line: int = 0) -> StreamingQuery:
    """A SINK's query: Spark's streaming sinks (the file sink keeps the user's folder layout and
    commits each micro-batch in its _spark_metadata log); COMPLETE into files replaces the folder
    atomically; PYTHON calls the user's function per partition. The SINK of `stream` (at `line`)
    counts its rows, and a query that cannot start or fails names it (sinks.failed)."""
    label = stream or name
    written = outcome.shown(path) if connector != "PYTHON" else None     # as the .flow file writes it
    df, count = counting.counted(df, f"sink-{label}")
    try:
        query = _sink_query(df, name, checkpoint, trigger, connector=connector, path=path, mode=mode,
                            partition_by=partition_by, options=options, folder=folder)
    except Exception as exc:
        if not sinks.is_write_failure(exc):
            raise
        raise sinks.failed(label, line, written, exc) from exc
    outcome.sink(label, line, written, count, query)
    return query


def _sink_query(df: DataFrame, name: str, checkpoint: str, trigger: str | None, *, connector: str,
                path: str | None, mode: str, partition_by: tuple[str, ...], options: dict[str, str],
                folder: str) -> StreamingQuery:
    if connector == "PYTHON":
        sink = worker_function(df, PythonSink(path, folder))
        return for_each_batch(df, lambda batch, _id: batch.foreachPartition(sink), name, checkpoint, trigger)
    if mode == "COMPLETE" and connector in ("PARQUET", "JSON", "CSV"):
        replace = CompleteFolder(path, FORMATS[connector], partition_by, options)
        writer = df.writeStream.outputMode("complete").foreachBatch(batch_function(df, replace))
        return _start(writer, Path(checkpoint) / name, trigger)
    fmt = "console" if connector == "CONSOLE" else FORMATS[connector]
    writer = df.writeStream.format(fmt).outputMode(mode.lower()).options(**options)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    return _start(writer, Path(checkpoint) / name, trigger, path)


def for_each_batch(df: DataFrame, function: Callable[[DataFrame, int], None], name: str, checkpoint: str,
                   trigger: str | None) -> StreamingQuery:
    """A sink query whose micro-batches run `function(batch, batch_id)` on the driver."""
    return _start(df.writeStream.foreachBatch(batch_function(df, function)), Path(checkpoint) / name, trigger)


class CompleteFolder:
    """SINK ... MODE COMPLETE into files: each micro-batch holds the whole current result; it is
    written to a new version folder beside the sink path, then the sink path (a symbolic link)
    is switched to it with one atomic rename, so a reader sees the previous result or the new
    one, never half of one. A replayed micro-batch rewrites its own version. Local file systems."""

    def __init__(self, path: str, fmt: str, partition_by: tuple[str, ...], options: dict[str, str]):
        self.path, self.fmt, self.partition_by, self.options = Path(path), fmt, partition_by, options

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        versions = self.path.parent / f".{self.path.name}.versions"
        if self.path.exists() and not self.path.is_symlink():
            raise RuntimeError(f"SINK MODE COMPLETE: {self.path} is a folder dslc did not write; move it away")
        writer = batch.write.format(self.fmt).mode("overwrite").options(**self.options)
        if self.partition_by:
            writer = writer.partitionBy(*self.partition_by)
        writer.save(str(versions / f"batch_{batch_id}"))
        link = self.path.parent / f".{self.path.name}.link"
        if link.is_symlink():
            link.unlink()
        link.symlink_to(Path(versions.name) / f"batch_{batch_id}")
        os.replace(link, self.path)
        for old in versions.glob("batch_*"):       # keep the previous one for readers still on it
            if int(old.name[len("batch_"):]) < batch_id - 1:
                shutil.rmtree(old, ignore_errors=True)


#: How long await_queries waits on one query before it looks at the next.
AWAIT_STEP_S = 0.5


def await_queries(queries: list[StreamingQuery], trigger: str | None) -> None:
    """Wait for every query (AVAILABLE NOW) or until one stops or fails (continuous triggers);
    under a continuous trigger, stop them all once an operator's dead letters are over their
    ceiling (ceiling.py: the run ends with exit code 5 at that micro-batch).

    Only this job's queries are awaited: the session's awaitAnyTermination also ends on any other
    query of the session, and raises at once the failure of a query an earlier job of the same
    session left behind (dslc repl, dslc test, a user's pytest session; seen as a second job
    failing with the first one's StreamingQueryException)."""
    if trigger == "available-now":
        for query in queries:
            _ended(query)
        lineage.caught_up(queries)      # progress the listener had not been told of yet
        return
    while not any(_ended(query, AWAIT_STEP_S) for query in queries):
        try:
            ceiling.check_now()
        except outcome.RunStop:     # dead letters over their ceiling: no further micro-batch
            for query in queries:
                query.stop()
            raise
    for query in queries:
        if query.exception() is not None:
            raise _failure(query, query.exception())


def _ended(query: StreamingQuery, timeout: float | None = None) -> bool:
    """awaitTermination: True once the query stopped (at once without `timeout`); a failed query
    raises, named by its SINK when it writes one."""
    try:
        return query.awaitTermination(timeout) if timeout is not None else (query.awaitTermination() or True)
    except Exception as exc:
        if outcome.sink_of(query) is None or not sinks.is_write_failure(exc):
            raise
        raise _failure(query, exc) from exc


def _failure(query: StreamingQuery, error: BaseException) -> BaseException:
    """A query's failure: named by its SINK when it writes one."""
    written = outcome.sink_of(query)
    if written is None or not sinks.is_write_failure(error):
        return RuntimeError(str(error))
    return sinks.failed(written["name"], written["line"], written["path"], error)
