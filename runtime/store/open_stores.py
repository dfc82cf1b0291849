"""Which backend a location names, and the worker's open stores (one per location, process and
loop), apart from base.py so the backends can import the interface without a circle."""
from __future__ import annotations

import asyncio
import os
import threading

from dslc.runtime import secrets as S

from .base import AnswerStore, is_redis

#: The values of the `${NAME}` secrets of a location as written, given by the operators that use
#: it (`use_secrets`): an executor has no environment to read them from.
_secrets: dict[str, S.Secrets] = {}


def use_secrets(location: str, secrets: S.Secrets | None) -> None:
    """Remember the values that fill `location`'s `${NAME}` secrets in this process."""
    if secrets and S.names_in(location):
        _secrets[location] = secrets


def filled(location: str) -> str:
    """`location` with its `${NAME}` secrets filled: from the values an operator gave, else read
    as the job's driver reads them (the secrets file, the environment; MissingSecret if unset)."""
    names = S.names_in(location)
    if not names:
        return location
    known = _secrets.get(location)
    values = known if known is not None and all(n in known for n in names) else S.read(names)
    return values.fill(location)


def make_store(location: str) -> AnswerStore:
    """A new, unopened store for a location: a file path (SQLite) or `redis://host:port/db`
    (its `${NAME}` secrets filled here; messages show it as written, its password masked)."""
    if is_redis(location):
        from .redis import RedisStore
        return RedisStore(location, filled(location))
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
