"""Fixtures shared by every test: one real SparkSession (local[2]) per run (per worker process
when pytest-xdist runs the files in several), and a real aiohttp server on 127.0.0.1 for
enrichment services."""
from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterator

import pytest

# Where PYTHONDONTWRITEBYTECODE is set (to keep checkouts free of __pycache__ folders), every
# Python the tests start (each `dslc` command, each job's driver, each Spark Python worker, each
# xdist worker) compiled dslc's modules from source again: collecting the suite took 16 s of CPU
# instead of 6 s (in each xdist worker), a `dslc check` 0.67 s instead of 0.50 s. They compile
# them once per machine instead, into a cache outside the checkout
# (PYTHONPYCACHEPREFIX, under $DSLC_TEST_CACHE like the JVM archive). Only where the compiled
# modules are kept changes. Set PYTHONPYCACHEPREFIX yourself to choose another place.
if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
    from pathlib import Path

    _bytecode = Path(os.environ.get("DSLC_TEST_CACHE") or Path.home() / ".cache" / "dslc-tests") / "pycache"
    os.environ["PYTHONPYCACHEPREFIX"] = str(_bytecode)
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    sys.pycache_prefix, sys.dont_write_bytecode = str(_bytecode), False

# Every JVM the tests start through spark-submit (the session below, `dslc run`'s jobs, the Spark
# Connect server) and the standalone cluster's daemons: only the C1 JIT and the serial collector.
# The suite's JVMs live seconds to minutes on small data, where C2's compiler threads and the
# parallel collector's cost more CPU than they save: the same tests use about 40 % less CPU (a
# contract file: 57 s -> 33 s; one `dslc run` of the fraud example: 26 s -> 13 s). Only how the
# JVM compiles changes, not what runs. Set either variable yourself to override.
# Executors in their own JVMs (local-cluster, the standalone cluster) get the same options; the
# jobs `dslc run` starts get no Spark UI either (as the session below): nobody looks at it.
# The drivers (spark-submit) also map an archive of Spark's classes made once per machine
# (tests/jvm_archive.py): about half the CPU of a driver's start. The executors in JVMs of their
# own and the standalone cluster's daemons map it too: they load Spark's classes from the same
# class path (a JVM whose class path does not fit ignores the archive, quietly).
# They also start processes with vfork: without Hadoop's native library (pip's pyspark has none)
# every chmod and readlink of a local file is a `chmod` or `readlink` process (a mkdir, a file
# written through a FileContext, each rename of a streaming checkpoint's log): `dslc test
# examples/` starts about 5,800. Java's default launch runs a helper program first for each
# (jspawnhelper), vfork execs the command directly: that run used 6 to 14 % less CPU (two pairs
# of runs); the whole suite's time did not move beyond this machine's noise (23:06 before, 23:25
# after with the class archive made again). Only how the JVM starts those processes changes.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djdk.lang.Process.launchMechanism=VFORK"
_sharing = ""
if "SPARK_SUBMIT_OPTS" not in os.environ:
    from jvm_archive import QUIET, archive

    _classes = archive(JVM_OPTIONS)
    _sharing = f" {QUIET} -XX:SharedArchiveFile={_classes}" if _classes else ""
    os.environ["SPARK_SUBMIT_OPTS"] = (f'{JVM_OPTIONS}{_sharing} '
                                       f'-Dspark.executor.extraJavaOptions="{JVM_OPTIONS}{_sharing}" '
                                       "-Dspark.ui.enabled=false")
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", JVM_OPTIONS + _sharing)


def pytest_configure(config) -> None:
    """Keep the files in the order `pytest_collection_modifyitems` below gives them: pytest-xdist's
    `--dist loadfile` otherwise hands out the files with the most tests first, which puts the
    single-test files that run for a minute or two (the docs' samples, the secret search) last,
    where one worker runs them alone while the other has nothing left to do."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


@pytest.hookimpl(optionalhook=True)     # also without pytest-xdist (-p no:xdist)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile`, with the files that share a server's session fixture as one unit of work
    (tests/shared_servers.py): the server starts once per test run, not once per worker."""
    if config.getvalue("dist") != "loadfile":
        return None
    from shared_servers import scheduler

    return scheduler(config, log)


def pytest_collection_modifyitems(session, config, items) -> None:
    """The files holding a test marked `slow` first, then those that run Spark (marked `spark` or
    using the session), then the rest: the two workers start on the long files and the quick
    ones fill in whatever time is left, so the run ends on a short file. Within each group the order stays the collection's (a
    stable sort)."""
    rank: dict = {}
    for item in items:
        _session_first(item)
        spark = item.get_closest_marker("spark") or "spark" in getattr(item, "fixturenames", ())
        tier = 0 if item.get_closest_marker("slow") else 1 if spark else 2
        rank[item.path] = min(tier, rank.get(item.path, 2))
    items.sort(key=lambda item: rank[item.path])


