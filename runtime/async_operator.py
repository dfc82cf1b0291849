"""ENRICH as Flink's AsyncWaitOperator: a bounded window of in-flight calls over a row stream.

The chain's thread calls `process_element` synchronously; each element enters the queue and
its call starts on the worker's event loop (one daemon thread per Python worker process,
reused by every task so clients and caches survive). Completed entries are emitted from the
calling thread only, in the order the queue allows. A full queue blocks the caller, who keeps
emitting whatever completes meanwhile (back-pressure, never dropping). The window is
continuous: calls are never gathered per batch.

Every element ends exactly once: as output rows, as a dead letter, dropped by a DROP policy,
or as the `ElementFailure` raised from `process_element`/`process_watermark`/`finish` when a
FAIL element reaches the emission point (ORDERED: in input order, so everything before it has
been emitted; ORDERED BY: everything of its key before it). What each element becomes
(attempts, RETRY, CACHE, the timeout answer, ON ... policies) is decided by
`resolution.ElementResolver`, plain asyncio; this module owns what is about threads and time:
the queue, the hand-off between the chain thread and the loop, the TIMEOUT deadlines (one
timer for all, cancelling the element's task) and emission. TIMEOUT covers the whole retry
loop; waiting for the first RATE token comes before it.
"""
from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from .adaptive import AdaptiveLimit
from .async_queue import ElementEntry, OrderedQueue, UnorderedQueue, WatermarkEntry, make_queue
from .batching import BatchingCall
from .cache import drop_cache
from .config import Enrich, Mode
from .enrich_functions import EnrichCall, build_call
from .metrics import OperatorMetrics
from .operator import Output, Row, Watermark
from .resolution import DeadLetter, Drop, ElementResolver, Fail, Resolution, Rows
from .worker_loop import loop_alive, worker_loop

# --------------------------------------------------------------------------- operator


def _key_of(columns: tuple[str, ...]) -> Callable[[Row], Hashable]:
    """The ORDERED BY key of a row; values that cannot be hashed (arrays, maps) by their repr."""
    def key(row: Row) -> Hashable:
        values = tuple(row.get(c) for c in columns)
        try:
            hash(values)
        except TypeError:
            return repr(values)
        return values
    return key


class _Deadline:
    """When one element's TIMEOUT runs out, and whether its call is over (loop thread only)."""

    __slots__ = ("at", "entry", "done", "expired")

    def __init__(self, at: float, entry: ElementEntry) -> None:
        self.at = at
        self.entry = entry
        self.done = False
        self.expired = False


