"""Session fixtures of the e2e tests that need more than local[2]: an executor Python without dslc,
a Spark standalone cluster and a Spark Connect server on 127.0.0.1 (each built or started once per
test run; the Connect server in the background as the first file that uses it begins)."""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from cluster_support import StandaloneCluster
from cluster_support import executor_python as build_executor_python
from shared_servers import shared_server


@pytest.fixture(scope="session")
def executor_python():
    """A Python with pyspark, pyarrow and aiohttp but not dslc (cached between runs)."""
    return build_executor_python()


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory):
    """A master and a worker started by pyspark's spark-class; stopped when the run ends."""
    cluster = StandaloneCluster(tmp_path_factory.mktemp("standalone"))
    try:
        yield cluster
    finally:
        cluster.stop()


class ConnectBoot:
    """The Connect server of this worker, started in a thread of its own when the first test of a
    file that uses it begins: its JVM's start, long beside a test's and never timed apart (how long
    depends on the machine and its load), goes on while that file's first tests, which do not need
    it, run; the first test that does waits for what is left."""

    def __init__(self, folder_factory) -> None:
        self.folder_factory = folder_factory
        self.starting: Future | None = None

    def start(self) -> Future:
        if self.starting is None:
            from cluster_support import CONNECT_PACKAGES, ConnectServer

            folder = self.folder_factory.mktemp("connect")
            pool = ThreadPoolExecutor(1, thread_name_prefix="connect-server-start")
            self.starting = pool.submit(lambda: ConnectServer(folder, build_executor_python(CONNECT_PACKAGES,
                                                                                            kind="connect")))
            pool.shutdown(wait=False)
        return self.starting

    def stop(self) -> None:
        if self.starting is not None and self.starting.exception() is None:
            self.starting.result().stop()


@pytest.fixture(scope="session")
def _connect_boot(tmp_path_factory):
    boot = ConnectBoot(tmp_path_factory)
    yield boot
    boot.stop()


@pytest.fixture(autouse=True, scope="module")
def _connect_server_starts_with_its_files(request, _connect_boot):
    """The files that share the Connect server (tests/shared_servers.py) start it as they begin."""
    if shared_server(request.path) == "connect_server":
        _connect_boot.start()


@pytest.fixture(scope="session")
def connect_server(_connect_boot):
    """pyspark's Spark Connect server on a free port of 127.0.0.1; its Python workers lack dslc
    (they have pyspark's `connect` extra, which its foreachBatch worker imports)."""
    return _connect_boot.start().result()
