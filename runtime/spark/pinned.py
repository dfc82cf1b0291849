"""Broadcast snapshots pinned per micro-batch, resolved on the executors of a streaming query.

MATCH and PROCESS WITH BROADCAST run as ordinary operators inside a streaming query. Spark tells
each task which query and micro-batch it works for (the local properties `sql.streaming.queryId`
and `streaming.sql.batchId`). The first task of micro-batch N records the state version applied
at that moment (`<state>/batches/<query id>/<N>.json`, created exclusively, so every task of the
batch agrees); a replay of N after a crash reads the record and sees the same rules. The rules
query writes the versions (`StreamingState` in streaming.py); the checkpoint folder must be on a
file system the executors can read (local, or mounted on every worker).
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Callable, Mapping

from pyspark import TaskContext

from dslc.runtime.broadcast.state import Snapshot, SnapshotStore

_QUERY_ID = "sql.streaming.queryId"
_BATCH_ID = "streaming.sql.batchId"


class PinnedStates:
    """The snapshots of named streaming states as one micro-batch sees them (picklable)."""

    def __init__(self, checkpoint: str, names: tuple[str, ...]):
        self.checkpoint = checkpoint
        self.names = names

    def snapshots(self) -> Mapping[str, Snapshot]:
        """Called inside a task: each state's snapshot for this task's query and micro-batch."""
        context = TaskContext.get()
        query = context.getLocalProperty(_QUERY_ID) if context else None
        batch = context.getLocalProperty(_BATCH_ID) if context else None
        if query is None or batch is None:
            raise RuntimeError("broadcast state snapshots are pinned per micro-batch: "
                               "this must run inside a streaming query")
        return {name: _snapshot(self.checkpoint, name, query, int(batch)) for name in self.names}


_cache: dict[tuple[str, str, int], Snapshot] = {}


def state_root(checkpoint: str, name: str) -> Path:
    """Where the streaming state `name` keeps its snapshots, versions and pins."""
    return Path(checkpoint) / "state" / name


def _snapshot(checkpoint: str, name: str, query: str, batch: int) -> Snapshot:
    root = state_root(checkpoint, name)
    version = pin(root, query, batch)
    key = (str(root), name, version)
    if key not in _cache:
        _cache[key] = SnapshotStore(root / "snapshots").read(version)
    return _cache[key]


def applied_version(root: Path) -> int:
    """The last version the rules query recorded (0: the empty state, before any rules)."""
    marker = root / "applied.json"
    return json.loads(marker.read_text())["version"] if marker.is_file() else 0


#: How long a data micro-batch waits for the rules query to catch up before it pins what is applied.
CATCH_UP_TIMEOUT_S = 30.0


def caught_up(root: Path, started: float, wait: Callable[[], None]) -> None:
    """Driver: `wait()` until the rules query has applied every update there at `started`, then
    record `started` as the moment the state is complete up to."""
    wait()
    mark = root / _CAUGHT_UP
    partial = mark.with_name(f".{_CAUGHT_UP}.{os.getpid()}.tmp")
    partial.write_text(json.dumps({"at": started}))
    os.replace(partial, mark)


def forget_caught_up(root: Path) -> None:
    """Driver, when a job starts: no mark (AVAILABLE NOW pins what the finished rules query applied)."""
    (root / _CAUGHT_UP).unlink(missing_ok=True)


def _wait_for_rules(root: Path) -> None:
    """Task, before pinning: under a continuous trigger (a mark exists), wait until the rules
    query has applied every update that had arrived when this task started to pin. After
    CATCH_UP_TIMEOUT_S (the rules query cannot get a task slot), pin what is applied, and say so."""
    mark = root / _CAUGHT_UP
    if not mark.is_file():
        return
    started = time.time()
    deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            if json.loads(mark.read_text())["at"] >= started:
                return
        except (OSError, ValueError, KeyError):
            pass      # replaced between the check and the read: look again
        time.sleep(0.02)
    print(f"dslc: warning: broadcast state {root.name}: the rules query did not catch up within "
          f"{CATCH_UP_TIMEOUT_S:g}s; this micro-batch sees the rules applied so far", file=sys.stderr)


_CAUGHT_UP = "caught_up.json"


def pin(root: Path, query: str, batch: int) -> int:
    """The version micro-batch `batch` of `query` sees: recorded by its first task, then reused.
    Under a continuous trigger the first pin waits for the rules that had arrived (_wait_for_rules)."""
    record = root / "batches" / query / f"{batch}.json"
    if not record.is_file():
        _wait_for_rules(root)
        record.parent.mkdir(parents=True, exist_ok=True)
        partial = record.with_name(f".{batch}.{os.getpid()}.{id(record)}.tmp")
        partial.write_text(json.dumps({"version": applied_version(root)}))
        try:
            os.link(partial, record)          # atomic and exclusive: the first task wins
        except FileExistsError:
            pass
        finally:
            partial.unlink()
    return json.loads(record.read_text())["version"]
