"""Which backend a location names, and the worker's open stores (one per location, process and
loop), apart from base.py so the backends can import the interface without a circle."""
from __future__ import annotations

import asyncio
import os
import threading

from .base import AnswerStore, is_redis


def make_store(location: str) -> AnswerStore:
    """A new, unopened store for a location: a file path (SQLite) or `redis://host:port/db`."""
    if is_redis(location):
        from .redis import RedisStore
        return RedisStore(location)
    from .sqlite import SqliteStore
    return SqliteStore(location)


_stores: dict[tuple[int, int, str], tuple[AnswerStore, asyncio.Lock]] = {}
_stores_lock = threading.Lock()


async def store_for(location: str) -> AnswerStore:
    """The worker's open store for a location on the running loop (opened on first use and shared
    by every operator and task of the process)."""
    loop = asyncio.get_running_loop()
    key = (os.getpid(), id(loop), location)
    with _stores_lock:
        entry = _stores.get(key)
        if entry is None:
            entry = _stores[key] = (make_store(location), asyncio.Lock())
    store, lock = entry
    if not getattr(store, "_opened", False):
        async with lock:
            if not getattr(store, "_opened", False):
                await store.open()
                store._opened = True   # type: ignore[attr-defined]
    return store


async def check_location(location: str) -> None:
    """Open a store once and check it (the driver, before any call); raises StoreError."""
    store = make_store(location)
    try:
        await store.open(check=True)
    finally:
        await store.close()
