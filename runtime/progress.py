"""Live progress from a running task to the job's driver: small UDP datagrams, once a second.

Why UDP (docs/operations.md, "Watching a run"): an executor of a standalone or YARN cluster, or a
Spark Connect server's, can reach the driver's host (Spark itself needs that), but shares no file
with it, and Spark gives a running task no way to talk to the driver before it ends
(accumulators arrive with the task's result). A datagram needs no connection, no library the
executors lack and never blocks the task: each one is the task's *cumulative* figures, so one
that is lost is simply replaced by the next, and the exact totals still come at the end through
the accumulator (or the metrics rows on Spark Connect). A datagram carries the job's token, so
the collector ignores anything else that reaches its port.

Pure standard library: executors import it from the shipped runtime.
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

INTERVAL_S = 1.0
MAX_DATAGRAM = 60_000        # under UDP's 64 KiB; a bigger snapshot goes without its histograms


def parse_address(address: str) -> tuple[str, int, str]:
    """'host:port/token' (as the driver's collector hands it to chains) -> (host, port, token)."""
    where, _, token = address.partition("/")
    host, _, port = where.rpartition(":")
    return host.strip("[]"), int(port), token


def encode(token: str, task: str, chain: str, operators: dict[str, dict[str, Any]], final: bool) -> bytes:
    """One datagram: the task's cumulative figures per operator."""
    message = {"token": token, "task": task, "chain": chain, "final": final, "at": time.time(),
               "operators": operators}
    data = json.dumps(message, separators=(",", ":"), default=str).encode()
    if len(data) > MAX_DATAGRAM:
        slim = {name: {k: v for k, v in m.items() if k != "latency_histogram"} for name, m in operators.items()}
        data = json.dumps({**message, "operators": slim}, separators=(",", ":"), default=str).encode()
    return data


class TaskReporter:
    """Sends a task's figures every INTERVAL_S from a daemon thread, and once more at its end.

    `snapshot()` is called from that thread while the chain runs in others: it only reads
    counters (plain ints in dicts whose keys do not change), which is safe under the GIL."""

    def __init__(self, address: str, chain: str, snapshot: Callable[[], dict[str, dict[str, Any]]],
                 interval_s: float = INTERVAL_S) -> None:
        self.host, self.port, self.token = parse_address(address)
        self.chain = chain
        self.snapshot = snapshot
        self.interval_s = interval_s
        self.task = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._socket: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> TaskReporter:
        try:
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            self._socket = socket.socket(family, socket.SOCK_DGRAM)
        except OSError:
            return self        # no progress, never a failed task
        self._thread = threading.Thread(target=self._run, name="dslc-progress", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.send(final=False)

    def send(self, final: bool) -> None:
        """One datagram now (errors ignored: progress must never fail a task)."""
        if self._socket is None:
            return
        try:
            data = encode(self.token, self.task, self.chain, self.snapshot(), final)
            self._socket.sendto(data, (self.host, self.port))
        except Exception:  # noqa: BLE001 - a snapshot taken mid-update, an unreachable driver: next time
            pass

    def stop(self) -> None:
        """The task ended: stop the thread, send the last figures, close the socket."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self.send(final=True)
        if self._socket is not None:
            self._socket.close()
            self._socket = None
