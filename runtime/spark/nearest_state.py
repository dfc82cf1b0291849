"""NEAREST BY against BROADCAST state: the state's entries (in key order, as its snapshot holds
them) are the right rows, indexed once per version of the state.

BATCH: the state is built on the driver before the query (state.py), so its one version is
indexed there and probed as a SOURCE is (nearest.py). STREAMING: each data micro-batch pins the
version applied when it starts (pinned.py, as MATCH does); a worker process builds that version's
index the first time one of its tasks meets it and keeps it while the version is current, so an
update of the BROADCAST is indexed once per worker and probed from the next micro-batch on, and a
replayed micro-batch probes the version it saw. Both modes turn a snapshot into the same Arrow
rows (`state_rows`), so they rank the same rows in the same order.
"""
from __future__ import annotations

import threading
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from dslc.runtime.broadcast.state import Snapshot, thaw
from dslc.runtime.schema.arrow import to_arrow_type
from dslc.runtime.vectors.probe import ProbeSpec, probe_batches

from .nearest import IndexedSide, build_side, output_schema, say_built
from .pinned import PinnedStates
from .session import worker_function


def state_rows(snapshot: Snapshot, state_name: str, schema: StructType) -> pa.Table:
    """The entries of one map of `snapshot`, in key order, as Arrow columns typed as Spark's."""
    entries = list(snapshot.entries().get(state_name, {}).values())
    return pa.table({f.name: pa.array([thaw(e.get(f.name)) for e in entries], to_arrow_type(f.dataType.simpleString()))
                     for f in schema.fields})


def state_side(snapshot: Snapshot, *, state_name: str, schema: str, operator: str, line: int, column: str,
               function: str, similarity: bool, approx: bool) -> IndexedSide:
    """BATCH, driver: the state's one version, indexed."""
    spark_schema = StructType.fromDDL(schema)
    side = build_side(state_rows(snapshot, state_name, spark_schema), spark_schema, column=column,
                      function=function, similarity=similarity, approx=approx)
    say_built(side.info, operator=operator, line=line, version=snapshot.version)
    return side


def probe_state(df: DataFrame, pinned: PinnedStates, *, state_name: str, schema: str, operator: str, line: int,
                column: str, function: str, similarity: bool, approx: bool, vector: str, k: int, outer: bool,
                alias: str, metrics: Any = None) -> DataFrame:
    """STREAMING: each row of `df` with its k best entries of the version its micro-batch pinned."""
    spark_schema = StructType.fromDDL(schema)
    out, flat = output_schema(df, spark_schema, alias)
    spec = ProbeSpec(operator=operator, line=line, vector=vector, k=k, outer=outer, alias=alias, flat=flat)
    build = dict(column=column, function=function, similarity=similarity, approx=approx)
    sink = metrics.sink() if metrics is not None and not getattr(metrics, "on_connect", True) else None
    return df.mapInArrow(worker_function(df, _StateProbe(spec, pinned, state_name, spark_schema, build, sink)), out)


_lock = threading.Lock()
_indexes: dict[tuple, tuple[int, IndexedSide]] = {}    # (checkpoint, state, build) -> (version, side)


class _StateProbe:
    """The mapInArrow function: one partition probed against its micro-batch's version (`schema`
    parsed on the driver: the workers have no session to parse DDL with)."""

    def __init__(self, spec: ProbeSpec, pinned: PinnedStates, state_name: str, schema: StructType, build: dict,
                 sink):
        self.spec, self.pinned, self.state_name, self.schema = spec, pinned, state_name, schema
        self.build, self.sink = build, sink

    def _side(self) -> IndexedSide:
        """This worker's index of the pinned version: built once, when the version is first met."""
        snapshot = self.pinned.snapshots()[self.state_name]
        key = (self.pinned.checkpoint, self.state_name, self.schema.json(), tuple(sorted(self.build.items())))
        with _lock:
            held = _indexes.get(key)
            if held is not None and held[0] == snapshot.version:
                return held[1]
            side = build_side(state_rows(snapshot, self.state_name, self.schema), self.schema, **self.build)
            _indexes[key] = (snapshot.version, side)
        say_built(side.info, operator=self.spec.operator, line=self.spec.line, version=snapshot.version)
        if self.sink is not None:
            self.sink({self.spec.operator: _built(side, snapshot.version)})
        return side

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        side = self._side()
        try:
            yield from probe_batches(self.spec, side.index, side.rows, batches, self.sink)
        except ValueError as exc:
            raise RuntimeError(f"operator '{self.spec.operator}' (line {self.spec.line}) NEAREST BY: {exc}") from exc


def _built(side: IndexedSide, version: int) -> dict[str, float]:
    """The metrics of one build: counted (index_builds), the largest and latest kept."""
    info = side.info
    return {"index_builds": 1, "index_rows": info.indexed, "index_bytes": info.bytes,
            "index_build_seconds": round(info.build_seconds, 6), "index_version": version}
