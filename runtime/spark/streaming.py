"""STREAMING mode: broadcast state fed by its own query, per-micro-batch snapshots kept in the
checkpoint, sink queries, and waiting for them."""
from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from dslc.runtime import user_code
from dslc.runtime.broadcast import BroadcastState, Snapshot, SnapshotStore
from dslc.runtime.config import PythonCall

from .session import require_foreach_batch
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
    return writer.start(path) if path else writer.start()


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class StreamingState:
    """A broadcast state whose source is a streaming query; snapshots versioned in the checkpoint.

    Before a data micro-batch runs, every rule update that has arrived is applied; the snapshot it
    sees is recorded under its batch id, so a replayed batch sees the same rules, and a restarted
    job restores the state from the last applied rules batch.
    """

    def __init__(self, spark: SparkSession, name: str, checkpoint: str, *, key: str | None, op: str | None,
                 ref: str | None, folder: str):
        self.spark = spark
        self.name = name
        self.key, self.op, self.ref, self.folder = key, op, ref, folder
        self.root = Path(checkpoint) / "state" / name
        self.store = SnapshotStore(self.root / "snapshots")
        self.lock = threading.Lock()
        self.query: StreamingQuery | None = None
        self.state, self.applied_batch = self._restore()
        if not self.store.versions():
            self.store.write(self.state.snapshot())   # the empty state, for batches before any rules

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
        """Start the state's own query; with AVAILABLE NOW, finish it before any data batch."""
        require_foreach_batch(source, f"STREAMING broadcast state '{self.name}'")
        writer = source.writeStream.foreachBatch(self.apply_batch).queryName(f"dslc_state_{self.name}")
        self.query = _start(writer, self.root / "query", trigger)
        if trigger == "available-now":
            self.query.awaitTermination()
        return self.query

    def _catch_up(self) -> None:
        query = self.query
        if query is not None and query.isActive:
            query.processAllAvailable()

    def snapshot_for(self, batch_id: int) -> Snapshot:
        """The snapshot data batch `batch_id` sees: recorded on first run, reused on replay."""
        record = self.root / "batches" / f"{batch_id}.json"
        if record.is_file():
            return self.store.read(json.loads(record.read_text())["version"])
        self._catch_up()
        with self.lock:
            snapshot = self.state.snapshot()    # apply_batch stored this version already
            _atomic_write(record, json.dumps({"version": snapshot.version}))
        return snapshot


def write_stream(df: DataFrame, name: str, checkpoint: str, trigger: str | None, *, connector: str,
                 path: str | None, mode: str, partition_by: tuple[str, ...], options: dict[str, str],
                 folder: str) -> StreamingQuery:
    """A plain streaming sink (no per-batch operators upstream)."""
    if connector == "PYTHON":
        sink = PythonSink(path, folder)
        return for_each_batch(df, lambda batch, _id: batch.foreachPartition(sink), name, checkpoint, trigger)
    fmt = "console" if connector == "CONSOLE" else FORMATS[connector]
    writer = df.writeStream.format(fmt).outputMode(mode.lower()).options(**options)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    return _start(writer, Path(checkpoint) / name, trigger, path)


def for_each_batch(df: DataFrame, function: Callable[[DataFrame, int], None], name: str, checkpoint: str,
                   trigger: str | None) -> StreamingQuery:
    """A sink query whose micro-batches run `function(batch, batch_id)` on the driver."""
    require_foreach_batch(df, f"STREAMING query '{name}'")
    return _start(df.writeStream.foreachBatch(function), Path(checkpoint) / name, trigger)


def await_queries(spark: SparkSession, queries: list[StreamingQuery], trigger: str | None) -> None:
    """Wait for every query (AVAILABLE NOW) or until one stops or fails (continuous triggers)."""
    if trigger == "available-now":
        for query in queries:
            query.awaitTermination()
        return
    spark.streams.awaitAnyTermination()
    for query in queries:
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
