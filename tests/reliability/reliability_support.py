"""Helpers of the reliability tests (imported by name: pytest puts this folder on sys.path).

`FlakyService` is a real aiohttp server on 127.0.0.1 (its own loop, in a daemon thread) that
injects faults per request and records what it did, so a test can compute each element's
expected outcome from the server's own log instead of trusting the client:

- `GET /svc/{key}` and `GET /svc/{part}/{key}` answer `{"key": key, "value": "v-<key>"}`;
- faults are drawn per request from a seeded hash of (key, n-th request for that key):
  `p_error` HTTP 500, `p_reset` TCP reset, `p_hang` no answer until the client goes away;
- `poison` keys always answer 500; `bodies[key]` gives a fixed raw reply (bad data tests);
- `delay_ms` slows every answer; concurrency is counted globally and per `{part}`.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlparse

from aiohttp import web


class FlakyService:
    """Fault-injecting HTTP service; every counter is safe to read from the test thread."""

    def __init__(self, *, p_error: float = 0.0, p_reset: float = 0.0, p_hang: float = 0.0,
                 delay_ms: float = 0.0, seed: str = "dslc") -> None:
        self.p_error, self.p_reset, self.p_hang = p_error, p_reset, p_hang
        self.delay_ms = delay_ms
        self.seed = seed
        self.poison: set[str] = set()
        self.bodies: dict[str, tuple[int, str, str]] = {}      # key -> (status, content type, raw body)
        self._lock = threading.Lock()
        self.log: dict[str, list[str]] = defaultdict(list)    # key -> what each request got
        self.by_key: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.part_in_flight: Counter[str] = Counter()
        self.part_max: Counter[str] = Counter()
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------- control
    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fault_for(self, key: str, n: int) -> str:
        """The fault of the n-th request (0-based) for `key`: ok, 500, reset or hang."""
        if key in self.poison:
            return "500"
        digest = hashlib.sha256(f"{self.seed}/{key}/{n}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        if u < self.p_error:
            return "500"
        if u < self.p_error + self.p_reset:
            return "reset"
        if u < self.p_error + self.p_reset + self.p_hang:
            return "hang"
        return "ok"

    def total(self) -> int:
        with self._lock:
            return sum(self.by_key.values())

    def keys_called(self, predicate: Callable[[str], bool]) -> set[str]:
        with self._lock:
            return {k for k in self.by_key if predicate(k)}

    # ---------------------------------------------------------------- server
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        key = request.match_info["key"]
        part = request.match_info.get("part", "")
        with self._lock:
            n = self.by_key[key]
            self.by_key[key] += 1
            fault = self.fault_for(key, n)
            self.log[key].append(fault)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.part_in_flight[part] += 1
            self.part_max[part] = max(self.part_max[part], self.part_in_flight[part])
        try:
            if self.delay_ms:
                await asyncio.sleep(self.delay_ms / 1000.0)
            if fault == "hang":
                await asyncio.sleep(3600)
            if fault == "reset":
                transport = request.transport
                if transport is not None:
                    sock = transport.get_extra_info("socket")
                    if sock is not None:
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    transport.abort()
                raise asyncio.CancelledError()
            if fault == "500":
                return web.Response(status=500, text="injected failure")
            if key in self.bodies:
                status, content_type, body = self.bodies[key]
                return web.Response(status=status, text=body, content_type=content_type)
            return web.Response(text=json.dumps({"key": key, "value": f"v-{key}"}), content_type="application/json")
        finally:
            with self._lock:
                self.in_flight -= 1
                self.part_in_flight[part] -= 1

    def start(self) -> "FlakyService":
        loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_get("/svc/{part}/{key}", self._handle)
        app.router.add_get("/svc/{key}", self._handle)
        runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0, backlog=512)
            loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001 - port 0 -> real port
            ready.set()
            loop.run_forever()

        self._loop, self._runner = loop, runner
        self._thread = threading.Thread(target=run, name="flaky-service", daemon=True)
        self._thread.start()
        assert ready.wait(10), "service did not start"
        return self

    def stop(self) -> None:
        assert self._loop is not None and self._runner is not None and self._thread is not None
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


# -------------------------------------------------------------------- files


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    """One JSON object per line; written to a temp name then renamed (streaming sources see it whole)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(tmp, path)


