"""BATCH n [WITHIN d]: many elements share one call, while each element keeps its own life.

`BatchingCall` is an `EnrichCall` like the others, so the operator and the element resolver
do not change: each element still awaits `call(row)` under its own TIMEOUT, RETRY, CACHE and
ON ... policies. Behind that call the element joins a pending list; a batch of up to n pending
elements leaves as one `call_batch(rows)` of the wrapped adapter

- when it holds n elements, when d has passed since its first element (d = 0: at once), or when
  the input has ended (`flush`), and
- only while fewer than ceil(CAPACITY / n) batch calls are running (the call slots): elements
  that arrive while every slot is busy wait and fill the next batch, so batches grow with load.

Elements with an equal key (the CACHE key: what the request carries) pending or in flight share
one slot of a batch and its answer. Item i of the answer is element i's own answer, checked on
its own: a bad item fails only its element. A failed call (an error, an answer of the wrong
length) fails every element in it; each one's RETRY then sends it again, after the same BACKOFF,
so they travel together in a later batch. An element that gives up (its TIMEOUT) leaves its
slot; a batch call whose elements have all given up is cancelled. RATE counts calls (batches).

An element may also `join` a batch without awaiting it (core/joined_calls.py: no task, coroutine
or future per element): a slot's waiters are `settle` callbacks, an awaiting element's being one
that sets its own future, so one waiter giving up never cancels another's answer.
"""
from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

from dslc.runtime.calls.base import EnrichCall
from dslc.runtime.config import Enrich
from dslc.runtime.core.operator import Row
from dslc.runtime.limits.job_rate import JobRate
from dslc.runtime.limits.rate import TokenBucket, bucket_for
from dslc.runtime.metrics import OperatorMetrics
from dslc.runtime.wrappers.delegating import DelegatingCall
from dslc.runtime.wrappers.stored import BudgetSpent

#: a waiter of a slot: called once with its answer, or its error (`asyncio.CancelledError`: none will come)
Settle = Callable[[Any, BaseException | None], None]


class _Slot:
    """One element's place in a batch, shared by the waiters of an equal key: each waiter is a
    `settle(value, error)` callback (an awaiting element's future, or a joined element's own)."""

    __slots__ = ("row", "key", "waiters", "since", "call", "done")

    def __init__(self, row: Row, key: Hashable | None, since: float) -> None:
        self.row = row
        self.key = key
        self.waiters: list[Settle] = []
        self.since = since
        self.call: asyncio.Task[None] | None = None   # the batch call carrying it, once sent
        self.done = False                             # answered, failed or abandoned


