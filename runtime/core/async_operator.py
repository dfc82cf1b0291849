"""ENRICH as Flink's AsyncWaitOperator: a bounded window of in-flight calls over a row stream.

Calls run on the worker's event loop (one daemon thread per Python worker process, reused by
every task so clients and caches survive), and so does this operator's one driver: a chain
(`loop_chain.LoopDriver`, after `run_on_loop`) hands elements in on the loop itself. An element
enters the queue and its call runs at once up to its first wait, so a call that answers without
waiting (a lookup served from memory) completes, and is emitted, in the same step. A call that
waits is carried on by the pool's call tasks (`call_pool`). A full queue never blocks the loop:
the element waits in `backlog`, and the driver holds back the input until answers make room.
A caller on another thread gets the same driver through a thin adapter (`thread_entry`).

Nothing is dropped, and completed entries are emitted by whoever drives the operator (never from
a completion callback), in the order the queue allows. The window is continuous: calls are never
gathered per batch.

Every element ends exactly once: as output rows, as a dead letter, dropped by a DROP policy, or
as the `ElementFailure` raised when a FAIL element reaches the emission point (ORDERED: in input
order, so everything before it has been emitted; ORDERED BY: everything of its key before it).
What each element becomes (attempts, RETRY, CACHE, the timeout answer, ON ... policies) is
decided by `resolution.ElementResolver` and its policies, plain asyncio; this module owns the
queue, the hand-off to the call tasks, the TIMEOUT deadlines (`deadlines`) and emission.
"""
from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable
from typing import Any

from dslc.runtime.calls.base import NOT_KNOWN, EnrichCall
from dslc.runtime.calls.factory import build_call, compose
from dslc.runtime.config import Enrich, Mode
from dslc.runtime.core.async_queue import ElementEntry, WatermarkEntry, key_of_columns, make_queue
from dslc.runtime.core.element_calls import ElementCalls, Waiting
from dslc.runtime.core.operator import Output, Row, Watermark
from dslc.runtime.core.resolution import DeadLetter, Drop, ElementResolver, Fail, Resolution, Rows
from dslc.runtime.core.thread_entry import ThreadEntry
from dslc.runtime.core.worker_loop import worker_loop
from dslc.runtime.limits.cache import drop_cache
from dslc.runtime.limits.money import calls_cost, tokens_priced
from dslc.runtime.metrics import OperatorMetrics


