"""The worker's event loop: one daemon thread per Python worker process, so clients and caches outlive tasks.

Spark reuses a Python worker for many tasks; every ENRICH operator of every task in the process
runs its calls on this one loop. After a fork (Spark's daemon forks workers) a new loop is
started, since the parent's thread does not exist in the child.
"""
from __future__ import annotations

import asyncio
import atexit
import os
import threading

from .enrich_functions import close_all_sessions

_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_thread: threading.Thread | None = None
_loop_pid = 0


def worker_loop() -> asyncio.AbstractEventLoop:
    """The event loop of this Python worker process, started on first use (and after a fork)."""
    global _loop, _loop_thread, _loop_pid
    with _loop_lock:
        if _loop is not None and loop_alive():
            return _loop
        loop = asyncio.new_event_loop()
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
