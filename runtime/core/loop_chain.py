"""A chain with an ENRICH runs on the worker's event loop: one hand-off per chunk of rows, not per row.

Driven from the chain's thread, an ENRICH costs a cross-thread hand-off per row (a lock round,
a wake-up of the loop, a wake-up back, and the two threads taking turns at the GIL). So a chain
with an ENRICH hands each chunk of input (one Arrow batch) to the loop instead, and waits for
it: there the chunk passes through the operators as it would on the chain's thread (PROCESS
runs user code directly, ENRICH starts its calls, and a call that answers without waiting
completes and is emitted in the same step), so a row crosses no thread and takes no lock.

The loop must never block, so back-pressure is by awaiting: an ENRICH whose queue is full keeps
the elements that reach it in a backlog, in order (a PROCESS upstream may emit several rows
for one input row), and the driver hands the next input element in only once every backlog is
empty, waiting for answers to make room meanwhile. Emission happens in the driver's task only,
never in a completion callback, so an element failure reaches the chain's thread as it would
there. A chain without an ENRICH stays on the chain's thread.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from dslc.runtime.core.operator import Operator, Watermark, runs_on_loop
from dslc.runtime.core.worker_loop import worker_loop

T = TypeVar("T")


class LoopDriver:
    """Drives one chain's elements on the worker loop (every method but `call` runs there)."""

    def __init__(self, operators: Sequence[Operator]) -> None:
        self._operators = tuple(operators)
        self._enriches = [op for op in self._operators if runs_on_loop(op)]
        self._waiter: asyncio.Future[None] | None = None
        self.loop = worker_loop()
        for op in self._enriches:
            op.run_on_loop(self._progress)   # before `open`: the operators upstream bind to it

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the loop and wait for its result (chain thread); fail loudly
        if the loop thread died."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        while True:
            try:
                return future.result(timeout=1.0)
            except concurrent.futures.TimeoutError:
                if not self.loop.is_running():
                    future.cancel()
                    raise RuntimeError("the async I/O loop thread died") from None

    async def chunk(self, elements: Iterable[Any]) -> int:
        """Hand `elements` to the head operator, waiting while an ENRICH holds a backlog;
        returns how many were rows."""
        head, enriches = self._operators[0], self._enriches
        rows = 0
        prefetch = getattr(head, "prefetch", None)
        if prefetch is not None and prefetch.wanted:
            # STORE: the chunk's answers are looked up in one request, so stored rows answer at once
            elements = list(elements)
            await prefetch([e for e in elements if type(e) is not Watermark])
        for element in elements:
            for op in enriches:
                if op.backlog:
                    await self._relieve()
                    break
            if type(element) is Watermark:
                head.process_watermark(element)
            else:
                rows += 1
                head.process_element(element)
        for op in self._operators:      # head to tail: what may leave does, held batches are judged
            if op in self._enriches:
                op.emit_ready_on_loop()
            elif hasattr(op, "flush"):
                op.flush()
        return rows

    async def finish(self) -> None:
        """End of input, head to tail (as `OperatorChain.end_input`): an ENRICH emits every
        element it holds before the next operator finishes."""
        for op in self._operators:
            if op in self._enriches:
                op.end_on_loop()
                await self._until(lambda: not op.busy)   # noqa: B023 - awaited right here
                op.finished_on_loop()
            else:
                op.finish()

    # -- on the loop -----------------------------------------------------------------------

    def _progress(self) -> None:
        """An ENRICH has something that may leave: wake the driver if it waits."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _emit_ready(self) -> None:
        for op in self._enriches:
            op.emit_ready_on_loop()

    async def _until(self, settled: Callable[[], bool]) -> None:
        """Emit what may leave, head to tail, until `settled()`; between rounds, wait for answers."""
        while True:
            self._emit_ready()
            if settled():
                return
            waiter = self._waiter = self.loop.create_future()
            try:
                await waiter
            finally:
                self._waiter = None

    async def _relieve(self) -> None:
        """Wait until no ENRICH holds a backlog; the wait counts as their blocked time."""
        started = time.perf_counter()
        blocked = [op for op in self._enriches if op.backlog]
        await self._until(lambda: not any(op.backlog for op in self._enriches))
        for op in blocked:
            op.count_blocked(time.perf_counter() - started)
