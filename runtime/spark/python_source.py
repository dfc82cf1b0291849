"""SOURCE ... FROM PYTHON 'module:Class' on Spark's Python data source API (format `dslc_python`).

One Spark partition per split. In STREAMING the offset is the list of splits handed out so far
(kept in the checkpoint by Spark), so each split is read exactly once across restarts. The user
class is created from the SOURCE OPTIONS (keys lower-cased, as Spark passes them); the `dslc.*`
options carry what the generated job knows: the class, the folder to import it from, and the
source's name and DSL line for error messages.
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

from dslc.runtime import run_env
from dslc.runtime.config import PythonCall
from dslc.runtime.sources import python as core

from .session import is_connect

FORMAT = "dslc_python"


def register(spark: SparkSession, streaming: bool = False) -> None:
    """Make `format('dslc_python')` known to this session (idempotent).

    A streaming query on Spark Connect runs the source's Python in workers that do not get the
    session's artifacts, and Spark unpickles the source class there before any code of dslc could
    put the shipped runtime on their path: refused with a way out unless dslc is installed there."""
    if streaming and is_connect(spark) and run_env.SHIP_RUNTIME.get() == "1":
        raise SystemExit(
            "dslc: error: SOURCE ... FROM PYTHON in a STREAMING pipeline cannot run through Spark Connect: the "
            "server's Python workers of a streaming query do not receive the shipped dslc runtime, and Spark "
            "loads the source class there before dslc could provide it.\n"
            "  hint: run it in BATCH, or with spark-submit (dslc run FILE --master URL), or install dslc into "
            "the Spark Connect server's Python and set DSLC_SHIP_RUNTIME=0")
    spark.dataSource.register(PythonSource)


class PythonSource(DataSource):
    """Spark's side of a dslc PYTHON source: it only builds readers; the user class does the work."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return self.options["dslc.schema"]

    def reader(self, schema: StructType) -> DataSourceReader:
        return _BatchReader(_Binding.of(self.options, schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _StreamReader(_Binding.of(self.options, schema))


class _Binding:
    """What a reader needs, picklable: the user class reference, its options and the columns."""

    def __init__(self, call: PythonCall, options: dict[str, str], columns: tuple[str, ...], label: str):
        self.call = call
        self.options = options
        self.columns = columns
        self.label = label

    @classmethod
    def of(cls, options: Mapping[str, str], schema: StructType) -> _Binding:
        options = dict(options)
        folder = options.get("dslc.folder")
        call = PythonCall(options["dslc.ref"], (folder,) if folder else ())
        label = f"SOURCE {options.get('dslc.name', '?')} (line {options.get('dslc.line', '?')}) FROM PYTHON {call.ref!r}"
        user_options = {k: v for k, v in options.items() if not k.startswith("dslc.")}
        return cls(call, user_options, tuple(schema.fieldNames()), label)

    def source(self) -> Any:
        try:
            return core.load_source(self.call, self.options)
        except Exception as exc:
            raise core.SourceError(f"{self.label}: cannot create the source: {exc}") from exc

    def list_splits(self, known: list[Any] | None = None) -> list[Any]:
        """Every split (BATCH) or the new ones after `known` (STREAMING), with the source named on failure."""
        source = self.source()
        try:
            return core.list_splits(source) if known is None else core.discover_splits(source, known)
        except Exception as exc:
            raise core.SourceError(f"{self.label}: listing splits failed: {exc}") from exc

    def rows(self, encoded_split: str) -> Iterator[tuple]:
        """The rows of one split as tuples in schema order; missing keys are null, extra keys ignored."""
        split = core.decode_split(encoded_split)
        source = self.source()
        columns = self.columns
        try:
            for row in core.read_split(source, split):
                yield tuple(row.get(name) for name in columns)
        except Exception as exc:
            raise core.SourceError(f"{self.label}: reading split {encoded_split} failed: {exc}") from exc
        finally:
            close = getattr(source, "close", None)
            if callable(close):
                close()


def _partitions(splits: list[Any]) -> list[InputPartition]:
    return [InputPartition(core.encode_split(split)) for split in splits]


class _BatchReader(DataSourceReader):
    def __init__(self, binding: _Binding):
        self.binding = binding

    def partitions(self) -> list[InputPartition]:
        return _partitions(self.binding.list_splits())

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        return self.binding.rows(partition.value)


class _StreamReader(DataSourceStreamReader):
    """Offsets are {"splits": "<canonical JSON list>"}: every split handed out so far, in order."""

    def __init__(self, binding: _Binding):
        self.binding = binding
        self._latest = core.SplitTracker()   # for Spark versions that call latestOffset() without start

    def initialOffset(self) -> dict:
        return _offset(core.SplitTracker())

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        tracker = _tracker(start) if start is not None else self._latest
        tracker = tracker.copy()
        tracker.assign(self.binding.list_splits(tracker.splits))
        self._latest = tracker
        return _offset(tracker)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return _partitions(core.splits_between(_tracker(start).to_offset(), _tracker(end).to_offset()))

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        return self.binding.rows(partition.value)

    def commit(self, end: dict) -> None:
        """Nothing to release: splits are immutable once handed out."""


def _offset(tracker: core.SplitTracker) -> dict:
    return {"splits": json.dumps(tracker.splits, sort_keys=True, separators=(",", ":"))}


def _tracker(offset: Mapping[str, Any]) -> core.SplitTracker:
    return core.SplitTracker(json.loads(offset.get("splits", "[]")))
