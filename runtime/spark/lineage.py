"""RUNNING events of `dslc run --lineage` (compiler/cli/lineage_events.py): one after each
micro-batch of a STREAMING query, sent from the job's driver, where the micro-batches are known.

`dslc run` sends START itself and hands the driver, in `LINEAGE_ENV`, a JSON file with that
event and where it went; each progress update of the session's queries sends it again as
RUNNING, with the time of now, through the same kind of openlineage-python transport (the
client is imported only when the variable is set: a job run without --lineage needs none of it).
"""
from __future__ import annotations

import copy
import datetime as dt
import json
import os
import threading
from pathlib import Path
from typing import Any

from dslc.runtime import run_env

LINEAGE_ENV = run_env.LINEAGE_RUNNING.name
_sessions: set[int] = set()
_lock = threading.Lock()
_sent: set[tuple[str, int]] = set()     # (query id, batch id) of the RUNNING events sent
_send: list[Any] = []                   # the session's sender, once listening


def transport_for(dest: str) -> Any:
    """The openlineage-python transport for DEST: the base URL of an OpenLineage HTTP API, a
    folder (existing, or a path ending in `/`: one file per event) or a file (one event a line)."""
    from openlineage.client.transport.file import FileConfig, FileTransport
    from openlineage.client.transport.http import HttpConfig, HttpTransport

    if dest.startswith(("http://", "https://")):
        from openlineage.client.transport.http_common import DEFAULT_RETRY_CONFIG

        # three tries within about a second: an endpoint that is down costs each event little
        retry = {**DEFAULT_RETRY_CONFIG, "total": 3, "connect": 3, "read": 3, "backoff_factor": 0.2}
        return HttpTransport(HttpConfig(url=dest.rstrip("/"), retry=retry))
    path = Path(dest)
    if dest.endswith("/") or path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        return FileTransport(FileConfig(log_file_path=str(path / "event"), append=False))
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileTransport(FileConfig(log_file_path=str(path), append=True))


def listen(spark: Any) -> None:
    """With --lineage, send a RUNNING event after every micro-batch of this session's queries
    (heard through the session's listener, progress_feed.py; once per session)."""
    handoff = os.environ.get(LINEAGE_ENV)
    if not handoff or id(spark) in _sessions:
        return
    _sessions.add(id(spark))
    with open(handoff, encoding="utf-8") as handle:
        given = json.load(handle)

    transport = transport_for(given["dest"])
    started = given["event"]

    def send(query_id: str, batch_id: int) -> None:
        """One RUNNING event for a micro-batch, once however it is heard of."""
        with _lock:
            if (query_id, batch_id) in _sent:
                return
            _sent.add((query_id, batch_id))
            running = copy.deepcopy(started)
            running["eventType"] = "RUNNING"
            running["eventTime"] = dt.datetime.now(dt.timezone.utc).isoformat()
            try:
                transport.emit(running)
            except Exception:  # noqa: BLE001 - lineage never stops the job; COMPLETE or FAIL still comes
                pass

    _send.append(send)
    from .progress_feed import listen as hear
    # none under Spark Connect: START and the end still come, and caught_up() the RUNNING events
    hear(spark, lambda update: send(str(update["id"]), int(update["batchId"])))


def caught_up(queries: list[Any]) -> None:
    """The queries ended: a RUNNING event for each micro-batch the listener had not been told of
    yet (Spark's listener bus delivers progress after the query may have ended)."""
    if not _send:
        return
    for query in queries:
        try:
            progress = query.recentProgress
        except Exception:  # noqa: BLE001
            continue
        for update in progress:
            _send[0](str(update.id), int(update.batchId))
