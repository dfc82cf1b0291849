"""ENRICH as Flink's AsyncWaitOperator: a bounded window of in-flight calls over a row stream.

Calls run on the worker's event loop (one daemon thread per Python worker process, reused by
every task so clients and caches survive). Elements come in one of two ways:

- In a chain (`loop_chain.LoopDriver`, after `run_on_loop`), on the loop itself: an element
  enters the queue and its call runs at once up to its first wait, so a call that answers
  without waiting (a lookup served from memory) completes, and is emitted, in the same step.
  A call that waits is carried on by a call task. A full queue never blocks the loop: the
  element waits in `backlog`, and the driver holds back the input until answers make room.
- From another thread, through `process_element`: the element is handed to the loop, and a
  full queue blocks the caller, who keeps emitting whatever completes meanwhile.

Either way nothing is dropped, and completed entries are emitted by whoever drives the operator
(never from a completion callback), in the order the queue allows. On the loop, a pool of at
most CAPACITY call tasks takes the elements handed to it one after another: an element costs
no asyncio task of its own, and a call that has to wait wakes other tasks for the elements
behind it, so a burst of elements starts in one loop step. The window is continuous: calls are
never gathered per batch.

Every element ends exactly once: as output rows, as a dead letter, dropped by a DROP policy,
or as the `ElementFailure` raised from `process_element`/`process_watermark`/`finish` when a
FAIL element reaches the emission point (ORDERED: in input order, so everything before it has
been emitted; ORDERED BY: everything of its key before it). What each element becomes
(attempts, RETRY, CACHE, the timeout answer, ON ... policies) is decided by
`resolution.ElementResolver`, plain asyncio; this module owns what is about threads and time:
the queue, the hand-off to the loop, the TIMEOUT deadlines (one
timer for all, cancelling the element's task) and emission. TIMEOUT covers the whole retry
loop; waiting for the first RATE token comes before it.
"""
from __future__ import annotations

import asyncio
import collections
import threading
import time
import types
from collections.abc import Callable, Coroutine, Hashable
from typing import Any

from dslc.runtime.calls.base import NOT_KNOWN, EnrichCall
from dslc.runtime.calls.factory import build_call, compose
from dslc.runtime.config import Enrich, Mode
from dslc.runtime.core.async_queue import (
    ElementEntry,
    OrderedQueue,
    UnorderedQueue,
    WatermarkEntry,
    make_queue,
)
from dslc.runtime.core.operator import Output, Row, Watermark
from dslc.runtime.core.resolution import (
    DeadLetter,
    Drop,
    ElementResolver,
    Fail,
    Resolution,
    Rows,
    resume,
)
from dslc.runtime.core.worker_loop import loop_alive, worker_loop
from dslc.runtime.limits.cache import drop_cache
from dslc.runtime.limits.money import calls_cost, tokens_priced
from dslc.runtime.metrics import OperatorMetrics

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



class _Waiting:
    """An element whose call ran up to its first wait: what a call task needs to carry it on
    (its queue entry is given once the element has one)."""

    __slots__ = ("entry", "step", "waits_on", "attempts", "started", "admitted", "epoch")

    def __init__(self, step: Coroutine[Any, Any, Resolution], waits_on: Any,
                 attempts: list[int], started: float, admitted: float, epoch: int) -> None:
        self.entry: ElementEntry | None = None
        self.step = step
        self.waits_on = waits_on
        self.attempts = attempts
        self.started = started
        self.admitted = admitted
        self.epoch = epoch


