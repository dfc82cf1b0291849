"""CACHE n TTL d: a per-worker LRU+TTL cache with call coalescing, so repeated keys cost one call.

Each operator (by name) gets its own cache in the worker process, reused by every task the
worker runs. The cache and its in-flight table live on the worker's event loop and are only
touched from it, so they need no locks. Concurrent lookups of one key share a single call:
the first caller (the leader) runs it, the others await the same future. Errors are never
cached; a miss (None / []) is cached unless the operator retries misses (`cache_misses=False`).
"""
from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from dslc.runtime.config import Cache


class _Abandoned(Exception):
    """The leader of a shared call was cancelled; a follower must call itself."""


class CacheStats:
    """Hit, miss and coalesce counters of one lookup stream."""

    __slots__ = ("hits", "misses", "coalesced")

    def __init__(self) -> None:
        self.hits = 0
        self.misses = 0
        self.coalesced = 0


class TtlLruCache:
    """LRU cache of at most `size` entries, each valid for `ttl_s` seconds."""

    def __init__(self, size: int, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.size = size
        self.ttl_s = ttl_s
        self._clock = clock
        self._data: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()
        self._inflight: dict[Hashable, asyncio.Future[Any]] = {}

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: Hashable) -> tuple[bool, Any]:
        """(True, value) for a fresh entry (marked most recently used), else (False, None)."""
        item = self._data.get(key)
        if item is None:
            return False, None
        expires, value = item
        if expires <= self._clock():
            del self._data[key]
            return False, None
        self._data.move_to_end(key)
        return True, value

    def put(self, key: Hashable, value: Any) -> None:
        """Store a value, evicting the least recently used entry beyond `size`."""
        self._data[key] = (self._clock() + self.ttl_s, value)
        self._data.move_to_end(key)
        while len(self._data) > self.size:
            self._data.popitem(last=False)

    def clear(self) -> None:
        """Forget every entry (in-flight calls keep running for their waiters)."""
        self._data.clear()

    async def get_or_call(
        self,
        key: Hashable,
        call: Callable[[], Awaitable[Any]],
        stats: CacheStats,
        cacheable: Callable[[Any], bool] = lambda value: True,
    ) -> Any:
        """The cached value for `key`, or the result of one shared `call()` for all concurrent askers."""
        found, value = self.get(key)
        if found:
            stats.hits += 1
            return value
        pending = self._inflight.get(key)
        while pending is not None:
            stats.coalesced += 1
            try:
                # shield: a follower's cancellation (its own timeout) must not cancel the leader
                return await asyncio.shield(pending)
            except _Abandoned:
                stats.coalesced -= 1
                pending = self._inflight.get(key)
        stats.misses += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            value = await call()
        except BaseException as exc:
            if not future.done():
                shared = _Abandoned() if isinstance(exc, asyncio.CancelledError) else exc
                future.set_exception(shared)
                future.exception()  # mark retrieved: followers may all have gone
            raise
        else:
            if cacheable(value):
                self.put(key, value)
            future.set_result(value)
            return value
        finally:
            if self._inflight.get(key) is future:
                del self._inflight[key]


_caches: dict[tuple[int, str], TtlLruCache] = {}
_caches_lock = threading.Lock()


def cache_for(operator: str, config: Cache, call: Hashable = None) -> TtlLruCache:
    """The worker's cache of one operator calling `call`; re-created if the CACHE clause changed.

    The call (URL template or Python reference) is part of the key: two pipelines run in one
    session (tests, the REPL, notebooks) may have operators of the same name calling different things.
    """
    key = (os.getpid(), operator, call)
    with _caches_lock:
        cache = _caches.get(key)
        if cache is None or cache.size != config.size or cache.ttl_s != config.ttl_s:
            cache = _caches[key] = TtlLruCache(config.size, config.ttl_s)
        return cache


def drop_cache(operator: str, call: Hashable = None) -> None:
    """Forget the worker's cache of one operator (after a failure)."""
    with _caches_lock:
        _caches.pop((os.getpid(), operator, call), None)
