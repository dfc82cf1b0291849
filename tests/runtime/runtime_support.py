"""Helpers of the runtime tests (imported by name: pytest puts this folder on sys.path): a real
aiohttp server with injectable faults, a recording Output and an operator driver.

The server runs on its own event loop in a daemon thread, on 127.0.0.1 and a random port.
`GET /kv/{key}` answers `{"key": key, "value": "v-<key>", ...query}` unless a fault applies:
- per key, a script of `Reply`s consumed one per request (`server.script("k", Reply(status=503), Reply())`),
- otherwise `server.default`, overridable per request with query parameters
  `delay_ms`, `status`, `reset=1`, `hang=1`, `body=<raw text>`.
It counts total requests, requests per key, concurrent requests (and their maximum), and keeps
every raw request path (to check URL encoding).
"""
from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Reply:
    """How the server answers one request."""

    delay_ms: float = 0.0
    status: int = 200
    body: Any = None          # JSON-able value, or a str sent raw; None -> the default object
    reset: bool = False       # abort the connection with a TCP RST instead of answering
    hang: bool = False        # never answer (until the client goes away)


class FaultServer:
    """State and control of the test server (read from the test thread, written on its loop)."""

    def __init__(self) -> None:
        self.port = 0
        self.default = Reply()
        self._scripts: dict[str, list[Reply]] = {}
        self._lock = threading.Lock()
        self.reset_counters()

    @property
    def base(self) -> str:
        """http://127.0.0.1:PORT"""
        return f"http://127.0.0.1:{self.port}"

    def url(self, template: str = "/kv/{id}") -> str:
        """A URL template on this server."""
        return self.base + template

    def reset_counters(self) -> None:
        """Forget counts, scripts and paths; back to the default reply."""
        with getattr(self, "_lock", threading.Lock()):
            self.total = 0
            self.in_flight = 0
            self.max_in_flight = 0
            self.by_key: Counter[str] = Counter()
            self.raw_paths: list[str] = []
            self.keys: list[str] = []
            self.started: dict[str, float] = {}
            self.bodies: list[Any] = []            # JSON bodies of POST requests, in arrival order
            self.rejected = 0                      # 429s of /limited
            self._scripts = {}
        self.default = Reply()

    def script(self, key: str, *replies: Reply) -> None:
        """Answer the next requests for `key` with these replies, in order."""
        with self._lock:
            self._scripts.setdefault(key, []).extend(replies)

    def _next_reply(self, key: str, query: dict[str, str]) -> Reply:
        with self._lock:
            script = self._scripts.get(key)
            if script:
                return script.pop(0)
        reply = self.default
        if query:
            reply = Reply(
                delay_ms=float(query.get("delay_ms", reply.delay_ms)),
                status=int(query.get("status", reply.status)),
                body=query.get("body", reply.body),
                reset=query.get("reset") == "1" or reply.reset,
                hang=query.get("hang") == "1" or reply.hang,
            )
        return reply

    async def handle(self, request: web.Request) -> web.StreamResponse:
        key = request.match_info["key"]
        with self._lock:
            self.total += 1
            self.by_key[key] += 1
            self.keys.append(key)
            self.raw_paths.append(request.raw_path)
            self.started.setdefault(key, time.monotonic())
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            query = {k: v for k, v in request.query.items()}
            reply = self._next_reply(key, query)
            if reply.delay_ms:
                await asyncio.sleep(reply.delay_ms / 1000.0)
            if reply.hang:
                await asyncio.sleep(3600)
            if reply.reset:
                transport = request.transport
                if transport is not None:
                    sock = transport.get_extra_info("socket")
                    if sock is not None:
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    transport.abort()
                raise asyncio.CancelledError()
            if isinstance(reply.body, str):
                return web.Response(status=reply.status, text=reply.body, content_type="text/plain")
            body = reply.body if reply.body is not None else {"key": key, "value": f"v-{key}", **query}
            return web.Response(status=reply.status, text=json.dumps(body), content_type="application/json")
        finally:
            with self._lock:
                self.in_flight -= 1


async def handle_post(server: FaultServer, request: web.Request) -> web.StreamResponse:
    """`POST /post/{key}`: a JSON object answers `{"value": "p-<id>", "got": <body>}`; a JSON
    array (a batch) answers one item per element: `{"value": "p-<id>"}`, or null when the
    element has `"miss": true`. Faults (status, delay) come from the key's script as for GET."""
    key = request.match_info["key"]
    body = await request.json()
    with server._lock:  # noqa: SLF001
        server.total += 1
        server.by_key[key] += 1
        server.bodies.append(body)
        server.in_flight += 1
        server.max_in_flight = max(server.max_in_flight, server.in_flight)
    try:
        reply = server._next_reply(key, dict(request.query))  # noqa: SLF001
        if reply.delay_ms:
            await asyncio.sleep(reply.delay_ms / 1000.0)
        if reply.status != 200:
            return web.Response(status=reply.status, text="scripted", content_type="text/plain")
        if isinstance(body, list):
            answer: Any = [None if item.get("miss") else {"value": f"p-{item.get('id')}"} for item in body]
        else:
            answer = {"value": f"p-{body.get('id')}", "got": body}
        return web.Response(text=json.dumps(answer), content_type="application/json")
    finally:
        with server._lock:  # noqa: SLF001
            server.in_flight -= 1


