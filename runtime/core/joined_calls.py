"""BATCH n without a task per element: the elements of an operator whose call gathers are handed
to its batches directly (`EnrichCall.join`), and resolved by the batch's answer, on the loop.

Through `call_pool` every element would get a call task, a coroutine of its attempts and a
future to await its batch by: about 80 % of a BATCH 200 SQL lookup's loop time went to that, not
to the database (bench/RESULTS.md section 16). Here an element's first attempt is a `join` of
its row: the batch's answer calls the element back (`_Joined.settle`), which becomes its rows,
or its miss, at once (`ElementResolver.joined`). Only what is rare pays for a task: an element
whose attempt failed, or missed ON MISS RETRY, goes on through the resolver's attempt loop
(RETRY, its BACKOFF, ON ERROR; a retry joins a later batch as an awaited call), and an element
whose TIMEOUT ran out gets its TIMEOUT outcome (a user `timeout(row)` may be async).

The resolver says when this applies (`ElementResolver.joins_batches`): nothing but RETRY's count
comes around a first attempt (no admission, CACHE, ADAPTIVE, ON OUTAGE or refusal guard), and
the call passes `join` on (STORE does not: it must see each answer). CAPACITY still counts
elements (the queue), TIMEOUT runs from an element's start, as with call tasks; one timer
watches every element's deadline (all have the same TIMEOUT, so they come in order).
"""
from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable, Coroutine
from typing import Any

from dslc.runtime.core.async_queue import ElementEntry
from dslc.runtime.core.resolution import ElementResolver, Fail, Resolution, raising, returning
from dslc.runtime.metrics import OperatorMetrics


class _Joined:
    """One element in a batch: its queue entry, when it started, its deadline, its place."""

    __slots__ = ("owner", "entry", "started", "at", "ticket", "task", "done", "expired", "attempts")

    def __init__(self, owner: JoinedCalls, entry: ElementEntry, started: float, at: float) -> None:
        self.owner = owner
        self.entry = entry
        self.started = started
        self.at = at
        self.ticket: Any = None                        # its place in a batch (`join`'s)
        self.task: asyncio.Task[None] | None = None    # its attempt loop or TIMEOUT outcome, if any
        self.done = False
        self.expired = False
        self.attempts = [1]

    def settle(self, value: Any, error: BaseException | None) -> None:
        """The batch's answer for this element (its waiter of the slot)."""
        self.owner.answered(self, value, error)


class JoinedCalls:
    """Starts each element of one operator in a batch and resolves it (loop thread only);
    `complete(entry, resolution)` takes each element's end. `running` is shared with the
    operator's other calls (`ElementCalls`): `counter.running` counts calls in flight."""

    def __init__(self, resolver: ElementResolver, metrics: OperatorMetrics, timeout_s: float,
                 counter: Any, complete: Callable[[ElementEntry, Resolution], None]) -> None:
        call = resolver.call
        self._join, self._leave = call.join, call.leave
        self._resolver = resolver
        self._metrics = metrics
        self._timeout_s = timeout_s
        self._counter = counter
        self._complete = complete
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watched: collections.deque[_Joined] = collections.deque()   # in the order of their deadlines
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.live = 0

    def open(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    @property
    def busy(self) -> bool:
        return self.live > 0

    def start(self, entry: ElementEntry) -> None:
        """The element's first attempt: its row joins the next batch (counted as a call in flight)."""
        loop = self._loop
        assert loop is not None
        counter = self._counter
        counter.running += 1
        self._metrics.in_flight(counter.running)
        self.live += 1
        element = _Joined(self, entry, time.perf_counter(), loop.time() + self._timeout_s)
        watched = self._watched
        while watched and watched[0].done:   # keep the watch as short as the elements in flight
            watched.popleft()
        watched.append(element)
        if self._timer is None:
            self._timer = loop.call_at(element.at, self._reap)
        try:
            element.ticket = self._join(entry.payload, element.settle)
        except Exception as exc:  # noqa: BLE001 - its attempt failed: the resolver's policies decide
            self._go_on(element, raising(exc))

    def answered(self, element: _Joined, value: Any, error: BaseException | None) -> None:
        """The element's batch answered (`value`) or failed (`error`)."""
        if element.done or element.expired:
            return
        element.ticket = None
        if error is None:
            try:
                resolution = self._resolver.joined(element.entry.payload, value, element.started)
            except Exception as exc:  # noqa: BLE001 - a bad answer: ON ERROR (or RETRY) decides
                self._go_on(element, raising(exc))
                return
            if resolution is None:             # a miss RETRY may send again
                self._go_on(element, returning(value))
            else:
                self._finish(element, resolution)
        elif not isinstance(error, asyncio.CancelledError):   # cancelled: the operator is disposed
            self._go_on(element, raising(error))

    def _finish(self, element: _Joined, resolution: Resolution) -> None:
        element.done = True
        self.live -= 1
        self._counter.running -= 1
        self._metrics.latency.record(time.perf_counter() - element.started)
        self._complete(element.entry, resolution)

    # ----------------------------------------------------------------- the rare paths, in a task

    def _go_on(self, element: _Joined, first: Any) -> None:
        """The attempt loop decides the element from its first attempt's outcome `first`."""
        self._spawn(element, self._attempts(element, first))

    def _spawn(self, element: _Joined, work: Coroutine[Any, Any, None]) -> None:
        assert self._loop is not None
        element.task = task = self._loop.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _attempts(self, element: _Joined, first: Any) -> None:
        resolver, row = self._resolver, element.entry.payload
        try:
            resolution = await resolver.attempt(row, element.attempts, first)
        except asyncio.CancelledError:
            if not element.expired:
                raise                          # cancelled by dispose, not by the TIMEOUT
            if asyncio.current_task().uncancel():  # type: ignore[union-attr]
                raise                          # dispose cancelled it too: the TIMEOUT's cancel was not the only one
            resolution = await self._outcome(element)
        except BaseException as exc:  # noqa: BLE001 - a bug here must still surface in the chain
            resolution = Fail(resolver.failure(row, exc))
        self._finish(element, resolution)

    async def _timed_out(self, element: _Joined) -> None:
        self._finish(element, await self._outcome(element))

    async def _outcome(self, element: _Joined) -> Resolution:
        """The TIMEOUT outcome of an element whose TIMEOUT ran out."""
        resolver, row = self._resolver, element.entry.payload
        try:
            return await resolver.expired(row, element.attempts[0], 0)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001
            return Fail(resolver.failure(row, exc))

    def _reap(self) -> None:
        """Every element whose TIMEOUT ran out leaves its batch (or its attempt loop is cut) and
        gets its TIMEOUT outcome; wake up again at the next deadline."""
        loop = self._loop
        assert loop is not None
        now = loop.time()
        watched = self._watched
        while watched and (watched[0].done or watched[0].at <= now):
            element = watched.popleft()
            if element.done or element.expired:
                continue
            element.expired = True
            if element.task is not None:
                element.task.cancel()
            else:
                if element.ticket is not None:
                    self._leave(element.ticket, element.settle)
                    element.ticket = None
                self._spawn(element, self._timed_out(element))
        self._timer = loop.call_at(watched[0].at, self._reap) if watched else None

    async def cancel_all(self) -> None:
        """Give every element's place up and end their tasks (dispose)."""
        for element in self._watched:
            if not element.done and element.ticket is not None:
                self._leave(element.ticket, element.settle)
            element.done = True
        self._watched.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2)
        self._counter.running -= self.live   # as the per-element path: a cancelled call is no longer in flight
        self.live = 0