def parquet_rows(folder: Path) -> list[dict[str, Any]]:
    """Every row of a parquet folder written by Spark (hive partitions such as batch_id=N included)."""
    import pyarrow.dataset as ds

    if not folder.exists():
        return []
    return ds.dataset(str(folder), format="parquet", partitioning="hive").to_table().to_pylist()


def committed_files(folder: Path) -> list[Path]:
    """The files a Spark streaming file sink committed to `folder` (its _spark_metadata log):
    what Spark's own readers see; files of an interrupted micro-batch are not among them."""
    log = folder / "_spark_metadata"
    if not log.is_dir():
        return []
    paths: set[str] = set()
    for entry in sorted(log.iterdir()):
        if entry.name.startswith(".") or entry.suffix in (".tmp", ".crc"):
            continue
        for line in entry.read_text().splitlines()[1:]:     # the first line is the log version
            item = json.loads(line)
            paths.add(item["path"]) if item.get("action", "add") == "add" else paths.discard(item["path"])
    return sorted(Path(urlparse(p).path) for p in paths)


def committed_parquet_rows(folder: Path) -> list[dict[str, Any]]:
    """Rows of the committed files of a streaming parquet sink."""
    import pyarrow.parquet as pq

    return [row for path in committed_files(folder) for row in pq.read_table(str(path)).to_pylist()]


def committed_lines(folder: Path) -> list[str]:
    """Lines of the committed files of a streaming text or JSON sink."""
    return [line for path in committed_files(folder) for line in path.read_text().splitlines() if line]


def text_lines(folder: Path) -> list[str]:
    """Lines of the part files of a text folder written by Spark (dead letters)."""
    if not folder.exists():
        return []
    return [line for p in sorted(folder.rglob("part-*")) for line in p.read_text().splitlines() if line]


def dead_letters(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text_lines(folder)]


# -------------------------------------------------------------------- jobs in subprocesses


def compile_job(flow: Path, job: Path, **options: Any) -> Path:
    from dslc.compiler.pipeline import compile_file

    job.write_text(compile_file(flow, job_folder=str(job.parent), **options))
    return job


def job_env(master: str = "local[2]") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DSLC_FLOW_FOLDER", "PYSPARK_SUBMIT_ARGS")}
    env.update(DSLC_MASTER=master, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    return env


class JobProcess:
    """`python job.py` in its own process group (the driver, its JVM and Python workers)."""

    def __init__(self, job: Path, log: Path, master: str = "local[2]") -> None:
        self.log = log
        self._out = log.open("wb")
        self.proc = subprocess.Popen([sys.executable, str(job)], cwd=str(job.parent), env=job_env(master),
                                     stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True)

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self._out.flush()

    def kill(self) -> None:
        """SIGKILL the whole group at once: a machine losing power, not a graceful stop."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)
        self._out.close()
        _wait_group_gone(self.proc.pid)

    def output(self) -> str:
        self._out.flush()
        return self.log.read_text(errors="replace")


def _wait_group_gone(pgid: int, timeout: float = 20.0) -> None:
    """Wait until no process of the group is left (the JVM and workers die with it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = False
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[2]) == pgid and fields[0] != "Z":
                    alive = True
                    break
        if not alive:
            return
        time.sleep(0.1)
    raise AssertionError(f"processes of group {pgid} survived SIGKILL")


def wait_for(condition: Callable[[], Any], timeout: float, what: str, proc: JobProcess | None = None) -> Any:
    """Poll until `condition()` is truthy; fail with `what` (and the job's log) after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if proc is not None and proc.proc.poll() is not None:
            raise AssertionError(f"job exited ({proc.proc.returncode}) while waiting for {what}:\n{proc.output()[-4000:]}")
        time.sleep(0.1)
    tail = proc.output()[-4000:] if proc is not None else ""
    raise AssertionError(f"timed out waiting for {what}\n{tail}")


def run_flow(flow: Path, metrics_file: Path | None = None, **options: Any) -> Path:
    """Compile `flow` beside itself and run the job's main() in this process (the test session's
    SparkSession is reused through getOrCreate); return the job file."""
    import runpy

    job = compile_job(flow, flow.with_name("job.py"), **options)
    os.environ.pop("DSLC_FLOW_FOLDER", None)
    if metrics_file is not None:
        os.environ["DSLC_METRICS_FILE"] = str(metrics_file)
    try:
        runpy.run_path(str(job), run_name="__main__")
    finally:
        os.environ.pop("DSLC_METRICS_FILE", None)
    return job
