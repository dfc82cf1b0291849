"""ENRICH WITH PYTHON: a user function or class instance; async ones are awaited on the worker
loop, plain ones run in a per-operator thread pool kept by the worker process."""
from __future__ import annotations

import asyncio
import atexit
import inspect
import os
import threading
from collections.abc import Coroutine, Hashable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dslc.runtime import user_code
from dslc.runtime.config import Enrich, PythonCall
from dslc.runtime.core.operator import Row

from .base import KEY_JSON, EnrichCall, check_batch_answer, check_result_types, hashable_key

_pools: dict[tuple[int, str], ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool(name: str, size: int) -> ThreadPoolExecutor:
    key = (os.getpid(), name)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None or pool._max_workers < size:  # noqa: SLF001 - stdlib attribute
            pool = _pools[key] = ThreadPoolExecutor(max_workers=size, thread_name_prefix=f"dslc-enrich-{name}")
        return pool


def sync_threads(capacity: int) -> int:
    """Threads for a plain-def ENRICH function: CAPACITY for the calls in flight, and as many
    again for calls that outlived their TIMEOUT. A thread cannot be interrupted: such a call runs
    on, its answer discarded, but the operator has freed its slot, so the next element needs a
    thread of its own. Beyond CAPACITY stuck calls, new calls wait for a thread (bounded threads
    rather than one leaked per hung call)."""
    return 2 * capacity


def _drop_pool(name: str) -> None:
    with _pools_lock:
        pool = _pools.pop((os.getpid(), name), None)
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


class PythonEnrichCall(EnrichCall):
    """A user function or class instance; async ones are awaited, plain ones use a thread pool."""

    def __init__(self, config: Enrich) -> None:
        assert isinstance(config.call, PythonCall)
        self.config = config
        self.target: Any = None
        self._fn: Any = None
        self._is_async = False
        self._opened = False

    def open(self) -> None:
        self.target = user_code.resolve(self.config.call)
        fn = self.target if inspect.isfunction(self.target) or inspect.ismethod(self.target) else None
        if fn is None:
            fn = getattr(self.target, "__call__", None)  # noqa: B004 - instance of a class
            if fn is None:
                raise user_code.UserCodeError(f"'{self.config.call.ref}' is not callable")
            hook = getattr(self.target, "timeout", None)
            self.timeout_handler = hook if callable(hook) else None
        self._fn = fn
        self._is_async = self.answers_at_once = inspect.iscoroutinefunction(fn)
        user_code.lifecycle(self.target, "open")
        self._opened = True

    def close(self) -> None:
        if self._opened:
            self._opened = False
            user_code.lifecycle(self.target, "close")

    def cache_key(self, row: Row) -> Hashable | None:
        return hashable_key(tuple(row.items()))

    def request_key(self, row: Row) -> str | None:
        """The function's reference and the row it is given."""
        try:
            return KEY_JSON.encode([self.config.call.ref, list(row.items())])
        except (TypeError, ValueError):
            return None

    def start(self, row: Row) -> Coroutine[Any, Any, Any]:
        """An async function's own coroutine, on a copy of the row (one frame, not two)."""
        return self._fn(dict(row)) if self._is_async else self(row)

    def finish(self, value: Any) -> Any:
        return check_result_types(value, self.result_check) if self._is_async else value

    async def __call__(self, row: Row) -> Any:
        arg = dict(row)  # the user may mutate it; the operator keeps the original
        if self._is_async:
            return check_result_types(await self._fn(arg), self.result_check)
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(_pool(self.config.name, sync_threads(self.config.capacity)),
                                            self._fn, arg)
        if inspect.isawaitable(result):
            result = await result
        return check_result_types(result, self.result_check)

    async def call_batch(self, rows: list[Row]) -> list[Any]:
        """BATCH: the function takes the list of rows and returns a list of as many answers."""
        arg = [dict(row) for row in rows]
        if self._is_async:
            answer = await self._fn(arg)
        else:
            loop = asyncio.get_running_loop()
            answer = await loop.run_in_executor(_pool(self.config.name, sync_threads(self.config.capacity)),
                                                self._fn, arg)
            if inspect.isawaitable(answer):
                answer = await answer
        return check_batch_answer(answer, len(rows))

    async def aclose_clients(self) -> None:
        _drop_pool(self.config.name)


def _close_at_exit() -> None:
    """Close pools at process exit (sessions are closed by the worker loop's own hook)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.shutdown(wait=False, cancel_futures=True)


atexit.register(_close_at_exit)
