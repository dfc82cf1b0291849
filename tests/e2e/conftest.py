"""Session fixtures of the e2e tests that need more than local[2]: an executor Python without dslc
and a Spark standalone cluster on 127.0.0.1 (both built or started once per test run)."""
from __future__ import annotations

import pytest
from cluster_support import StandaloneCluster
from cluster_support import executor_python as build_executor_python


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


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory):
    """pyspark's Spark Connect server on a free port of 127.0.0.1; its Python workers lack dslc
    (they have pyspark's `connect` extra, which its foreachBatch worker imports)."""
    from cluster_support import CONNECT_PACKAGES, ConnectServer

    python = build_executor_python(CONNECT_PACKAGES, kind="connect")
    server = ConnectServer(tmp_path_factory.mktemp("connect"), python)
    try:
        yield server
    finally:
        server.stop()
