"""A Python for executors without dslc, and a Spark standalone cluster on 127.0.0.1, for the e2e tests.

The executor Python holds what a cluster admin would install: a venv with the driver's versions
of pyspark, pyarrow and aiohttp and what they require, and not dslc. Its packages are links to
the driver's installed files (the same versions, byte for byte) rather than pip's copies of the
same wheels. It is cached between test runs under $DSLC_TEST_CACHE (default ~/.cache/dslc-tests)
and made again when those versions change.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

EXECUTOR_PACKAGES = ("pyspark", "pyarrow", "aiohttp")
# A Spark Connect server runs foreachBatch functions in a Python worker that is itself a Connect
# client: its Python needs pyspark's `connect` extra too (the driver's versions).
CONNECT_PACKAGES = EXECUTOR_PACKAGES + ("grpcio", "grpcio-status", "googleapis-common-protos", "zstandard",
                                        "pandas", "numpy", "protobuf",
                                        "asyncpg")   # WITH SQL and database sinks (docs/operations.md)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def executor_python(packages: tuple[str, ...] = EXECUTOR_PACKAGES, kind: str = "executor") -> Path:
    """bin/python of a venv with `packages` (the driver's versions: pyspark, pyarrow, aiohttp) but no dslc."""
    pins = [f"{name}=={importlib.metadata.version(name)}" for name in packages]
    # every pin in the name (a digest of them), so another package set is another venv, never a
    # rebuild of one that a parallel test run may be using; and the driver's environment, whose
    # files the venv links to (another checkout's .venv, perhaps deleted since, is another venv)
    digest = hashlib.sha256("\n".join([*pins, sys.prefix]).encode()).hexdigest()[:8]
    tag = f"py{sys.version_info.major}{sys.version_info.minor}-" + "-".join(p.replace("==", "") for p in pins[:3]) \
        + f"-{digest}"
    cache = Path(os.environ.get("DSLC_TEST_CACHE") or Path.home() / ".cache" / "dslc-tests")
    venv = cache / f"{kind}-{tag}"
    python = venv / "bin" / "python"
    done = venv / ".complete"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f"{kind}-{tag}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)      # parallel test workers build it once
        if not done.is_file() or done.read_text() != "\n".join(pins) + "\n":
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
            link_distributions(packages, _site_packages(python))
            done.write_text("\n".join(pins) + "\n")
    return python


def _site_packages(python: Path) -> Path:
    return Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())


def link_distributions(names: tuple[str, ...], site: Path) -> None:
    """Put `names` and everything they require (pip's closure: markers evaluated, no extras) into
    `site` as links to the driver's installed files, so the venv holds the driver's very versions.
    pip installing the same wheels took about 50 s of CPU per venv on a fresh machine (pyspark's
    wheel alone unpacks 400 MB of jars the executors' Python never reads), at the start of the
    test files that need it; links take a second. dslc is never linked: these Pythons lack it."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        dist = importlib.metadata.distribution(name)
        todo += [req.name for req in map(Requirement, dist.requires or ())
                 if req.marker is None or req.marker.evaluate({"extra": ""})]
        for top in sorted({file.parts[0] for file in dist.files or () if file.parts[0] not in ("..", "__pycache__")}):
            assert not top.startswith("dslc"), f"{name} would bring dslc into an executor's Python"
            target = site / top
            if not target.exists() and not target.is_symlink():   # a namespace (google/) is shared
                target.symlink_to(dist.locate_file(top))


def spark_class() -> Path:
    """pyspark's own launcher of Spark's JVM classes."""
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


class StandaloneCluster:
    """A Spark standalone master and one worker (2 cores) on 127.0.0.1, started with spark-class."""

    def __init__(self, folder: Path, cores: int = 2, memory: str = "2g") -> None:
        self.folder = folder
        self.port, self.master_ui, self.worker_ui = free_port(), free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.work_dir = folder / "work"
        self.processes: list[subprocess.Popen] = []
        self.logs: list[Path] = []
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1",
               "SPARK_LOG_DIR": str(folder / "logs")}
        try:
            self._start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                         str(self.port), "--webui-port", str(self.master_ui)], env, "master.log",
                        r"I have been elected leader")
            self._start(["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", str(cores),
                         "--memory", memory, "--webui-port", str(self.worker_ui), "--work-dir", str(self.work_dir),
                         self.url], env, "worker.log", r"Successfully registered with master")
        except BaseException:
            self.stop()
            raise

    def _start(self, args: list[str], env: dict, log_name: str, ready: str, timeout: float = 90) -> None:
        log = self.folder / log_name
        self.logs.append(log)
        with open(log, "wb") as out:
            process = subprocess.Popen([str(spark_class()), *args], stdout=out, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        self.processes.append(process)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace")
            if re.search(ready, text):
                return
            if process.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(f"{args[0]} did not start (waited for {ready!r}):\n{log.read_text(errors='replace')[-3000:]}")

    def stop(self) -> None:
        """Stop the worker (and its executors), then the master; never leave a JVM behind."""
        for process in reversed(self.processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
        self.processes.clear()


def _jdbc_jar() -> list[str]:
    """PostgreSQL's JDBC driver for the server's JDBC source and sink (DATABASE tests)."""
    jar = os.environ.get("DSLC_JDBC_JAR", "/usr/share/java/postgresql.jar")
    return ["--jars", jar] if Path(jar).is_file() else []


class ConnectServer:
    """pyspark's bundled Spark Connect server (sbin/start-connect-server.sh, in the foreground) on a
    free port of 127.0.0.1, running `local[2]`, its Python workers on `python`."""

    def __init__(self, folder: Path, python: Path, master: str = "local[2]") -> None:
        import pyspark

        self.folder = folder
        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        self.log = folder / "connect-server.log"
        script = Path(pyspark.__file__).parent / "sbin" / "start-connect-server.sh"
        env = {**os.environ, "SPARK_NO_DAEMONIZE": "1", "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_LOG_DIR": str(folder / "logs"), "SPARK_PID_DIR": str(folder / "pids"),
               "PYSPARK_PYTHON": str(python)}
        for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_DRIVER_PYTHON"):
            env.pop(name, None)
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [str(script), "--master", master, "--conf", f"spark.connect.grpc.binding.port={self.port}",
                 "--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", "spark.ui.enabled=false",
                 "--conf", "spark.sql.shuffle.partitions=2", "--conf", f"spark.local.dir={folder / 'local'}",
                 "--conf", "spark.python.authenticate.socketTimeout=120s",    # slow machines: foreachBatch workers
                 *_jdbc_jar()],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                cwd=folder)
        deadline = time.monotonic() + 180     # it may start beside other tests (tests/e2e/conftest.ConnectBoot)
        try:
            while time.monotonic() < deadline:
                if "Spark Connect server started at" in self.log.read_text(errors="replace"):
                    return
                if self.process.poll() is not None:
                    break
                time.sleep(0.2)
            raise RuntimeError(f"Spark Connect server did not start:\n{self.log.read_text(errors='replace')[-3000:]}")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the server and its Python workers (its whole process group)."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
