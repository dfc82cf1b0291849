"""The worker's event loop: one daemon thread per Python worker process, so clients and caches outlive tasks.

Spark reuses a Python worker for many tasks; every ENRICH operator of every task in the process
runs its calls on this one loop. After a fork (Spark's daemon forks workers) a new loop is
started, since the parent's thread does not exist in the child.

The loop is uvloop's when uvloop is installed (it is a dependency on Linux and macOS): its
sockets, timers and callbacks cost less CPU per call than asyncio's pure-Python selector loop,
which is what bounds throughput once ~100 calls are in flight per core (bench/RESULTS.md,
section 8). Without uvloop (Windows, or `DSLC_EVENT_LOOP=asyncio` in the workers' environment)
it is asyncio's default loop; the runtime uses nothing specific to either.
"""
from __future__ import annotations

import asyncio
import atexit
import os
import threading
from collections.abc import Callable

from dslc.runtime import run_env
from dslc.runtime.calls.http import close_all_sessions

_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_thread: threading.Thread | None = None
_loop_pid = 0

EVENT_LOOP_ENV = run_env.EVENT_LOOP.name


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """How to make the worker's loop: uvloop's when importable and not switched off by
    DSLC_EVENT_LOOP=asyncio, else asyncio's."""
    if run_env.EVENT_LOOP.get("").strip().lower() != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop
    return asyncio.new_event_loop


def worker_loop() -> asyncio.AbstractEventLoop:
    """The event loop of this Python worker process, started on first use (and after a fork)."""
    global _loop, _loop_thread, _loop_pid
    with _loop_lock:
        if _loop is not None and loop_alive():
            return _loop
        loop = loop_factory()()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=run, name="dslc-async-io", daemon=True)
        thread.start()
        ready.wait()
        _loop, _loop_thread, _loop_pid = loop, thread, os.getpid()
        return loop


def loop_alive() -> bool:
    """True when this process's loop thread is running."""
    return _loop_pid == os.getpid() and _loop_thread is not None and _loop_thread.is_alive()


def _shutdown_loop() -> None:
    """Close HTTP sessions cleanly at process exit."""
    loop = _loop
    if loop is not None and loop_alive() and loop.is_running():
        try:
            asyncio.run_coroutine_threadsafe(close_all_sessions(), loop).result(timeout=2)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


atexit.register(_shutdown_loop)