class EnrichOperator:
    """Async I/O operator of one ENRICH statement (one instance per task)."""

    def __init__(self, config: Enrich, call: EnrichCall | None = None) -> None:
        self.config = config
        self.name = config.name
        self._call = call if call is not None else build_call(config)
        self._queue: OrderedQueue | UnorderedQueue = make_queue(
            config.mode is Mode.ORDERED, config.capacity, key_of=_key_of(config.order_by) if config.order_by else None)
        self._cond = threading.Condition(threading.Lock())   # never taken twice by one thread
        # elements handed to the loop: the chain thread appends, the loop drains in batches,
        # so a burst of elements costs one cross-thread wake-up, not one each
        self._inbox: collections.deque[ElementEntry] = collections.deque()
        self._drain_scheduled = False
        self._notify_scheduled = False   # loop thread only, see _complete
        # running calls by entry (loop thread only); `_run` removes its own entry, so a finished
        # call costs no done-callback round through the loop
        self._tasks: dict[ElementEntry, asyncio.Task[None]] = {}
        self._metrics = OperatorMetrics(config.name)
        self._batching: BatchingCall | None = None
        if config.batch is not None:
            self._call = self._batching = BatchingCall(self._call, config, self._metrics)
        # CAPACITY n ADAPTIVE: each attempt takes a slot of the adaptive limit of requests in
        # flight (the first one outside its TIMEOUT); the queue still holds up to n elements
        self._limit: AdaptiveLimit | None = AdaptiveLimit(config.capacity) if config.adaptive else None
        self._resolver = ElementResolver(config, self._call, self._metrics, self._limit)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._output: Output | None = None
        self._running = 0          # calls in flight (loop thread only)
        # TIMEOUTs (loop thread only): every element has the same TIMEOUT, so deadlines appended
        # when each one starts are already in order, and one timer for the earliest serves all;
        # this costs far less per element than an asyncio.timeout() each
        self._deadlines: collections.deque[_Deadline] = collections.deque()
        self._reaper: asyncio.TimerHandle | None = None
        self._finished = False
        self._failed = False
        self._closed = False
        self._disposed = False

    # ----------------------------------------------------------------- lifecycle

    def open(self, output: Output) -> None:
        """Start (or reuse) the worker loop and open the user code."""
        self._output = output
        self._loop = worker_loop()
        self._call.open()

    def process_element(self, row: Row) -> None:
        """Enqueue one row, start its call, and emit whatever may leave (blocking while full)."""
        self._metrics.add("elements_in")
        queue = self._queue
        with self._cond:   # fast path: one lock round for put and pop while there is room
            entry = queue.put_element(row) if queue.has_capacity() else None
            ready = queue.pop_ready() if entry is not None and queue.has_ready() else None
        if entry is None:
            self._wait_for_capacity()
            with self._cond:
                entry = queue.put_element(row)
                ready = queue.pop_ready() if queue.has_ready() else None
        loop = self._loop
        assert loop is not None, "process_element before open"
        self._inbox.append(entry)
        if not self._drain_scheduled:   # see _drain_inbox: append first, then test the flag
            self._drain_scheduled = True
            loop.call_soon_threadsafe(self._drain_inbox)
        if ready:
            self._emit(ready)

    def process_watermark(self, watermark: Watermark) -> None:
        """Queue a watermark; it is forwarded once every element before it has left."""
        with self._cond:
            self._queue.put_watermark(watermark)
        self._emit_ready()

    def finish(self) -> None:
        """Drain: wait for every in-flight element and emit it."""
        if self._batching is not None and self._loop is not None:
            # after the elements handed over so far (the inbox drains first): no more will come
            self._loop.call_soon_threadsafe(self._batching.flush)
        while True:
            with self._cond:
                while len(self._queue) and not self._has_ready():
                    self._wait()
                if not len(self._queue):
                    break
            self._emit_ready()
        self._finished = True

    def close(self) -> None:
        """Close the user code (user `close()`)."""
        if not self._closed:
            self._closed = True
            self._call.close()

    def dispose(self) -> None:
        """Always runs: after a failure, cancel pending calls and close this operator's clients."""
        if self._disposed:
            return
        self._disposed = True
        abnormal = self._failed or not self._finished
        loop = self._loop
        if loop is not None and loop.is_running() and (self._tasks or self._inbox):
            try:
                asyncio.run_coroutine_threadsafe(self._cancel_all(), loop).result(timeout=5)
            except Exception:  # noqa: BLE001 - dispose must not mask the original failure
                pass
        if not self._closed:
            self._closed = True
            try:
                self._call.close()
            except Exception:  # noqa: BLE001 - dispose must not mask the original failure
                pass
        if abnormal and self._loop is not None and self._loop.is_running():
            try:
                asyncio.run_coroutine_threadsafe(self._call.aclose_clients(), self._loop).result(timeout=5)
            except Exception:  # noqa: BLE001
                pass
            if self._failed and self.config.cache is not None:
                drop_cache(self.name, self.config.call)

    def metrics(self) -> dict[str, Any]:
        """This task's metrics as a plain dict."""
        m = self._metrics
        stats = self._resolver.cache_stats
        m.counters["cache_hits"] = stats.hits
        m.counters["cache_misses"] = stats.misses
        m.counters["coalesced"] = stats.coalesced
        return m.to_dict()

    # ----------------------------------------------------------------- chain thread

    def _has_ready(self) -> bool:
        return self._queue.has_ready()

    def _wait(self) -> None:
        """Wait (lock held) for a completion; fail loudly if the worker loop died."""
        if not self._cond.wait(timeout=1.0):
            if not loop_alive():
                raise RuntimeError(f"operator '{self.name}': the async I/O loop thread died")

    def _wait_for_capacity(self) -> None:
        started: float | None = None
        try:
            while True:
                with self._cond:
                    while not self._queue.has_capacity() and not self._has_ready():
                        if started is None:
                            started = time.perf_counter()
                        self._wait()
                    if self._queue.has_capacity():
                        return
                self._emit_ready()
        finally:
            if started is not None:
                self._metrics.blocked_seconds += time.perf_counter() - started

    def _emit_ready(self) -> None:
        with self._cond:
            ready = self._queue.pop_ready()
        if ready:
            self._emit(ready)

    def _emit(self, ready: list) -> None:
        """Hand entries that left the queue downstream, in order (chain thread, no lock held)."""
        output = self._output
        assert output is not None
        m = self._metrics
        for entry in ready:
            if isinstance(entry, WatermarkEntry):
                output.emit_watermark(entry.watermark)
                continue
            value = entry.value
            if isinstance(value, Rows):
                for out in value.rows:
                    output.emit(out)
                m.add("elements_out", len(value.rows))
            elif isinstance(value, DeadLetter):
                m.add("dead_letters")
                output.emit_dead_letter(value.letter)
            elif isinstance(value, Drop):
                m.add("dropped")
            else:
                assert isinstance(value, Fail)
                m.add("failures")
                self._failed = True
                raise value.error

    # ----------------------------------------------------------------- loop thread

    def _drain_inbox(self) -> None:
        """Start the calls of every element handed over since the last drain."""
        self._drain_scheduled = False   # cleared before draining: a later append reschedules
        loop = self._loop
        assert loop is not None
        inbox, tasks, run = self._inbox, self._tasks, self._run
        while inbox:
            entry = inbox.popleft()
            tasks[entry] = loop.create_task(run(entry))

    async def _cancel_all(self) -> None:
        """Cancel every call of this operator and wait until they have stopped."""
        self._inbox.clear()
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2)
        self._tasks.clear()   # a task cancelled before its first step never ran its `finally`
        self._deadlines.clear()
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None

    def _complete(self, entry: ElementEntry, resolution: Resolution) -> None:
        with self._cond:
            self._queue.complete(entry, resolution)
        # Wake the chain thread once per loop iteration, not once per completion: calls answered
        # together (one burst of responses) then leave, and are replaced, in one round.
        if not self._notify_scheduled:
            self._notify_scheduled = True
            loop = self._loop
            assert loop is not None
            loop.call_soon(self._notify)

    def _notify(self) -> None:
        self._notify_scheduled = False
        with self._cond:
            if self._queue.has_ready():   # wake the chain thread only when something may leave
                self._cond.notify()

    async def _run(self, entry: ElementEntry) -> None:
        """The whole life of one element on the loop; always completes its entry unless cancelled."""
        started = time.perf_counter()
        try:
            resolution = await self._resolve(entry)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - a bug here must still surface in the chain
            resolution = Fail(self._resolver.failure(entry.payload, exc))
        finally:
            self._metrics.latency.record(time.perf_counter() - started)
            self._tasks.pop(entry, None)
        self._complete(entry, resolution)

    async def _resolve(self, entry: ElementEntry) -> Resolution:
        """Resolve one element under its TIMEOUT, enforced by this operator's reaper."""
        resolver = self._resolver
        row = entry.payload
        attempts = [0]
        if resolver.admits:
            await resolver.admit()
        epoch = self._limit.epoch if self._limit is not None else 0
        deadline = self._arm_deadline(entry)
        self._running += 1                 # counted from admission: RATE and ADAPTIVE waits are not calls
        self._metrics.in_flight(self._running)
        try:
            try:
                return await resolver.attempt(row, attempts)
            finally:
                deadline.done = True
                self._running -= 1
        except asyncio.CancelledError:
            if not deadline.expired:
                raise                      # cancelled by dispose, not by the TIMEOUT
            task = asyncio.current_task()
            assert task is not None
            task.uncancel()
            if self._limit is not None:
                self._limit.overloaded(epoch)
            return await resolver.timed_out(row, attempts[0])

    def _arm_deadline(self, entry: ElementEntry) -> _Deadline:
        """Start the TIMEOUT of the element whose call runs in `self._tasks[entry]`."""
        loop = self._loop
        assert loop is not None
        deadline = _Deadline(loop.time() + self.config.timeout_s, entry)
        pending = self._deadlines
        while pending and pending[0].done:   # keep the queue as short as the calls in flight
            pending.popleft()
        pending.append(deadline)
        if self._reaper is None:
            self._reaper = loop.call_at(deadline.at, self._reap)
        return deadline

    def _reap(self) -> None:
        """Cancel every call whose TIMEOUT ran out; wake up again at the next deadline."""
        loop = self._loop
        assert loop is not None
        now = loop.time()
        pending = self._deadlines
        while pending and (pending[0].done or pending[0].at <= now):
            deadline = pending.popleft()
            task = self._tasks.get(deadline.entry)
            if not deadline.done and task is not None:
                deadline.expired = True
                task.cancel()
        self._reaper = loop.call_at(pending[0].at, self._reap) if pending else None
