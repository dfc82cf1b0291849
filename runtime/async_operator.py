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
been emitted). ON MISS RETRY: a miss is retried like an error; once RETRY n is exhausted, the
element is a plain miss with NULL outcome (its RETURNS columns are NULL). TIMEOUT covers the
whole retry loop; waiting for the first RATE token comes before it (quota waits are not the
call's fault), tokens for retries are inside it. A user class's `timeout(row)` answers a
timed-out element (a sync one runs on the loop, so it must be quick).
"""
from __future__ import annotations

import asyncio
import collections
import inspect
import threading
import time
from typing import Any

from .async_queue import ElementEntry, OrderedQueue, UnorderedQueue, WatermarkEntry, make_queue
from .cache import CacheStats, TtlLruCache, cache_for, drop_cache
from .config import Enrich, Mode, Outcome
from .enrich_functions import EnrichCall, UnsendableRequest, build_call
from .metrics import OperatorMetrics
from .operator import ElementFailure, Output, Row, Watermark
from .rate import TokenBucket, bucket_for
from .worker_loop import loop_alive, worker_loop

# --------------------------------------------------------------------------- resolutions


class _Rows:
    """Answer: rows to emit."""

    __slots__ = ("rows",)

    def __init__(self, rows: list[Row]) -> None:
        self.rows = rows


class _DeadLetter:
    __slots__ = ("letter",)

    def __init__(self, letter: Row) -> None:
        self.letter = letter


class _Drop:
    __slots__ = ()


class _Fail:
    __slots__ = ("error",)

    def __init__(self, error: ElementFailure) -> None:
        self.error = error


_DROP = _Drop()
Resolution = _Rows | _DeadLetter | _Drop | _Fail


def _normalize(result: Any) -> list[dict[str, Any]]:
    """The call's answer as a list of result dicts ([] is a miss)."""
    if result is None:
        return []
    if isinstance(result, dict):
        return [result]
    if isinstance(result, (list, tuple)):
        for item in result:
            if not isinstance(item, dict):
                raise TypeError(f"result list holds a {type(item).__name__}, expected objects")
        return list(result)
    raise TypeError(f"result is a {type(result).__name__}, expected an object, a list of objects or None")


# --------------------------------------------------------------------------- operator


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
        self._queue: OrderedQueue | UnorderedQueue = make_queue(config.mode is Mode.ORDERED, config.capacity)
        self._cond = threading.Condition()
        # elements handed to the loop: the chain thread appends, the loop drains in batches,
        # so a burst of elements costs one cross-thread wake-up, not one each
        self._inbox: collections.deque[ElementEntry] = collections.deque()
        self._drain_scheduled = False
        self._notify_scheduled = False   # loop thread only, see _complete
        # running calls by entry (loop thread only); `_run` removes its own entry, so a finished
        # call costs no done-callback round through the loop
        self._tasks: dict[ElementEntry, asyncio.Task[None]] = {}
        self._metrics = OperatorMetrics(config.name)
        self._cache_stats = CacheStats()
        self._cache: TtlLruCache | None = cache_for(config.name, config.cache, config.call) if config.cache else None
        self._bucket: TokenBucket | None = bucket_for(config.rate) if config.rate else None
        self._returns = tuple(c.name for c in config.returns)
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
        m.counters["cache_hits"] = self._cache_stats.hits
        m.counters["cache_misses"] = self._cache_stats.misses
        m.counters["coalesced"] = self._cache_stats.coalesced
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
            if isinstance(value, _Rows):
                for out in value.rows:
                    output.emit(out)
                m.add("elements_out", len(value.rows))
            elif isinstance(value, _DeadLetter):
                m.add("dead_letters")
                output.emit_dead_letter(value.letter)
            elif isinstance(value, _Drop):
                m.add("dropped")
            else:
                assert isinstance(value, _Fail)
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
        self._running += 1
        self._metrics.in_flight(self._running)
        try:
            resolution = await self._resolve(entry)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - a bug here must still surface in the chain
            resolution = _Fail(self._failure(entry.payload, exc))
        finally:
            self._running -= 1
            self._metrics.latency.record(time.perf_counter() - started)
            self._tasks.pop(entry, None)
        self._complete(entry, resolution)

    async def _resolve(self, entry: ElementEntry) -> Resolution:
        cfg = self.config
        row = entry.payload
        attempts = [0]
        if self._bucket is not None:
            await self._bucket.acquire()  # first token outside TIMEOUT: waiting for quota is not the call
        deadline = self._arm_deadline(entry)
        try:
            try:
                return await self._attempts(row, attempts)
            finally:
                deadline.done = True
        except asyncio.CancelledError:
            if not deadline.expired:
                raise                      # cancelled by dispose, not by the TIMEOUT
            task = asyncio.current_task()
            assert task is not None
            task.uncancel()
            self._metrics.add("timeouts")
            handler = self._call.timeout_handler
            if handler is not None:
                return await self._answer_timeout(handler, row, attempts[0])
            return self._policy(cfg.on_timeout, "timeout", f"timed out after {cfg.timeout_s}s", row, attempts[0])

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

    async def _attempts(self, row: Row, attempts: list[int]) -> Resolution:
        cfg = self.config
        retries = cfg.retry.attempts if cfg.retry else 0
        while True:
            attempts[0] += 1
            if attempts[0] > 1:
                self._metrics.add("retries")
                assert cfg.retry is not None
                delay = cfg.retry.delay(attempts[0] - 1)
                if delay > 0:
                    await asyncio.sleep(delay)
                if self._bucket is not None:
                    await self._bucket.acquire()
            try:
                results = _normalize(await self._invoke(row))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the ON ERROR policy decides
                if attempts[0] <= retries and not isinstance(exc, UnsendableRequest):
                    continue
                self._metrics.add("errors")
                return self._policy(cfg.on_error, "error", f"{type(exc).__name__}: {exc}", row, attempts[0], exc)
            if results:
                return _Rows([self._output_row(row, r) for r in results])
            if cfg.on_miss is Outcome.RETRY and attempts[0] <= retries:
                continue
            self._metrics.add("misses")
            return self._policy(cfg.on_miss, "miss", "no result", row, attempts[0])

    async def _invoke(self, row: Row) -> Any:
        """One call, through the cache when there is one."""
        call = self._call
        if self._cache is not None:
            key = call.cache_key(row)
            if key is not None:
                retry_misses = self.config.on_miss is Outcome.RETRY

                async def counted() -> Any:
                    self._metrics.add("calls")
                    return await call(row)

                return await self._cache.get_or_call(
                    (self.name, key), counted, self._cache_stats,
                    cacheable=(lambda v: bool(v)) if retry_misses else (lambda v: True),
                )
        self._metrics.add("calls")
        return await call(row)

    async def _answer_timeout(self, handler: Any, row: Row, attempts: int) -> Resolution:
        """A user `timeout(row)` answers a timed-out element; its answer counts as a result."""
        cfg = self.config
        try:
            if inspect.iscoroutinefunction(handler):
                result = await asyncio.wait_for(handler(dict(row)), cfg.timeout_s)
            else:
                result = handler(dict(row))
            results = _normalize(result)
        except Exception as exc:  # noqa: BLE001
            self._metrics.add("errors")
            return self._policy(cfg.on_error, "error", f"timeout(): {type(exc).__name__}: {exc}", row, attempts, exc)
        if results:
            return _Rows([self._output_row(row, r) for r in results])
        self._metrics.add("misses")
        miss = Outcome.NULL if cfg.on_miss is Outcome.RETRY else cfg.on_miss
        return self._policy(miss, "miss", "no result (timeout handler)", row, attempts)

    def _output_row(self, row: Row, result: dict[str, Any]) -> Row:
        out = dict(row)
        for column in self._returns:
            out[column] = result.get(column)
        return out

    def _policy(self, outcome: Outcome, kind: str, error: str, row: Row, attempts: int,
                cause: BaseException | None = None) -> Resolution:
        if outcome is Outcome.NULL or outcome is Outcome.RETRY:  # RETRY exhausted -> NULL
            return _Rows([self._output_row(row, {})])
        if outcome is Outcome.DROP:
            return _DROP
        if outcome is Outcome.DEAD_LETTER:
            return _DeadLetter({
                "operator": self.name, "line": self.config.line, "kind": kind, "error": error,
                "attempts": attempts, "key": self._key(row), "row": dict(row),
            })
        return _Fail(self._failure(row, cause if cause is not None else f"{kind}: {error}"))

    def _key(self, row: Row) -> dict[str, Any]:
        return {c: row.get(c) for c in self.config.key_columns}

    def _failure(self, row: Row, cause: BaseException | str) -> ElementFailure:
        return ElementFailure(self.name, self.config.line, self._key(row), cause)
