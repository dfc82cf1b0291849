"""The calls of one ENRICH operator's elements, on the loop: each admitted, started, carried on
by the pool's call tasks (`call_pool`) while it waits, under its TIMEOUT (`deadlines`), and
handed back resolved (`complete`). What an element resolves to is the resolver's (and its
policies') to decide; this module owns the time: admission before the TIMEOUT starts, the
calls in flight, latencies."""
from __future__ import annotations

import asyncio
import time
import types
from collections.abc import Callable, Coroutine
from typing import Any

from dslc.runtime.core.async_queue import ElementEntry
from dslc.runtime.core.call_pool import CallPool
from dslc.runtime.core.deadlines import Deadlines
from dslc.runtime.core.joined_calls import JoinedCalls
from dslc.runtime.core.operator import Row
from dslc.runtime.core.resolution import ElementResolver, Fail, Resolution, resume
from dslc.runtime.limits import waits
from dslc.runtime.metrics import OperatorMetrics


class Waiting:
    """An element whose call ran up to its first wait: what a call task needs to carry it on
    (its queue entry is given once the element has one)."""

    __slots__ = ("entry", "step", "waits_on", "attempts", "started", "admitted", "epoch", "waits")

    def __init__(self, step: Coroutine[Any, Any, Resolution], waits_on: Any,
                 attempts: list[int], started: float, admitted: float, epoch: int, element: waits.Waits) -> None:
        self.entry: ElementEntry | None = None
        self.step = step
        self.waits_on = waits_on
        self.attempts = attempts
        self.started = started
        self.admitted = admitted
        self.epoch = epoch
        self.waits = element        # its waits for admission (RATE, TOKENS PER MINUTE): not latency


#: The waits of an element of an operator that never waits to be let through: nothing adds to it.
NO_WAITS = waits.Waits()


class ElementCalls:
    """Starts and carries the calls of one operator's elements; `complete(entry, resolution)`
    takes each element's end (loop thread only, from `open` on)."""

    def __init__(self, resolver: ElementResolver, metrics: OperatorMetrics, timeout_s: float, capacity: int,
                 gathers: bool, complete: Callable[[ElementEntry, Resolution], None]) -> None:
        self._resolver = resolver
        self._metrics = metrics
        self._timeout_s = timeout_s
        self._complete = complete
        self.pool = CallPool(capacity, gathers, self._run, self.carry)
        self.running = 0           # calls in flight: counted from admission (RATE and ADAPTIVE waits are not calls)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._deadlines: Deadlines | None = None
        # BATCH: elements join their batches without a call task each, when nothing else needs one
        self.joined = JoinedCalls(resolver, metrics, timeout_s, self, complete) if resolver.joins_batches else None
        if self.joined is not None:
            self.hand = self.joined.start   # type: ignore[method-assign]

    def _waits_of_new_element(self) -> waits.Waits:
        """Where a new element's waits for admission are noted, from here on in this task: its
        own when the operator may wait (RATE, a MODEL's limits), else the one that stays 0."""
        if not self._resolver.may_wait:
            return NO_WAITS
        element = waits.Waits()
        waits.enter(element)
        return element

    def open(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._deadlines = Deadlines(loop)
        if self.joined is not None:
            self.joined.open(loop)

    @property
    def busy(self) -> bool:
        """Calls are in flight, or elements wait to be taken."""
        return self.pool.busy or (self.joined is not None and self.joined.busy)

    def hand(self, element: ElementEntry | Waiting) -> None:
        """Hand an element in the queue (or a call that waits) to the call tasks (with `joined`:
        an element in the queue to its batch; the operator then never starts a call itself)."""
        self.pool.hand(element, self._loop)

    async def cancel_all(self) -> None:
        """End every call task, cancelling the calls in flight (dispose)."""
        await self.pool.cancel_all()
        if self.joined is not None:
            await self.joined.cancel_all()
        if self._deadlines is not None:
            self._deadlines.clear()

    async def _run(self, entry: ElementEntry, task: asyncio.Task[None]) -> None:
        """The whole life of one element in call task `task`: its admission, its calls under
        TIMEOUT (whose deadline cancels `task`), and its answer; always completes its entry
        unless cancelled by dispose."""
        started = time.perf_counter()
        resolver = self._resolver
        element = self._waits_of_new_element()
        try:
            epoch = 0
            if resolver.admits:
                self.pool.hand_on()            # admission may wait
                await resolver.admit(entry.payload)
                epoch = resolver.epoch()
            first = self.first_step(entry.payload, started, epoch, element)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - a bug here must still surface in the chain
            self._metrics.latency.record(time.perf_counter() - started - element.seconds)
            first = Fail(resolver.failure(entry.payload, exc))
        if type(first) is Waiting:
            first.entry = entry
            await self.carry(first, task)
        else:
            self._complete(entry, first)

    def first_step(self, row: Row, started: float, epoch: int, element: waits.Waits | None = None) -> Resolution | Waiting:
        """Start the element's call (it is admitted) and run it up to its first wait: its
        resolution if it answered without waiting, else what a call task needs to carry it on
        (the caller gives that its queue entry). `element`: its waits so far (admission's)."""
        resolver = self._resolver
        if element is None:
            element = self._waits_of_new_element()
        attempts = [0]
        self.running += 1
        self._metrics.in_flight(self.running)
        admitted = self._loop.time()
        try:
            step = resolver.start(row, attempts)
            if type(step) is not types.CoroutineType:
                resolution = step          # answered without waiting: no TIMEOUT to watch
            else:
                try:
                    return Waiting(step, step.send(None), attempts, started, admitted, epoch, element)
                except StopIteration as answered:
                    resolution = answered.value
        except asyncio.CancelledError:
            self.running -= 1
            raise
        except BaseException as exc:  # noqa: BLE001 - a bug here must still surface in the chain
            resolution = Fail(resolver.failure(row, exc))
        self.running -= 1
        self._metrics.latency.record(time.perf_counter() - started - element.seconds)
        return resolution

    async def carry(self, waiting: Waiting, task: asyncio.Task[None]) -> None:
        """Carry a call that waits on to its answer in call task `task`, under its TIMEOUT."""
        self.pool.hand_on()
        resolver = self._resolver
        entry = waiting.entry
        assert entry is not None, "a waiting call is carried on once its element is in the queue"
        row = entry.payload
        deadline = self._deadlines.arm(task, waiting.admitted + self._timeout_s)
        if waiting.waits is not NO_WAITS:
            waits.enter(waiting.waits)      # a later attempt's waits are this element's too
        try:
            try:
                resolution = await resume(waiting.step, waiting.waits_on)
            finally:
                deadline.done = True
                self.running -= 1
        except asyncio.CancelledError:
            if not deadline.expired:
                raise                      # cancelled by dispose, not by the TIMEOUT
            if task.uncancel():
                raise                      # dispose cancelled it too: the TIMEOUT's cancel was not the only one
            try:
                resolution = await resolver.expired(row, waiting.attempts[0], waiting.epoch)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # noqa: BLE001
                resolution = Fail(resolver.failure(row, exc))
        except BaseException as exc:  # noqa: BLE001 - a bug here must still surface in the chain
            resolution = Fail(resolver.failure(row, exc))
        finally:
            self._metrics.latency.record(time.perf_counter() - waiting.started - waiting.waits.seconds)
        self._complete(entry, resolution)
