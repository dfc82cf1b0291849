"""The driver's live progress collector: tasks' datagrams in (runtime/progress.py), the figures
of every operator out, once a second.

Started by the job's MetricsCollector, it gives the chains its address (`host:port/token`). Each
second it adds up the latest figures of every task (running tasks' in flight against their
CAPACITY, the totals of ended ones), keeps them as the run's timeline (in the metrics JSON, for
the report), records each STREAMING micro-batch's progress, and shows the figures: written to
$DSLC_PROGRESS_FILE when `dslc run` draws them (compiler/cli/live.py), else printed as a line
every 10 s on stderr.
"""
from __future__ import annotations

import atexit
import json
import os
import socket
import sys
import threading
import time
import uuid
import weakref
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from dslc.runtime.live_view import format_line, operator_row
from dslc.runtime.metrics import merge

PROGRESS_FILE_ENV = "DSLC_PROGRESS_FILE"       # set by `dslc run`: it draws the table
LINE_EVERY_S = 10.0
TICK_S = 1.0
MAX_TIMELINE = 1800           # points kept; older ones are thinned to every other one
MAX_MICRO_BATCHES = 1000

# collectors not closed yet: a job that fails (no report) or a process that exits closes them here
_open: "weakref.WeakSet[ProgressCollector]" = weakref.WeakSet()


def close_all() -> None:
    """Stop every collector still running in this process, showing nothing: the job that started
    it ended without its report (it failed), or the process exits."""
    for collector in list(_open):
        collector.close(show=False)


atexit.register(close_all)


def enabled(spark) -> bool:
    """Live progress and per-micro-batch figures are on unless DSLC_PROGRESS=0 or
    `spark.dslc.progress=false` (bench/watch_overhead.py measures what they cost)."""
    if os.environ.get("DSLC_PROGRESS", "1") == "0":
        return False
    return str(_conf(spark, "spark.dslc.progress") or "true").lower() != "false"


def advertised_host(spark) -> str:
    """The address executors send to: $DSLC_PROGRESS_HOST or `spark.dslc.progress.host`; else
    127.0.0.1 when they run on this machine (local masters, a Spark Connect server on localhost);
    else the driver's host as Spark tells executors (`spark.driver.host`) or, on Spark Connect,
    this machine's address on the route to the server."""
    chosen = os.environ.get("DSLC_PROGRESS_HOST") or _conf(spark, "spark.dslc.progress.host")
    if chosen:
        return chosen
    from .session import is_connect, remote_url
    if is_connect(spark):
        server = urlparse((remote_url() or "sc://localhost").replace("sc://", "http://", 1)).hostname or "localhost"
        if server in ("localhost", "127.0.0.1", "::1"):
            return "127.0.0.1"
        return _route_address(server)
    master = spark.sparkContext.master
    if master.startswith("local"):
        return "127.0.0.1"
    return _conf(spark, "spark.driver.host") or socket.gethostname()