def _session_first(item) -> None:
    """A test marked `spark` gets the session below even when it does not ask for it (a job run
    in this process, whose getOrCreate() would otherwise make the worker's session itself):
    whichever test a worker runs first, its session has the JDBC driver, UTC and two shuffle
    partitions. Without this, a worker whose first Spark file ran a job this way made a session
    without the driver, and every database test after it failed with ClassNotFoundException."""
    names = getattr(item, "fixturenames", None)
    if item.get_closest_marker("spark") and isinstance(names, list) and "spark" not in names:
        names.insert(0, "spark")


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test run (of this worker); generated jobs reuse it through getOrCreate()."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("dslc-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.log.level", "WARN")
               # PostgreSQL's JDBC driver (Debian's libpostgresql-jdbc-java) for the database tests
               .config("spark.jars", os.environ.get("DSLC_JDBC_JAR", "/usr/share/java/postgresql.jar"))
               .getOrCreate())
    yield session
    session.stop()


class AppServer:
    """An aiohttp Application served on its own loop in a daemon thread."""

    def __init__(self, app, port: int | None = None, ssl_context=None) -> None:
        """`port`: serve there (a service started again where it was); `ssl_context`: HTTPS."""
        from aiohttp import web

        self.app = app
        self.ssl_context = ssl_context
        with socket.socket() as sock:
            if port:        # the port was ours a moment ago: its old connections may linger
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port or 0))
            self.port = sock.getsockname()[1]
        self.loop = asyncio.new_event_loop()
        self.stopped = False
        self.runner = web.AppRunner(app)
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(self.runner.setup())
            self.loop.run_until_complete(web.TCPSite(self.runner, "127.0.0.1", self.port,
                                                     ssl_context=self.ssl_context).start())
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        ready.wait(10)

    def stop(self) -> None:
        """Stop serving (closing the port); again is a no-op. (A second stop right after the first
        found the loop still running, its stop not yet processed, and waited 10 s for a cleanup
        that loop never ran: the teardown of every test that stopped its server itself.)"""
        if self.stopped or self.loop.is_closed() or not self.loop.is_running():
            return
        self.stopped = True
        try:
            asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        except TimeoutError:     # a client's idle keep-alive connection held the shutdown up
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)


def _serving() -> Iterator[Callable]:
    servers: list[AppServer] = []

    def start(app, **options) -> AppServer:
        server = AppServer(app, **options)
        servers.append(server)
        return server

    try:
        yield start
    finally:
        for server in servers:
            server.stop()


@pytest.fixture
def serve_app() -> Iterator:
    """serve_app(app) starts a real server and returns it; all are stopped after the test."""
    yield from _serving()


@pytest.fixture(scope="module")
def serve_app_per_file() -> Iterator:
    """serve_app for module fixtures (one REPL shared by a file's tests): the servers are stopped
    after the file's last test."""
    yield from _serving()


@pytest.fixture
def serve_tls_app(serve_app, tmp_path) -> Callable:
    """serve_tls_app(app) serves `app` over HTTPS with a certificate of a private CA that trustme
    makes (the system's store does not trust it); the CA's PEM is written to certs/test-ca.pem
    under the test's folder, for OPTIONS (ca_file = ...)."""
    import ssl

    import trustme

    def start(app) -> AppServer:
        ca = trustme.CA()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1").configure_cert(context)
        (tmp_path / "certs").mkdir(exist_ok=True)
        ca.cert_pem.write_to_path(str(tmp_path / "certs/test-ca.pem"))
        return serve_app(app, ssl_context=context)

    return start


class RedisServer:
    """A real `redis-server` (Debian's package) on a free port of 127.0.0.1, without persistence."""

    def __init__(self, folder: str) -> None:
        import shutil
        import subprocess
        import time

        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed: run .ci/install (apt-get install redis-server)")
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", folder, "--protected-mode", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def flush(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as conn:
            conn.sendall(b"FLUSHALL\r\n")
            conn.recv(16)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except Exception:  # noqa: BLE001
                self.process.kill()
                self.process.wait()


@pytest.fixture(scope="session")
def _redis_session(tmp_path_factory) -> Iterator[RedisServer]:
    server = RedisServer(str(tmp_path_factory.mktemp("redis")))
    yield server
    server.stop()


@pytest.fixture
def redis_server(_redis_session: RedisServer) -> Iterator[RedisServer]:
    """The test run's Redis server, emptied before and after each test."""
    _redis_session.flush()
    yield _redis_session
    _redis_session.flush()


@pytest.fixture(scope="session")
def postgres() -> Iterator:
    """A private PostgreSQL cluster (Debian's server, a temporary folder, a free port, password
    authentication) for the whole run of this worker; it logs and counts every statement
    (dslc.testing.postgres). Each test uses tables of its own names, or drops what it made."""
    from dslc.testing.postgres import LocalPostgres

    server = LocalPostgres().start()
    try:
        yield server
    finally:
        server.stop()
