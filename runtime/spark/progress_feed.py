"""Every micro-batch's progress, heard once per session and handed to each part of the job that
keeps figures from it: the rows counted per SOURCE and SINK (counting.py), the EXPECT figures
(expectations.py) and `--lineage`'s RUNNING events (lineage.py).

One listener, and only the progress's JSON. pyspark's own listener wrapper turns each update into
Python objects field by field for each listener: some forty calls into the JVM, made back from
Spark's listener thread, and per observed metric a look-up of a JVM class by its short name
(`_jvm.PythonSQLUtils`), which Java answers by searching every jar of the class path (281 in a
local session). Each of the three parts had a listener of its own: a query with four observed
metrics used 1,002 ms of CPU per micro-batch, against 218 ms through this feed
(bench/progress_listener.py, three rounds of 30 micro-batches, interleaved; ratio 0.22). One call
(`progress().json()`, as pyspark's own `lastProgress` reads it) carries everything the parts
read: the query's and the batch's ids and the observed metrics, as the dicts they already read
from `recentProgress` under Spark Connect.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

#: a part's handler: one progress update, as Spark's JSON of it (a dict)
Hearer = Callable[[dict[str, Any]], None]

_lock = threading.Lock()
_feeds: dict[int, list[Hearer]] = {}      # id(session) -> the parts told of its updates


def listen(spark: Any, hearer: Hearer) -> bool:
    """Call `hearer` with every progress update of the session's streaming queries, from Spark's
    listener thread. False when it cannot be (Spark Connect, a session without listeners): the
    parts then read each query's `recentProgress` at the end, as they do for updates not heard yet."""
    with _lock:
        hearers = _feeds.get(id(spark))
        if hearers is not None:
            if hearer not in hearers:
                hearers.append(hearer)
            return True
        hearers = _feeds[id(spark)] = [hearer]
    if _add(spark, _listener(hearers)):
        return True
    with _lock:
        _feeds.pop(id(spark), None)
    return False


def _add(spark: Any, listener: Any) -> bool:
    """Add the session's listener; False when it cannot be: under Spark Connect the client's
    listener runs a thread that keeps the job's process from ending. (session.is_connect's test,
    here since the session imports this module, through lineage.py.)"""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return False
    try:
        spark.streams.addListener(listener)
    except Exception:  # noqa: BLE001 - a session without listeners: the same way out
        return False
    return True


def _tell(hearers: list[Hearer], update: dict[str, Any]) -> None:
    """Each part in turn: one that fails (a bug of its own) costs the others nothing."""
    for hearer in list(hearers):
        try:
            hearer(update)
        except Exception:  # noqa: BLE001 - figures are never worth a failed job; the end reads them again
            pass


class _JavaSide:
    """What Spark's PythonStreamingQueryListenerWrapper calls (py4j implements the interface with
    it): only a progress update is read, and only as its JSON."""

    def __init__(self, hearers: list[Hearer]) -> None:
        self.hearers = hearers

    def onQueryStarted(self, jevent: Any) -> None:  # noqa: N802 - the Java interface's names
        pass

    def onQueryProgress(self, jevent: Any) -> None:  # noqa: N802
        _tell(self.hearers, json.loads(jevent.progress().json()))

    def onQueryIdle(self, jevent: Any) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, jevent: Any) -> None:  # noqa: N802
        pass

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


def _listener(hearers: list[Hearer]) -> Any:
    """A StreamingQueryListener whose JVM side is `_JavaSide`. Should pyspark ever stop asking a
    listener for its `_jlistener`, its own wrapper calls onQueryProgress with the converted update
    instead: slower, the same figures."""
    from pyspark.sql.streaming import StreamingQueryListener

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event) -> None:
            pass

        def onQueryProgress(self, event) -> None:
            progress = event.progress
            _tell(hearers, {"id": str(progress.id), "batchId": progress.batchId,
                            "observedMetrics": {name: row.asDict() for name, row in
                                                (progress.observedMetrics or {}).items()}})

        def onQueryIdle(self, event) -> None:
            pass

        def onQueryTerminated(self, event) -> None:
            pass

        @property
        def _jlistener(self):
            if not hasattr(self, "_jlistenerobj"):
                from pyspark import SparkContext
                self._jlistenerobj = SparkContext._jvm.PythonStreamingQueryListenerWrapper(_JavaSide(hearers))
            return self._jlistenerobj

    return Listener()