def _route_address(server: str) -> str:
    """This machine's address on the route to `server` (no packet is sent)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((server, 15002))
            return probe.getsockname()[0]
    except OSError:
        return socket.gethostname()


class ProgressCollector:
    """Receives tasks' figures on a UDP port; adds them up each second (see the module doc)."""

    def __init__(self, host: str, port: int = 0, stream=None, progress_file: str | None = None,
                 queries=None, poll_each_second: bool = True) -> None:
        self.token = uuid.uuid4().hex
        self.poll_each_second = poll_each_second
        self._first_query = len(queries) if queries is not None else 0   # earlier ones are another job's
        bind = "127.0.0.1" if host in ("127.0.0.1", "localhost") else ""
        self._socket = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind((bind, port))
        self._socket.settimeout(0.5)
        self.address = f"{host}:{self._socket.getsockname()[1]}/{self.token}"
        self._stream = stream or sys.stderr
        self._file = Path(progress_file) if progress_file else None
        self._queries = queries if queries is not None else []   # streaming queries, for micro-batches
        self._lock = threading.Lock()
        self._running: dict[str, dict[str, dict[str, Any]]] = {}   # task -> operator -> figures
        self._done: dict[str, dict[str, Any]] = {}                  # operator -> ended tasks added up
        self._ended: set[str] = set()
        self._order: dict[str, None] = {}                           # operators in order of arrival
        self._started = time.monotonic()
        self._last_line = self._started
        self._previous: tuple[float, dict[str, int]] | None = None
        self.timeline: list[dict[str, Any]] = []
        self.micro_batches: list[dict[str, Any]] = []
        self._seen_batches: set[tuple[str, int]] = set()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._receive, name="dslc-progress-in", daemon=True),
                         threading.Thread(target=self._tick, name="dslc-progress-tick", daemon=True)]
        for thread in self._threads:
            thread.start()
        _open.add(self)

    # ------------------------------------------------------------------ tasks' datagrams

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                data, _ = self._socket.recvfrom(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            self.accept(data)

    def accept(self, data: bytes) -> None:
        """One datagram: keep the task's latest figures; an ended task's go to the totals."""
        try:
            message = json.loads(data)
            if message.get("token") != self.token:
                return
            task, operators = str(message["task"]), dict(message["operators"])
        except (ValueError, KeyError, TypeError, AttributeError):
            return
        with self._lock:
            if task not in self._running and task in self._ended:
                return                                  # a late datagram of an ended task
            for name in operators:
                self._order.setdefault(name, None)
            if message.get("final"):
                self._running.pop(task, None)
                self._ended.add(task)
                for name, figures in operators.items():
                    self._done[name] = merge(self._done.get(name, {}), figures)
            else:
                self._running[task] = operators

    # ------------------------------------------------------------------ each second

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S):
            self.step()

    def totals(self) -> dict[str, dict[str, Any]]:
        """Each operator's figures added up over its tasks as last reported, running ones too: what
        a run that stops has of a task that failed (its accumulator update never comes)."""
        with self._lock:
            merged = {name: dict(figures) for name, figures in self._done.items()}
            for task in self._running.values():
                for name, figures in task.items():
                    merged[name] = merge(merged.get(name, {}), figures)
        return merged

    def view(self) -> dict[str, Any]:
        """The figures now: one row per operator (runtime/live_view.py)."""
        now = time.monotonic()
        with self._lock:
            names = list(self._order)
            running = [task for task in self._running.values()]
            done = dict(self._done)
        rows, calls = [], {}
        for name in names:
            totals = dict(done.get(name, {}))
            in_flight = limit = tasks = 0
            for task in running:
                figures = task.get(name)
                if figures:
                    totals = merge(totals, figures)
                    in_flight += int(figures.get("in_flight", 0))
                    limit += int(figures.get("capacity", 0))
                    tasks += 1 if figures.get("capacity") else 0
            calls[name] = int(totals.get("calls", 0))
            rate = 0.0
            if self._previous is not None and now > self._previous[0]:
                rate = max(0, calls[name] - self._previous[1].get(name, 0)) / (now - self._previous[0])
            rows.append(operator_row(name, totals, in_flight, limit, rate, tasks))
        self._previous = (now, calls)
        view: dict[str, Any] = {"elapsed": round(now - self._started, 1), "rows": rows}
        return _with_expectations(view, self._queries)

    def step(self, done: bool = False) -> dict[str, Any]:
        """One tick: the view, a timeline point, new micro-batches, and showing it."""
        view = self.view()
        point = {"t": view["elapsed"], "operators": {
            r["operator"]: {k: r.get(k) for k in ("elements_in", "elements_out", "calls", "errors", "in_flight",
                                                   "limit", "tasks", "calls_per_s", "p50_ms", "p99_ms",
                                                   "latency_seconds")}
            for r in view["rows"]}}
        self.timeline.append(point)
        if len(self.timeline) > MAX_TIMELINE:
            self.timeline = self.timeline[::2]
        self._poll_micro_batches(final=done)
        self._show(view, done)
        return view

    def _show(self, view: dict[str, Any], done: bool = False) -> None:
        if self._file is not None:
            tmp = self._file.with_name(self._file.name + ".tmp")
            try:
                tmp.write_text(json.dumps({**view, "done": done}, default=str))
                os.replace(tmp, self._file)
            except OSError:
                pass
            return
        now = time.monotonic()
        if view["rows"] and (now - self._last_line >= LINE_EVERY_S or done):
            self._last_line = now
            try:
                print(format_line(view), file=self._stream, flush=True)
            except (ValueError, OSError):   # the stream was closed under us (the process is exiting)
                pass

    def _poll_micro_batches(self, final: bool = False) -> None:
        """Each new micro-batch of the tracked queries: its id, rows, and dslc's observed figures.
        Each second the last progress of each query (classic sessions); at the end the recent
        ones (Spark Connect too, where a query's progress is a call to the server)."""
        if self.poll_each_second or final:
            for query in list(self._queries[self._first_query:]):
                try:
                    progresses = query.recentProgress if final else [query.lastProgress]
                except Exception:  # noqa: BLE001 - a query that just stopped, a Connect hiccup
                    continue
                for progress in progresses:
                    self._micro_batch(progress)

    def _micro_batch(self, progress) -> None:
        progress = _plain(progress)
        if not progress:
            return
        key = (str(progress.get("id")), int(progress.get("batchId", -1)))
        if key in self._seen_batches:
            return
        self._seen_batches.add(key)
        observed = {name: value for name, value in (progress.get("observedMetrics") or {}).items()
                    if name.startswith("dslc_") and not name.startswith("dslc_metrics_")}
        if not observed:
            return
        self.micro_batches.append({"query": progress.get("name"), "batch_id": key[1],
                                   "timestamp": progress.get("timestamp"),
                                   "input_rows": progress.get("numInputRows"), "figures": observed})
        self.micro_batches.sort(key=lambda b: (str(b["timestamp"]), b["batch_id"]))
        del self.micro_batches[:-MAX_MICRO_BATCHES]

    def close(self, show: bool = True) -> None:
        """The job ended: a last tick (shown), then stop the threads and the port."""
        if self._stop.is_set():
            return
        _open.discard(self)
        self._stop.set()
        try:    # wake the receiving thread from its wait for a datagram (half a second at most)
            host, port = self._socket.getsockname()[:2]
            self._socket.sendto(b"", ("::1" if ":" in host else "127.0.0.1", port))
        except OSError:
            pass
        for thread in self._threads:
            thread.join(timeout=2)
        if show:
            self.step(done=True)
        self._socket.close()


def _with_expectations(view: dict[str, Any], queries: list) -> dict[str, Any]:
    """The view with its EXPECTs' figures apart from the operators' rows: the chains' (their
    tasks' figures, keyed `EXPECT name`) and Spark's (observed when an action ends, or each
    micro-batch); per constraint, passed and failed (runtime/spark/expectations.py)."""
    from . import expectations

    judged = {row["operator"]: row for row in view["rows"] if str(row["operator"]).startswith("EXPECT ")}
    view["rows"] = [row for row in view["rows"] if row["operator"] not in judged]
    figures = expectations.section(judged, queries)
    if figures:
        view["expectations"] = figures
    return view


def _plain(progress) -> dict[str, Any] | None:
    """A StreamingQueryProgress as plain JSON values (observed metrics as objects, not Rows)."""
    if not progress:
        return None
    text = getattr(progress, "json", None)
    if text is not None:
        try:
            return json.loads(text() if callable(text) else text)
        except (TypeError, ValueError):
            pass
    return dict(progress) if isinstance(progress, dict) else None


def _conf(spark, key: str) -> str | None:
    try:
        return spark.conf.get(key, None) or None
    except Exception:  # noqa: BLE001 - a key Spark Connect's server refuses to read
        return None