class EnrichOperator:
    """Async I/O operator of one ENRICH statement (one instance per task)."""

    def __init__(self, config: Enrich, call: EnrichCall | None = None) -> None:
        self.config = config
        self.name = config.name
        self._metrics = OperatorMetrics(config.name)
        if config.price is not None:      # PRICE: money counted (limits/money.py)
            self._metrics.cost_usd = 0.0
        # the whole call, wrappers composed (BATCH, STORE...): asked only through EnrichCall
        self._call = compose(call, config, self._metrics) if call is not None else build_call(config, self._metrics)
        self._known_answer = self._call.known_answer   # STORE: an answer the chunk's lookup found
        if self._call.prefetch is not None:
            self.prefetch = self._call.prefetch   # the loop chain looks a chunk's keys up at once
        self._queue = make_queue(config.mode is Mode.ORDERED, config.capacity,
                                 key_of=key_of_columns(config.order_by) if config.order_by else None)
        self._resolver = ElementResolver(config, self._call, self._metrics)
        self._cache_coalesced = 0    # the cache's coalesced waits already in the `coalesced` counter
        self._calls = ElementCalls(self._resolver, self._metrics, config.timeout_s, config.capacity,
                                   self._call.gathers, self._complete)
        self._resolver.on_admits_changed = self._admits_changed
        self._loop: asyncio.AbstractEventLoop | None = None
        self._output: Output | None = None
        self._entry: ThreadEntry | None = None   # driven from another thread
        self._completed: list[tuple[ElementEntry, Resolution]] = []   # see _complete
        self._notify_scheduled = False
        self._passed = 0           # elements answered at once with the queue empty: never entered it
        self._finished = self._failed = self._closed = self._disposed = False
        # elements that came while the queue was full, in order, and what to call when something may leave
        self.backlog: collections.deque[Row | Watermark] = collections.deque()
        self._progress: Callable[[], None] | None = None
        self._starts_at_once = False

    # ----------------------------------------------------------------- lifecycle

    def run_on_loop(self, progress: Callable[[], None]) -> None:
        """Before `open`: elements come in on the loop thread (a chain's LoopDriver). Nothing
        blocks there: an element that finds the queue full waits in the backlog, and `progress`
        is called when something may leave."""
        self._progress = progress
        self._admits_changed()
        self.process_element = self.element_on_loop   # type: ignore[method-assign]
        self.process_watermark = self.watermark_on_loop   # type: ignore[method-assign]

    def open(self, output: Output) -> None:
        """Start (or reuse) the worker loop and open the user code; without a chain to drive it
        on the loop, the caller's thread drives it through `thread_entry`."""
        self._loop = loop = worker_loop()
        self._calls.open(loop)
        if self._progress is None:
            self._entry = entry = ThreadEntry(self, output, loop)
            self.run_on_loop(entry.progress)
            self.process_element = entry.process_element   # type: ignore[method-assign]
            self.process_watermark = entry.process_watermark   # type: ignore[method-assign]
            self.finish = entry.finish   # type: ignore[method-assign]
            output = entry.collector
        self._output = output
        self._call.open()

    def process_element(self, row: Row) -> None:
        """Enqueue one row and start its call (bound by `run_on_loop` or `open`)."""
        raise RuntimeError("process_element before open")

    def process_watermark(self, watermark: Watermark) -> None:
        """Queue a watermark; it is forwarded once every element before it has left."""
        raise RuntimeError("process_watermark before open")

    def finish(self) -> None:
        """Drain: wait for every in-flight element and emit it (bound by `open`)."""
        raise RuntimeError("finish before open")

    def close(self) -> None:
        """Close the user code (user `close()`)."""
        if not self._closed:
            self._closed = True
            self._call.close()

    def dispose(self) -> None:
        """Always runs: end the pool's call tasks (after a failure, cancelling pending calls) and
        close this operator's clients."""
        if self._disposed:
            return
        self._disposed = True
        if self._entry is not None:
            self._entry.dispose()
        abnormal = self._failed or not self._finished
        loop = self._loop
        running = loop is not None and loop.is_running()
        if running and self._calls.busy:
            try:
                asyncio.run_coroutine_threadsafe(self._calls.cancel_all(), loop).result(timeout=5)
            except Exception:  # noqa: BLE001 - dispose must not mask the original failure
                pass
        if not self._closed:
            self._closed = True
            try:
                self._call.close()
            except Exception:  # noqa: BLE001 - dispose must not mask the original failure
                pass
        if abnormal and running:
            try:
                asyncio.run_coroutine_threadsafe(self._call.aclose_clients(), loop).result(timeout=5)
            except Exception:  # noqa: BLE001
                pass
            if self._failed and self.config.cache is not None:
                drop_cache(self.name, self.config.call)

    def metrics(self) -> dict[str, Any]:
        """This task's metrics as a plain dict."""
        m = self._metrics
        m.counters["elements_in"] = self._queue.entered + self._passed   # those that entered, and those that passed it
        stats = self._resolver.cache_stats
        m.counters["cache_hits"] = stats.hits
        m.counters["cache_misses"] = stats.misses
        # BATCH counts its own coalesced elements into the same counter: add the cache's since last time
        m.counters["coalesced"] += stats.coalesced - self._cache_coalesced
        self._cache_coalesced = stats.coalesced
        bucket = self._resolver.bucket
        if bucket is not None:
            m.rate_wait_seconds = bucket.waited_seconds
        if self.config.price is not None and not tokens_priced(self.config):   # HTTP, PYTHON: PRICE per call
            m.cost_usd = calls_cost(self.config, m.counters["calls"])
        return {**m.to_dict(), "capacity": self.config.capacity,
                "in_flight": self._calls.running + len(self._calls.pool.inbox)}   # now: calls out and elements about to start

    def _admits_changed(self) -> None:
        """Whether an element's call starts at once (nothing has to admit it) or in a call task."""
        self._starts_at_once = self._progress is not None and not self._resolver.admits and not self._call.gathers

    @property
    def busy(self) -> bool:
        """Elements are still in the queue or the backlog."""
        return bool(self.backlog) or bool(len(self._queue))

    def count_joined(self, rows: int) -> None:
        """`rows` had their stored answers joined by Spark and passed this operator by (each made
        one row): they count as elements in and out and as store hits."""
        self._passed += rows
        counters = self._metrics.counters
        counters["elements_out"] += rows
        counters["store_hits"] += rows
        counters["store_joined"] += rows

    def count_blocked(self, seconds: float) -> None:
        """The driver waited `seconds` for room in this operator's queue."""
        self._metrics.blocked_seconds += seconds

    # ----------------------------------------------------------------- the driver, on the loop

    def element_on_loop(self, row: Row) -> None:
        queue = self._queue
        if self.backlog or not queue.has_capacity():
            self.backlog.append(row)
            return
        self._start_on_loop(row)
        if queue.has_ready():
            self._emit(queue.pop_ready())

    def _start_on_loop(self, row: Row) -> None:
        """Start `row`'s call: at once when nothing has to admit it, else in a call task.

        A call started at once runs up to its first wait before the element takes its place in
        the queue, which is the same place (nothing else runs meanwhile). An answer given without
        waiting then leaves in this step, with no queue entry at all when nothing is ahead of it
        (the queue would let it out at once, in every mode); a call that waits is carried on by
        a call task."""
        queue = self._queue
        known_answer = self._known_answer
        if known_answer is not None:      # STORE: an answer the chunk's lookup found needs no call at all
            value = known_answer(row)
            if value is not NOT_KNOWN:
                self._settle(row, self._resolver.from_store(row, value))
                return
        if not self._starts_at_once:
            self._calls.hand(queue.put_element(row))
            return
        first = self._calls.first_step(row, time.perf_counter(), 0)
        if type(first) is Waiting:
            first.entry = queue.put_element(row)
            self._calls.hand(first)
        else:
            self._settle(row, first)

    def _settle(self, row: Row, resolution: Resolution) -> None:
        """An element resolved as it came: it leaves now when nothing is ahead of it."""
        queue = self._queue
        if queue.is_empty():
            self._passed += 1
            self._leave(resolution)
        else:
            queue.complete(queue.put_element(row), resolution)

    def watermark_on_loop(self, watermark: Watermark) -> None:
        if self.backlog:
            self.backlog.append(watermark)
            return
        self._queue.put_watermark(watermark)
        self.emit_ready_on_loop()

    def emit_ready_on_loop(self) -> None:
        """Emit what may leave and move the backlog into the room that frees."""
        queue, backlog = self._queue, self.backlog
        while True:
            if queue.has_ready():
                self._emit(queue.pop_ready())
            while backlog and queue.has_capacity():
                element = backlog.popleft()
                if type(element) is Watermark:
                    queue.put_watermark(element)
                else:
                    self._start_on_loop(element)
            if not queue.has_ready():
                return

    def end_on_loop(self) -> None:
        """The input has ended: send what waits for company (a pending batch) now."""
        self._call.end_of_input()

    def finished_on_loop(self) -> None:
        """Every element has left: the policies that stop a run at the end of a task's input
        (refused credentials, a service never answered, BUDGET in STREAMING) may raise."""
        self._finished = True
        self._resolver.at_end()

    def _emit(self, ready: list) -> None:
        """Hand entries that left the queue downstream, in order."""
        leave = self._leave
        for entry in ready:
            leave(entry.value if type(entry) is ElementEntry else entry)

    def _leave(self, value: Resolution | WatermarkEntry) -> None:
        """What one element resolved to (or a watermark) goes downstream."""
        output = self._output
        assert output is not None
        m = self._metrics
        if type(value) is Rows:
            rows = value.rows
            m.counters["elements_out"] += len(rows)
            emit = output.emit
            for out in rows:
                emit(out)
        elif isinstance(value, WatermarkEntry):
            output.emit_watermark(value.watermark)
        elif isinstance(value, DeadLetter):
            m.add("dead_letters")
            output.emit_dead_letter(value.letter)
        elif isinstance(value, Drop):
            if type(value) is Drop:        # Unanswered (BUDGET spent) is counted when it resolves
                m.add("dropped")
        else:
            assert isinstance(value, Fail)
            m.add("failures")
            self._failed = True
            raise value.error

    # ----------------------------------------------------------------- calls, on the loop

    def _complete(self, entry: ElementEntry, resolution: Resolution) -> None:
        # Hand answers to the queue, and tell the driver, once per loop iteration, not once per
        # completion: calls answered together (one burst of responses) then leave, and are
        # replaced, in one round.
        self._completed.append((entry, resolution))
        if not self._notify_scheduled:
            self._notify_scheduled = True
            self._loop.call_soon(self._notify)

    def _notify(self) -> None:
        self._notify_scheduled = False
        completed, self._completed = self._completed, []
        queue = self._queue
        for entry, resolution in completed:
            queue.complete(entry, resolution)
        if queue.has_ready():   # tell the driver only when something may leave
            self._progress()

