"""A STREAMING broadcast state that is a database table's rows: BROADCAST ... FROM DATABASE, or a
BROADCAST of a SOURCE ... FROM DATABASE, [REFRESH EVERY d].

The table is read when the job starts, before any data micro-batch, and (REFRESH EVERY d under a
continuous trigger) again every d by a driver thread. Each read is compared with the state by KEY:
new and changed rows are applied as upserts, keys no longer there as deletes, and a read that
changed something is stored as a new snapshot version (the same versions, pins and restore as a
rules query's, streaming.StreamingState). The guarantee is a rules update's: a data micro-batch
sees every change read before it started. While a read is under way the caught-up mark
(pinned.py) says it began then, so a micro-batch that starts during it waits for it to be
applied; between reads the mark says "complete", and no micro-batch waits. A read that fails
(the database unreachable) keeps the rules applied so far and is said on stderr; the next period
reads again.
"""
from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from dslc.runtime.broadcast.state import BroadcastState, SnapshotStore
from dslc.runtime.secrets import scrub

from .pinned import caught_up, forget_caught_up, state_root

#: The caught-up moment written between reads: later than any micro-batch's start.
COMPLETE = sys.float_info.max
_OP = "__dslc_op"


def difference(current: Mapping[Any, Any], rows: Iterable[Mapping[str, Any]], key: str) -> list[dict[str, Any]]:
    """The changelog that turns `current` (key -> row) into `rows`: an upsert per new or changed
    row, then a delete per key that is no longer there. A NULL key is refused, a repeated key
    keeps its last row (as the changelog of any BROADCAST does)."""
    latest: dict[Any, dict[str, Any]] = {}
    for row in rows:
        value = row.get(key)
        if value is None:
            raise ValueError(f"KEY column '{key}' is NULL in a row of the table: {dict(row)!r}")
        latest[value] = dict(row)
    changes = [{**row, _OP: "upsert"} for value, row in latest.items() if current.get(value) != row]
    changes += [{key: value, _OP: "delete"} for value in current if value not in latest]
    return changes


class RefreshedState:
    """One database BROADCAST of a streaming job: read, compared, versioned."""

    def __init__(self, spark: SparkSession, name: str, checkpoint: str, *, key: str,
                 refresh_s: float | None, read: Callable[[], DataFrame]):
        self.spark, self.name, self.key, self.refresh_s, self.read = spark, name, key, refresh_s, read
        self.root = state_root(checkpoint, name)
        self.store = SnapshotStore(self.root / "snapshots")
        self.reads = 0
        self.stopped = threading.Event()
        forget_caught_up(self.root)      # a mark of an earlier run says nothing about this one
        marker = self.root / "applied.json"
        if marker.is_file():             # restart: the rules the last run applied, then a read
            self.state = BroadcastState.restore(self.store.read(json.loads(marker.read_text())["version"]))
        else:
            self.state = BroadcastState([name])
        if not self.store.versions():
            self.store.write(self.state.snapshot())   # the empty state, for batches before any rules

    def refresh(self) -> int:
        """Read the table once and apply what changed; the number of changes."""
        rows = [row.asDict(recursive=True) for row in self.read().collect()]
        changes = difference(self.state.to_dict().get(self.name, {}), rows, self.key)
        if changes:
            self.state.apply_changelog(self.name, changes, key=self.key, op=_OP)
            self.store.write(self.state.snapshot())
            partial = self.root / ".applied.json.tmp"
            partial.write_text(json.dumps({"batch_id": self.reads, "version": self.state.version}))
            partial.replace(self.root / "applied.json")
        self.reads += 1
        return len(changes)

    def start(self, trigger: str | None, queries: list[StreamingQuery]) -> None:
        """The first read, before any data micro-batch; then, with REFRESH EVERY d under a
        continuous trigger, a driver thread that reads again every d as long as one of the job's
        `queries` (the list the job fills as it starts them) runs."""
        self.refresh()
        if trigger == "available-now" or not self.refresh_s:
            return
        caught_up(self.root, COMPLETE, lambda: None)
        thread = threading.Thread(target=self._keep_reading, args=(queries,), name=f"dslc-refresh-{self.name}",
                                  daemon=True)
        thread.start()

    def stop(self) -> None:
        """No more reads."""
        self.stopped.set()

    def _keep_reading(self, queries: list[StreamingQuery]) -> None:
        while not self.stopped.wait(self.refresh_s):
            if queries and not any(query.isActive for query in list(queries)):
                return          # the job ended
            caught_up(self.root, time.time(), lambda: None)      # a read under way: batches starting now wait
            try:
                self.refresh()
            except Exception as exc:  # noqa: BLE001 - kept running: the rules read last stay applied
                print(f"dslc: warning: BROADCAST {self.name}: the table could not be read again "
                      f"({scrub(f'{type(exc).__name__}: {exc}')}); the rules read before stay applied",
                      file=sys.stderr)
            finally:
                caught_up(self.root, COMPLETE, lambda: None)
