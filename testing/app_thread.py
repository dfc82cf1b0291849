"""An aiohttp application served on 127.0.0.1 by its own event loop in a daemon thread: the test
and benchmark services that must share the caller's process (their counters are read directly).
One definition for the OpenAI-compatible service (openai_service.py) and the bench's services."""
from __future__ import annotations

import asyncio
import socket
import threading

from aiohttp import web


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class AppInThread:
    """Serves `app` on 127.0.0.1:`port` (a free one when 0) until `stop()`."""

    def __init__(self, app: web.Application, port: int = 0, name: str = "app-in-thread") -> None:
        self.port = port or free_port()
        self.loop = asyncio.new_event_loop()
        self.runner = web.AppRunner(app, access_log=None)
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(self.runner.setup())
            self.loop.run_until_complete(web.TCPSite(self.runner, "127.0.0.1", self.port).start())
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=serve, name=name, daemon=True)
        self.thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"{name}: the service did not start on 127.0.0.1:{self.port}")

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