class _Deadline:
    """When one element's TIMEOUT runs out, the call task running it, and whether its call is
    over (loop thread only)."""

    __slots__ = ("at", "task", "done", "expired")

    def __init__(self, at: float, task: asyncio.Task[None]) -> None:
        self.at = at
        self.task = task
        self.done = False
        self.expired = False


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
        self._gathers = self._call.gathers
        self._known_answer = self._call.known_answer   # STORE: an answer the chunk's lookup found
        if self._call.prefetch is not None:
            self.prefetch = self._call.prefetch   # the loop chain looks a chunk's keys up at once
        self._queue: OrderedQueue | UnorderedQueue = make_queue(
            config.mode is Mode.ORDERED, config.capacity, key_of=_key_of(config.order_by) if config.order_by else None)
        # guards the queue; taken directly (a C-level `with`) where nobody waits, through the
        # condition where a thread driving the operator waits for a completion
        self._lock = threading.Lock()   # never taken twice by one thread
        self._cond = threading.Condition(self._lock)
        # elements handed to the pool's call tasks (loop thread): appended by a thread driving
        # the operator (a burst costs one cross-thread wake-up, not one each), or on the loop
        # by the chain, as a call that was started and waits (_Waiting)
        self._inbox: collections.deque[ElementEntry | _Waiting] = collections.deque()
        self._wake_scheduled = False
        self._notify_scheduled = False   # loop thread only, see _complete
        self._completed: list[tuple[ElementEntry, Resolution]] = []   # loop thread only, see _complete
        # the pool of call tasks (loop thread only): at most CAPACITY, started as elements come,
        # parked on a future of `_idle` while the inbox is empty
        self._pool: set[asyncio.Task[None]] = set()
        self._idle: list[asyncio.Future[bool]] = []
        self._waking = 0   # call tasks woken or started that have not yet looked at the inbox
        # the policies around each element's attempts (RETRY, RATE, ADAPTIVE: each attempt takes
        # a slot of the adaptive limit, the queue still holds up to CAPACITY elements...)
        self._resolver = ElementResolver(config, self._call, self._metrics)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._output: Output | None = None
        self._running = 0          # calls in flight (loop thread only)
        self._passed = 0           # elements answered at once with the queue empty: never entered it
        # TIMEOUTs (loop thread only): every element has the same TIMEOUT, so deadlines appended
        # when each one starts are already in order, and one timer for the earliest serves all;
        # this costs far less per element than an asyncio.timeout() each
        self._deadlines: collections.deque[_Deadline] = collections.deque()
        self._reaper: asyncio.TimerHandle | None = None
        self._finished = False
        self._failed = False
        self._closed = False
        self._disposed = False
        # driven on the loop (run_on_loop): elements that came while the queue was full, in
        # order, and what to call when something may leave
        self.backlog: collections.deque[Row | Watermark] = collections.deque()
        self._progress: Callable[[], None] | None = None
        self._starts_at_once = False
        self._resolver.on_admits_changed = self._admits_changed

    # ----------------------------------------------------------------- lifecycle

    def open(self, output: Output) -> None:
        """Start (or reuse) the worker loop and open the user code."""
        self._output = output
        self._loop = worker_loop()
        self._call.open()

    def process_element(self, row: Row) -> None:
        """Enqueue one row, start its call, and emit whatever may leave (blocking while full)."""
        queue = self._queue
        with self._lock:   # fast path: one lock round for put and pop while there is room
            entry = queue.put_element(row) if queue.has_capacity() else None
            ready = queue.pop_ready() if entry is not None and queue.has_ready() else None
        if entry is None:
            self._wait_for_capacity()
            with self._lock:
                entry = queue.put_element(row)
                ready = queue.pop_ready() if queue.has_ready() else None
        loop = self._loop
        assert loop is not None, "process_element before open"
        self._inbox.append(entry)
        if not self._wake_scheduled:   # see _wake_pool: append first, then test the flag
            self._wake_scheduled = True
            loop.call_soon_threadsafe(self._wake_pool)
        if ready:
            self._emit(ready)

    def process_watermark(self, watermark: Watermark) -> None:
        """Queue a watermark; it is forwarded once every element before it has left."""
        with self._lock:
            self._queue.put_watermark(watermark)
        self._emit_ready()

    def finish(self) -> None:
        """Drain: wait for every in-flight element and emit it."""
        if self._loop is not None:
            # after the elements handed over so far (the inbox drains first): no more will come
            self._loop.call_soon_threadsafe(self._call.end_of_input)
        while True:
            with self._cond:
                while len(self._queue) and not self._has_ready():
                    self._wait()
                if not len(self._queue):
                    break
            self._emit_ready()
        self._finished = True
        self._stop_if_spent()

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
        abnormal = self._failed or not self._finished
        loop = self._loop
        if loop is not None and loop.is_running() and (self._pool or self._inbox):
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
        m.counters["elements_in"] = self._queue.entered + self._passed   # those that entered, and those that passed it
        stats = self._resolver.cache_stats
        m.counters["cache_hits"] = stats.hits
        m.counters["cache_misses"] = stats.misses
        m.counters["coalesced"] = stats.coalesced
        bucket = self._resolver.bucket
        if bucket is not None:
            m.rate_wait_seconds = bucket.waited_seconds
        if self.config.price is not None and not tokens_priced(self.config):   # HTTP, PYTHON: PRICE per call
            m.cost_usd = calls_cost(self.config, m.counters["calls"])
        return {**m.to_dict(), "capacity": self.config.capacity,
                "in_flight": self._running + len(self._inbox)}   # now: calls out and elements about to start

    # ----------------------------------------------------------------- driven on the loop (in a chain)

    def run_on_loop(self, progress: Callable[[], None]) -> None:
        """Before `open`: the chain runs on the worker loop (LoopDriver), so elements come in on
        the loop thread. Nothing blocks there: an element that finds the queue full waits in
        the backlog, and `progress` is called when something may leave."""
        self._progress = progress
        self._admits_changed()
        self.process_element = self._process_on_loop   # type: ignore[method-assign]
        self.process_watermark = self._watermark_on_loop   # type: ignore[method-assign]

    def _admits_changed(self) -> None:
        """Whether an element's call starts at once (nothing has to admit it) or in a call task."""
        self._starts_at_once = self._progress is not None and not self._resolver.admits and not self._gathers

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
        """The chain waited `seconds` for room in this operator's queue."""
        self._metrics.blocked_seconds += seconds

    def _process_on_loop(self, row: Row) -> None:
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
                resolution = self._resolver.from_store(row, value)
                if queue.is_empty():
                    self._passed += 1
                    self._leave(resolution)
                else:
                    queue.complete(queue.put_element(row), resolution)
                return
        if not self._starts_at_once:
            self._to_pool(queue.put_element(row))
            return
        first = self._first_step(row, time.perf_counter(), 0)
        if type(first) is _Waiting:
            first.entry = queue.put_element(row)
            self._to_pool(first)
        elif queue.is_empty():
            self._passed += 1
            self._leave(first)
        else:
            queue.complete(queue.put_element(row), first)

    def _to_pool(self, element: ElementEntry | _Waiting) -> None:
        """Hand an element to the pool's call tasks (loop thread)."""
        self._inbox.append(element)
        if not self._wake_scheduled:
            self._wake_scheduled = True
            self._loop.call_soon(self._wake_pool)

    def _watermark_on_loop(self, watermark: Watermark) -> None:
        if self.backlog:
            self.backlog.append(watermark)
            return
        self._queue.put_watermark(watermark)
        self.emit_ready_on_loop()

    def emit_ready_on_loop(self) -> None:
        """Emit what may leave and move the backlog into the room that frees (loop thread)."""
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
        """The input has ended (loop thread): send a pending batch now."""
        self._call.end_of_input()

    def finished_on_loop(self) -> None:
        """Every element has left (loop thread)."""
        self._finished = True
        self._stop_if_spent()

    def _stop_if_spent(self) -> None:
        """At the end of the task's input: refused credentials or a service that never answered
        stop the run (core/refusals.py). BUDGET in STREAMING: a task that left rows unanswered
        fails, so its micro-batch does not commit without them (a rerun replays it and finds the
        answers received in the store)."""
        self._resolver.at_end()

    # ----------------------------------------------------------------- driven from another thread

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
        with self._lock:
            ready = self._queue.pop_ready()
        if ready:
            self._emit(ready)

    def _emit(self, ready: list) -> None:
        """Hand entries that left the queue downstream, in order (in the thread that drives the
        operator, no lock held)."""
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

    def _wake_pool(self) -> None:
        """Elements were handed over: make sure a call task will look at the inbox. One is
        enough, it wakes more when its call has to wait (`_hand_on`); with BATCH every
        element waits for its batch, and all must join it in this loop round, so one each."""
        self._wake_scheduled = False   # cleared before looking: a later append reschedules
        if self._gathers:
            self._hand_on()
        elif self._inbox and not self._waking:
            self._wake(1)

    def _wake(self, wanted: int) -> None:
        """Wake up to `wanted` parked call tasks, starting new ones while the pool has room."""
        idle, pool, loop = self._idle, self._pool, self._loop
        assert loop is not None
        while wanted and idle:
            wake = idle.pop()
            if not wake.done():
                wake.set_result(True)
                self._waking += 1
                wanted -= 1
        while wanted and len(pool) < self.config.capacity:
            pool.add(loop.create_task(self._call_task()))
            self._waking += 1
            wanted -= 1

    def _hand_on(self) -> None:
        """The running call task is about to wait: wake other call tasks for the elements left
        in the inbox, so a burst of calls that all wait still starts in one loop step."""
        wanted = len(self._inbox) - self._waking
        if wanted > 0:
            self._wake(wanted)

    async def _call_task(self) -> None:
        """One task of the pool: run the inbox's elements one after another, park when it is empty.

        A call that answers without waiting (a lookup served from memory) costs no task switch:
        the next element follows in the same loop step. Only an element about to wait (for its
        call, or for RATE or ADAPTIVE admission) wakes other tasks (`_hand_on`)."""
        loop = self._loop
        assert loop is not None
        task = asyncio.current_task()
        assert task is not None
        inbox, idle, run, carry = self._inbox, self._idle, self._run, self._carry
        self._waking -= 1
        try:
            while True:
                while inbox:
                    item = inbox.popleft()
                    if type(item) is ElementEntry:
                        await run(item, task)
                    else:                  # started on the loop by the chain (run_on_loop)
                        await carry(item, task)
                wake = loop.create_future()
                idle.append(wake)
                await wake
                self._waking -= 1
        finally:
            self._pool.discard(task)

    async def _cancel_all(self) -> None:
        """End every call task of this operator (cancelling calls in flight) and wait for them."""
        self._inbox.clear()
        tasks = list(self._pool)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2)
        self._pool.clear()
        self._idle.clear()
        self._waking = 0
        self._deadlines.clear()
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None

    def _complete(self, entry: ElementEntry, resolution: Resolution) -> None:
        # Hand answers to the queue, and wake whoever drives the operator, once per loop
        # iteration, not once per completion: calls answered together (one burst of responses)
        # then leave, and are replaced, in one round, for one lock round.
        self._completed.append((entry, resolution))
        if not self._notify_scheduled:
            self._notify_scheduled = True
            loop = self._loop
            assert loop is not None
            loop.call_soon(self._notify)

    def _notify(self) -> None:
        self._notify_scheduled = False
        completed, self._completed = self._completed, []
        queue = self._queue
        with self._lock:
            for entry, resolution in completed:
                queue.complete(entry, resolution)
            if queue.has_ready():   # wake the driver only when something may leave
                if self._progress is None:
                    self._cond.notify()
                else:
                    self._progress()

    async def _run(self, entry: ElementEntry, task: asyncio.Task[None]) -> None:
        """The whole life of one element on the loop, in call task `task`: its admission, its
        calls under TIMEOUT (enforced by this operator's reaper, which cancels `task`), and its
        answer; always completes its entry unless cancelled by dispose."""
        started = time.perf_counter()
        resolver = self._resolver
        try:
            epoch = 0
            if resolver.admits:
                self._hand_on()            # admission may wait
                await resolver.admit(entry.payload)
                epoch = resolver.epoch()
            first = self._first_step(entry.payload, started, epoch)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - a bug here must still surface in the chain
            self._metrics.latency.record(time.perf_counter() - started)
            first = Fail(resolver.failure(entry.payload, exc))
        if type(first) is _Waiting:
            first.entry = entry
            await self._carry(first, task)
        else:
            self._complete(entry, first)

    def _first_step(self, row: Row, started: float, epoch: int) -> Resolution | _Waiting:
        """Start the element's call (it is admitted) and run it up to its first wait: its
        resolution if it answered without waiting, else what a call task needs to carry it on
        (the caller gives that its queue entry)."""
        resolver = self._resolver
        attempts = [0]
        self._running += 1                 # counted from admission: RATE and ADAPTIVE waits are not calls
        self._metrics.in_flight(self._running)
        admitted = self._loop.time()
        try:
            step = resolver.start(row, attempts)
            if type(step) is not types.CoroutineType:
                resolution = step          # answered without waiting: no TIMEOUT to watch
            else:
                try:
                    return _Waiting(step, step.send(None), attempts, started, admitted, epoch)
                except StopIteration as answered:
                    resolution = answered.value
        except asyncio.CancelledError:
            self._running -= 1
            raise
        except BaseException as exc:  # noqa: BLE001 - a bug here must still surface in the chain
            resolution = Fail(resolver.failure(row, exc))
        self._running -= 1
        self._metrics.latency.record(time.perf_counter() - started)
        return resolution

    async def _carry(self, waiting: _Waiting, task: asyncio.Task[None]) -> None:
        """Carry a call that waits on to its answer in call task `task`, under its TIMEOUT."""
        self._hand_on()
        resolver = self._resolver
        entry = waiting.entry
        assert entry is not None, "a waiting call is carried on once its element is in the queue"
        row = entry.payload
        deadline = self._arm_deadline(task, waiting.admitted + self.config.timeout_s)
        try:
            try:
                resolution = await resume(waiting.step, waiting.waits_on)
            finally:
                deadline.done = True
                self._running -= 1
        except asyncio.CancelledError:
            if not deadline.expired:
                raise                      # cancelled by dispose, not by the TIMEOUT
            task.uncancel()
            try:
                resolution = await resolver.expired(row, waiting.attempts[0], waiting.epoch)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # noqa: BLE001
                resolution = Fail(resolver.failure(row, exc))
        except BaseException as exc:  # noqa: BLE001 - a bug here must still surface in the chain
            resolution = Fail(resolver.failure(row, exc))
        finally:
            self._metrics.latency.record(time.perf_counter() - waiting.started)
        self._complete(entry, resolution)

    def _arm_deadline(self, task: asyncio.Task[None], at: float) -> _Deadline:
        """Watch the TIMEOUT, running out at loop time `at`, of the element call task `task` is
        running now (deadlines are armed in the order of `at`)."""
        loop = self._loop
        assert loop is not None
        deadline = _Deadline(at, task)
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
            if not deadline.done:
                deadline.expired = True
                deadline.task.cancel()
        self._reaper = loop.call_at(pending[0].at, self._reap) if pending else None