async def handle_limited(server: FaultServer, request: web.Request) -> web.StreamResponse:
    """`GET /limited/{key}?limit=L&delay_ms=D[&retry_after=S]`: a service with a hard concurrency
    limit: above L requests at once it answers 429 at once (with Retry-After: S when given)."""
    limit = int(request.query.get("limit", "4"))
    with server._lock:  # noqa: SLF001
        server.total += 1
        if server.in_flight >= limit:
            server.rejected += 1
            rejected = True
        else:
            rejected = False
            server.in_flight += 1
            server.max_in_flight = max(server.max_in_flight, server.in_flight)
    if rejected:
        headers = {"Retry-After": request.query["retry_after"]} if "retry_after" in request.query else {}
        return web.Response(status=429, text="busy", headers=headers)
    try:
        await asyncio.sleep(float(request.query.get("delay_ms", "10")) / 1000.0)
        return web.json_response({"value": f"v-{request.match_info['key']}"})
    finally:
        with server._lock:  # noqa: SLF001
            server.in_flight -= 1


def start_server(server: FaultServer) -> tuple[asyncio.AbstractEventLoop, web.AppRunner, threading.Thread]:
    """Run the server's app on a new loop in a daemon thread; returns when it listens."""
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_get("/kv/{key:.*}", server.handle)
    async def post(request: web.Request) -> web.StreamResponse:
        return await handle_post(server, request)

    app.router.add_post("/post/{key}", post)

    async def limited(request: web.Request) -> web.StreamResponse:
        return await handle_limited(server, request)

    app.router.add_get("/limited/{key}", limited)
    # handler_cancellation: a handler stops (and leaves in_flight) when its client goes away
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        server.port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001 - port 0 -> actual port
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, name="fault-server", daemon=True)
    thread.start()
    started.wait(10)
    return loop, runner, thread


def stop_server(loop: asyncio.AbstractEventLoop, runner: web.AppRunner, thread: threading.Thread) -> None:
    """Shut the server down."""
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    if not thread.is_alive():
        loop.close()


class Collector:
    """An Output that records rows, watermarks and dead letters, and their interleaving."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.watermarks: list[float] = []
        self.dead_letters: list[dict[str, Any]] = []
        self.events: list[tuple[str, Any]] = []
        self.threads: set[int] = set()

    def emit(self, row: dict[str, Any]) -> None:
        self.threads.add(threading.get_ident())
        self.rows.append(row)
        self.events.append(("row", row))

    def emit_watermark(self, watermark: Any) -> None:
        self.threads.add(threading.get_ident())
        self.watermarks.append(watermark.timestamp)
        self.events.append(("wm", watermark.timestamp))

    def emit_dead_letter(self, letter: dict[str, Any]) -> None:
        self.threads.add(threading.get_ident())
        self.dead_letters.append(letter)
        self.events.append(("dl", letter))


@contextmanager
def serving(path: str, handler: Callable[[web.Request], Awaitable[web.Response]]) -> Iterator[str]:
    """A one-route service on 127.0.0.1 while the block runs: POST `path` -> `handler`; the base
    URL (`http://127.0.0.1:PORT/v1`). For an answer no other test service gives (a fault)."""
    from dslc.testing.app_thread import AppInThread

    app = web.Application()
    app.router.add_post(path, handler)
    running = AppInThread(app, name=f"serving {path}")
    try:
        yield f"http://127.0.0.1:{running.port}/v1"
    finally:
        running.stop()


def run_operator(config: Any, items: list[Any], out: Collector | None = None,
                 on_loop: bool = True) -> tuple[Any, Collector]:
    """Drive one EnrichOperator through its whole lifecycle: open, feed rows (dicts) and
    watermarks (floats), finish, close, and dispose always. As in a chain (`on_loop`), the
    elements go in on the worker loop; else they go in from this thread, which blocks while
    the queue is full."""
    from dslc.runtime.core.async_operator import EnrichOperator
    from dslc.runtime.core.loop_chain import LoopDriver
    from dslc.runtime.core.operator import Watermark

    out = out or Collector()
    op = EnrichOperator(config)
    driver = LoopDriver([op]) if on_loop else None
    elements = [item if isinstance(item, dict) else Watermark(item) for item in items]
    op.open(out)
    try:
        if driver is not None:
            driver.call(driver.chunk(elements))
            driver.call(driver.finish())
        else:
            for element in elements:
                if isinstance(element, dict):
                    op.process_element(element)
                else:
                    op.process_watermark(element)
            op.finish()
        op.close()
    finally:
        op.dispose()
    return op, out



def over_rate(times: list[float], per_second: float, slack: float = 0.1,
              drain_s: float = 0.1) -> list[tuple[float, int, float]]:
    """The sliding one-second windows of arrival `times` (seconds) holding more calls than a
    schedule of `per_second` allows: (start, calls, allowed) each; empty when none.

    A schedule of one slot every 1/per_second allows per_second + 1 calls in a second; `slack`
    (a share of the rate) covers a call's start after its slot on a quiet machine (store round
    trip, loop wake-up, the request: milliseconds). On a loaded machine the test process or its
    store may stall: nothing arrives, and the calls whose slots fell in the stall arrive together
    when it ends (within `drain_s`). So a window also allows per_second calls for each second of
    silence the service saw (a gap between arrivals beyond two slots) that ended in the window or
    up to `drain_s` before it, and no more: a schedule that overruns the rate without such a
    silence still fails."""
    import bisect

    ordered = sorted(times)
    ends = ordered[1:]
    gaps = [max(0.0, b - a - 2 / per_second) for a, b in zip(ordered, ordered[1:])]
    over = []
    for first, start in enumerate(ordered):
        last = bisect.bisect_left(ordered, start + 1.0)
        silence = sum(gaps[bisect.bisect_left(ends, start - drain_s):bisect.bisect_left(ends, start + 1.0)])
        calls = last - first
        allowed = per_second * (1.0 + slack + silence) + 1
        if calls > allowed:
            over.append((start, calls, allowed))
    return over
