"""Fixtures of the runtime tests; the helpers they use live in runtime_support.py."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from runtime_support import Collector, FaultServer, start_server, stop_server


@pytest.fixture(scope="session")
def _fault_server_session() -> Iterator[FaultServer]:
    server = FaultServer()
    handles = start_server(server)
    yield server
    stop_server(*handles)


@pytest.fixture
def fault_server(_fault_server_session: FaultServer) -> Iterator[FaultServer]:
    """The shared test server, with counters and scripts reset for this test."""
    _fault_server_session.reset_counters()
    yield _fault_server_session
    _fault_server_session.reset_counters()


@pytest.fixture
def collector() -> Collector:
    """A fresh recording Output."""
    return Collector()


@pytest.fixture(params=["sqlite", "redis"])
def location(request, tmp_path):
    """An answer store's location on each backend: an SQLite file, the suite's Redis."""
    if request.param == "sqlite":
        return str(tmp_path / "answers.db")
    return request.getfixturevalue("redis_server").url(0)
