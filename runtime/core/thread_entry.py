"""An ENRICH operator driven from another thread: a thin adapter over its one driver, the loop's.

Spark's chains drive an ENRICH on the worker loop (loop_chain.py). A caller on another thread
(a test, a benchmark, an embedding) gets the same operator through this adapter: the elements it
hands over are taken by the loop in bursts (one cross-thread wake-up per burst, not per row) and
go in exactly as a chain's do; what leaves is collected on the loop, in order, and emitted, or
raised (an element's failure), in the caller's thread at its next call. The caller blocks while
the operator holds a backlog (its queue is full) or CAPACITY elements wait to be taken, and
`finish` waits until every element has left.
"""
from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import Callable
from typing import Any

from dslc.runtime.core.operator import Output, Row, Watermark
from dslc.runtime.core.worker_loop import loop_alive


def _raise(error: BaseException) -> None:
    raise error


class _Collected:
    """The operator's output on the loop: each emission kept with where it goes."""

    __slots__ = ("_out", "_to")

    def __init__(self, out: collections.deque[tuple[Callable[[Any], None], Any]], to: Output) -> None:
        self._out = out
        self._to = to

    def emit(self, row: Row) -> None:
        self._out.append((self._to.emit, row))

    def emit_watermark(self, watermark: Watermark) -> None:
        self._out.append((self._to.emit_watermark, watermark))

    def emit_dead_letter(self, letter: Row) -> None:
        self._out.append((self._to.emit_dead_letter, letter))


class ThreadEntry:
    """Drives `operator` (an EnrichOperator, already `run_on_loop(self.progress)`) on `loop`
    for a caller on another thread, emitting to `output` in that thread. On the loop one driver
    task does what a chain's LoopDriver does: elements go in, and what may leave leaves, in a
    task (a call started at once runs in it), never in a callback."""

    def __init__(self, operator: Any, output: Output, loop: asyncio.AbstractEventLoop) -> None:
        self._op = operator
        self._loop = loop
        self._handed: collections.deque[Row | Watermark] = collections.deque()   # not yet taken
        self._out: collections.deque[tuple[Callable[[Any], None], Any]] = collections.deque()
        self.collector = _Collected(self._out, output)
        self._cond = threading.Condition()
        self._waiting = False      # the caller waits on `_cond`: the loop notifies it
        self._scheduled = False    # the driver task was woken for the elements handed over
        self._ending = False       # `finish` was called: end the input once every element is in
        self._failed = False
        self._wake_up: asyncio.Future[None] | None = None   # what the parked driver task awaits
        self._driver = asyncio.run_coroutine_threadsafe(self._drive(), loop)

    # ------------------------------------------------------------------ the caller's thread

    def process_element(self, row: Row) -> None:
        self._hand(row)

    def process_watermark(self, watermark: Watermark) -> None:
        self._hand(watermark)

    def _hand(self, element: Row | Watermark) -> None:
        op = self._op
        if op.backlog or len(self._handed) >= op.config.capacity:
            self._wait_until(lambda: self._failed or not op.backlog and len(self._handed) < op.config.capacity)
        self._handed.append(element)
        if not self._scheduled:    # appended first, then the flag tested: see `_drive`
            self._scheduled = True
            self._loop.call_soon_threadsafe(self.progress)
        if self._out:
            self._forward()

    def finish(self) -> None:
        """Wait until every element handed over has left, then end as a chain's driver does."""
        op = self._op
        self._ending = True
        self._loop.call_soon_threadsafe(self.progress)
        self._wait_until(lambda: self._failed or not self._ending and not op.busy)
        op.finished_on_loop()

    def dispose(self) -> None:
        self._handed.clear()
        self._driver.cancel()

    def _forward(self) -> None:
        """Emit what left on the loop, in order; an element's failure is raised here."""
        out = self._out
        while out:
            emit, value = out.popleft()
            emit(value)

    def _wait_until(self, settled: Callable[[], bool]) -> None:
        """Emit what leaves until `settled()`; the time spent waiting counts as blocked."""
        started: float | None = None
        try:
            while True:
                self._forward()
                if settled():
                    return
                with self._cond:
                    self._waiting = True
                    try:
                        if not settled() and not self._out:
                            if started is None:
                                started = time.perf_counter()
                            if not self._cond.wait(timeout=1.0) and not loop_alive():
                                raise RuntimeError(f"operator '{self._op.name}': the async I/O loop thread died")
                    finally:
                        self._waiting = False
        finally:
            if started is not None:
                self._op.count_blocked(time.perf_counter() - started)

    # ------------------------------------------------------------------ the loop

    def progress(self) -> None:
        """Elements were handed over, or something may leave the operator: wake the driver task."""
        wake_up = self._wake_up
        if wake_up is not None and not wake_up.done():
            wake_up.set_result(None)

    async def _drive(self) -> None:
        """Take the elements handed over, in order, emit what may leave, end the input when asked;
        then park until woken."""
        op, handed = self._op, self._handed
        try:
            while True:
                self._scheduled = False    # cleared before taking: a later hand wakes again
                while handed:
                    element = handed.popleft()
                    if type(element) is Watermark:
                        op.watermark_on_loop(element)
                    else:
                        op.element_on_loop(element)
                op.emit_ready_on_loop()
                if self._ending and not handed:
                    op.end_on_loop()
                    self._ending = False
                self._signal()
                self._wake_up = self._loop.create_future()
                await self._wake_up
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread, in order
            self._failed = True
            handed.clear()
            self._out.append((_raise, exc))
            self._signal()

    def _signal(self) -> None:
        if self._waiting:
            with self._cond:
                self._cond.notify()
