"""Rows read per SOURCE and written per SINK, counted by Spark itself: an observation (one
`count` aggregate riding along the query that reads or writes the rows, no extra pass).

BATCH uses `pyspark.sql.Observation`, whose value is there once the first action that read the
rows has finished (a source read by no action has no count). STREAMING uses a named observation
per micro-batch (`DataFrame.observe(name, ...)`), added up over the micro-batches of each query
from its progress updates: the session's listener (progress_feed.py) hands over every update,
and the queries' own recent progress is read at the end for any it has not heard of yet. A
source read by several queries (each reads every row) counts its rows once, the most any of
them read.

Counting a source's rows where it is read keeps Spark from pushing a later WHERE into that
source's reader (a Parquet row group is read, then filtered): the rows are the same, the read
may cost more. `spark.dslc.count_rows = false` turns every count off.
"""
from __future__ import annotations

import threading
import uuid
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dslc.runtime import run_env

PREFIX = "dslc_rows_"


class Count:
    """The rows one source read or one sink wrote; `value()` None while not known."""

    def __init__(self, observation: Any = None, name: str | None = None) -> None:
        self.observation = observation      # BATCH: a pyspark.sql.Observation
        self.name = name                    # STREAMING: the observation's name

    def value(self) -> int | None:
        if self.observation is not None:
            return _observed(self.observation)
        if self.name is not None:
            return _streams.total(self.name)
        return None


def counted(df: DataFrame, what: str) -> tuple[DataFrame, Count]:
    """`df` with its rows counted as they flow; the count. Not counted (Count() answers None)
    when `spark.dslc.count_rows` is false or Spark cannot observe this frame."""
    if str(_conf(df, run_env.COUNT_ROWS_CONF.name) or run_env.COUNT_ROWS_CONF.default).lower() == "false":
        return df, Count()
    rows = F.count(F.lit(1)).alias("rows")
    try:
        if df.isStreaming:
            name = f"{PREFIX}{uuid.uuid4().hex[:12]}"
            _streams.listen(df.sparkSession)
            return df.observe(name, rows), Count(name=name)
        from pyspark.sql import Observation
        observation = Observation(f"{PREFIX}{what}-{uuid.uuid4().hex[:8]}")
        return df.observe(observation, rows), Count(observation=observation)
    except Exception:  # noqa: BLE001 - counting is never worth a failed job
        return df, Count()


def _observed(observation: Any) -> int | None:
    """An Observation's count, without waiting: None until its action has finished."""
    try:
        jo = getattr(observation, "_jo", None)
        if jo is not None and not jo.future().isCompleted():
            return None
        return int(observation.get.get("rows"))
    except Exception:  # noqa: BLE001 - Spark Connect's observation, an action that failed
        return None


class _Streams:
    """Every micro-batch's counted rows, by observation name and query (see the module)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rows: dict[str, dict[tuple[str, int], int]] = {}   # name -> (query id, batch id) -> rows

    def listen(self, spark) -> None:
        """Be told of every progress update of the session's queries (the feed tells it once)."""
        from .progress_feed import listen
        listen(spark, self.progress)      # else: the queries' recent progress, in total()

    def progress(self, update: Any) -> None:
        """One micro-batch's progress (a StreamingQueryProgress, or its dict)."""
        data = update if isinstance(update, dict) else _as_dict(update)
        observed = data.get("observedMetrics") or {}
        key = (str(data.get("id")), int(data.get("batchId", -1)))
        with self.lock:
            for name, row in observed.items():
                if name.startswith(PREFIX):
                    value = row.get("rows") if isinstance(row, dict) else getattr(row, "rows", None)
                    if value is not None:
                        self.rows.setdefault(name, {})[key] = int(value)

    def total(self, name: str) -> int | None:
        """The rows observation `name` counted: the most any one query counted over its batches."""
        from .metrics import _queries
        for query in list(_queries):          # updates the listener may not have been told of yet
            try:
                for update in query.recentProgress:
                    self.progress(update)
            except Exception:  # noqa: BLE001 - a query of a stopped session
                continue
        with self.lock:
            batches = self.rows.get(name)
            if not batches:
                return 0        # no micro-batch ran (nothing new to read)
            per_query: dict[str, int] = {}
            for (query, _), rows in batches.items():
                per_query[query] = per_query.get(query, 0) + rows
            return max(per_query.values())


_streams = _Streams()


def _as_dict(update: Any) -> dict[str, Any]:
    """A StreamingQueryProgress as its JSON fields (observed metrics as plain dicts)."""
    try:
        observed = {name: (row.asDict() if hasattr(row, "asDict") else row)
                    for name, row in (update.observedMetrics or {}).items()}
        return {"id": update.id, "batchId": update.batchId, "observedMetrics": observed}
    except Exception:  # noqa: BLE001
        return {}


def _conf(df: DataFrame, key: str) -> str | None:
    try:
        return df.sparkSession.conf.get(key, None)
    except Exception:  # noqa: BLE001
        return None
