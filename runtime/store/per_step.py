"""Requests made in one step of the event loop, sent to the answer store as one request.

The async operator starts a burst of elements in one loop step (up to CAPACITY); each asks the
store about its key. `PerStep` gathers what is asked until the step ends and sends it as one
batch (one SQLite statement, one Redis pipeline), so the store costs a round trip per burst, not
per element.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

A = TypeVar("A")
R = TypeVar("R")


class PerStep(Generic[A, R]):
    """`self(arg)` is a future of `send([args of this step])[i]` (loop thread only)."""

    def __init__(self, send: Callable[[list[A]], Awaitable[list[R]]], quiet: bool = False) -> None:
        self._send = send
        self._quiet = quiet          # nobody awaits the answers (releases): errors are dropped
        self._pending: list[tuple[A, asyncio.Future[R]]] = []
        self._scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, arg: A) -> asyncio.Future[R]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._pending.append((arg, future))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        self._scheduled = False
        items, self._pending = self._pending, []
        task = asyncio.ensure_future(self._deliver(items))
        self._tasks.add(task)               # keep it alive until it is done
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, items: list[tuple[A, asyncio.Future[R]]]) -> None:
        try:
            results = await self._send([arg for arg, _ in items])
        except BaseException as exc:  # noqa: BLE001 - every asker gets the store's error
            for _, future in items:
                if not future.done():
                    future.set_exception(exc)
                    if self._quiet:
                        future.exception()
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        for (_, future), result in zip(items, results):
            if not future.done():          # its asker may have given up (its TIMEOUT)
                future.set_result(result)

    async def drain(self) -> None:
        """Wait until everything asked so far has been sent and answered."""
        while self._pending or self._tasks:
            if self._pending:
                await asyncio.sleep(0)
            else:
                await asyncio.wait(list(self._tasks))


def unique(items: list[Any]) -> list[Any]:
    """Items without repeats, in order."""
    return list(dict.fromkeys(items))
