"""Fixtures shared by every test: one real SparkSession (local[2]) per run, and a real aiohttp
server on 127.0.0.1 for enrichment services."""
from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test run; generated jobs reuse it through getOrCreate()."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("dslc-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.log.level", "WARN")
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
        """Stop serving (closing the port); again is a no-op."""
        if self.loop.is_closed() or not self.loop.is_running():
            return
        try:
            asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        except TimeoutError:     # a client's idle keep-alive connection held the shutdown up
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)


@pytest.fixture
def serve_app() -> Iterator:
    """serve_app(app) starts a real server and returns it; all are stopped after the test."""
    servers: list[AppServer] = []

    def start(app, **options) -> AppServer:
        server = AppServer(app, **options)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