class BatchingCall(DelegatingCall):
    """Gathers the per-element calls of one operator instance into batch calls (loop thread only)."""

    counts_own_calls = True   # one call per batch
    gathers = True            # every element must join its batch in the loop round it came

    def __init__(self, inner: EnrichCall, config: Enrich, metrics: OperatorMetrics) -> None:
        assert config.batch is not None
        super().__init__(inner)
        self.config = config
        self.size = config.batch.size
        self.within_s = config.batch.within_s
        self.slots = max(1, math.ceil(config.capacity / self.size))
        self.metrics = metrics
        self.bucket: TokenBucket | JobRate | None = None
        if config.rate:   # with an answer store, one RATE for the whole job (limits/job_rate.py)
            self.bucket = (JobRate(config.store.location, config.name, config.rate.per_second) if config.store
                           else bucket_for(config.rate))
        self._pending: deque[_Slot] = deque()
        self._by_key: dict[Hashable, _Slot] = {}
        self._running: dict[asyncio.Task[None], list[_Slot]] = {}
        self._dispatch_scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._flushing = False

    # ----------------------------------------------------------------- one element

    async def __call__(self, row: Row) -> Any:
        """The element's answer from the batch it travels in (or its call's error)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def settle(value: Any, error: BaseException | None) -> None:
            if future.done():            # its waiter gave up meanwhile
                return
            if error is None:
                future.set_result(value)
            elif isinstance(error, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(error)

        slot = self.join(row, settle)
        try:
            # its own future: one waiter giving up (its TIMEOUT) cancels no other waiter's answer
            return await future
        finally:
            if not slot.done:
                self.leave(slot, settle)

    def join(self, row: Row, settle: Settle) -> _Slot:
        """Hand `row` to the next batch without awaiting it: `settle(value, error)` is called
        with its item of the answer, or the error of its call (on the loop, once). An element
        whose key is pending or in flight shares that one's slot. Returns the ticket `leave` takes."""
        key = self.inner.cache_key(row)
        slot = self._by_key.get(key) if key is not None else None
        if slot is not None and not slot.done:
            self.metrics.add("coalesced")
        else:
            slot = _Slot(row, key, asyncio.get_running_loop().time())
            if key is not None:
                self._by_key[key] = slot
            self._pending.append(slot)
            self._schedule()
        slot.waiters.append(settle)
        return slot

    def leave(self, slot: _Slot, settle: Settle) -> None:
        """The waiter `settle` gives up its place (its TIMEOUT): the slot goes with its last waiter."""
        waiters = slot.waiters
        if settle in waiters:
            waiters.remove(settle)
        if not waiters and not slot.done:
            self._abandon(slot)

    def _abandon(self, slot: _Slot) -> None:
        """Nobody waits for this slot any more: forget it, and stop a call nobody waits for."""
        if self._by_key.get(slot.key) is slot:
            del self._by_key[slot.key]
        slot.done = True
        call = slot.call
        if call is not None and all(s.done for s in self._running.get(call, ())):
            call.cancel()

    # ----------------------------------------------------------------- batches

    def flush(self) -> None:
        """The input has ended: send what is pending without waiting for WITHIN."""
        self._flushing = True
        self._schedule()

    end_of_input = flush

    @property
    def rate_bucket(self) -> TokenBucket | JobRate | None:  # type: ignore[override]
        return self.bucket

    def _schedule(self) -> None:
        """Dispatch once the elements handed over in this loop round have all joined."""
        if not self._dispatch_scheduled:
            self._dispatch_scheduled = True
            asyncio.get_running_loop().call_soon(self._dispatch)

    def _dispatch(self) -> None:
        self._dispatch_scheduled = False
        pending = self._pending
        loop = asyncio.get_running_loop()
        while pending and len(self._running) < self.slots:
            while pending and pending[0].done:      # abandoned while waiting
                pending.popleft()
            if not pending:
                break
            waited = loop.time() - pending[0].since
            if len(pending) < self.size and not self._flushing and waited < self.within_s:
                self._arm_timer(pending[0].since + self.within_s)
                return
            batch: list[_Slot] = []
            while pending and len(batch) < self.size:
                slot = pending.popleft()
                if not slot.done:
                    batch.append(slot)
            if batch:
                task = loop.create_task(self._send(batch))
                self._running[task] = batch
                for slot in batch:
                    slot.call = task

    def _arm_timer(self, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_at(at, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._dispatch()

    async def _send(self, batch: list[_Slot]) -> None:
        """One batch call; every slot's future gets its item of the answer, or the call's error."""
        try:
            if self.bucket is not None:
                await self.bucket.acquire()
            self.metrics.add("calls")
            self.metrics.add("elements_called", len(batch))
            answers = await self.inner.call_batch([slot.row for slot in batch])
        except asyncio.CancelledError as cancelled:
            for slot in batch:
                self._settle(slot, error=cancelled)
            raise
        except Exception as exc:  # noqa: BLE001 - each element's RETRY / ON ERROR decides
            if isinstance(exc, BudgetSpent):     # BUDGET n TOKENS: the batch was not sent
                self.metrics.add("calls", -1)
                self.metrics.add("elements_called", -len(batch))
            for slot in batch:
                self._settle(slot, error=exc)
        else:
            item = self.inner.batch_item
            for slot, answer in zip(batch, answers):
                if isinstance(answer, BaseException):    # the kind failed this item alone
                    self._settle(slot, error=answer)
                    continue
                try:
                    self._settle(slot, value=item(answer))
                except Exception as exc:  # noqa: BLE001 - a bad item fails its element only
                    self._settle(slot, error=exc)
        finally:
            task = asyncio.current_task()
            self._running.pop(task, None)  # type: ignore[arg-type]
            self._schedule()

    def _settle(self, slot: _Slot, value: Any = None, error: BaseException | None = None) -> None:
        if self._by_key.get(slot.key) is slot:
            del self._by_key[slot.key]
        if slot.done:
            return
        slot.done = True
        for settle in slot.waiters:
            settle(value, error)
