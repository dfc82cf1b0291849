"""ENRICH ... STORE: every answer kept in the pipeline's answer store, so a request is paid once.

`StoredCall` wraps the operator's call (outside BATCH's gathering, so answers found in the store
never join a batch). For each element it takes the request key (`EnrichCall.request_key`: what
the request carries) and

1. looks it up in the store (the keys asked in one loop step go as one lookup): an answer
   younger than TTL is the element's answer, and nothing is called;
2. else takes the key's lease in the store: one task in the whole job calls a key while the
   others wait for its answer (they poll the store; a lease lapses after `LEASE_S` unless its
   holder renews it, so a task that died frees its keys within seconds);
3. calls, and writes the answer (a result or a miss) before the element goes on. Errors and
   timeouts are not stored: the lease is released and a later element or run tries again.

Elements of one task with an equal key share one lookup and one call, as CACHE's do.

BUDGET n CALLS: before a call the operator spends one unit of its run's counter, kept in the
store so every task shares it; once it is spent, elements whose answer is not in the store are
left unanswered (`BudgetSpent`): the resolver counts them (`unanswered`) and they do not leave.
Calls already in flight finish and are stored, so a rerun pays for none of them again.
"""
from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from dslc.runtime.calls.base import NOT_KNOWN, CallError, EnrichCall, check_result_types
from dslc.runtime.config import Enrich, Outcome
from dslc.runtime.core.operator import Row
from dslc.runtime.limits.budget import BudgetSpent
from dslc.runtime.limits.money import call_budget
from dslc.runtime.metrics import OperatorMetrics
from dslc.runtime.schema import results as result_types
from dslc.runtime.schema.provenance import marked
from dslc.runtime.store.base import UNREADABLE, AnswerStore, Join, Stored
from dslc.runtime.store.lost import through
from dslc.runtime.store.open_stores import store_for, use_secrets
from dslc.runtime.store.per_step import PerStep, unique
from dslc.runtime.wrappers.delegating import DelegatingCall
from dslc.runtime.wrappers.joinable import Joinable
from dslc.runtime.wrappers.model_watch import ModelWatch, watched
from dslc.runtime.wrappers.provider_batch import BatchLineFailed

LEASE_S = 5.0          # a lease lapses this long after its holder last renewed it
RENEW_S = 1.5          # how often a holder renews the leases of its calls in flight
POLL_S = (0.01, 0.2)   # first and longest wait between looks for an answer another task is getting


T = TypeVar("T")


class _Abandoned(Exception):
    """The element that was getting a key's answer gave up (its TIMEOUT): a follower tries itself."""


class StoredCall(DelegatingCall):
    """The answer store in front of a call (one per operator instance, loop thread only)."""

    counts_own_calls = True   # a stored answer is no call

    def __init__(self, inner: EnrichCall, config: Enrich, metrics: OperatorMetrics, counts_calls: bool = True) -> None:
        assert config.store is not None
        super().__init__(inner)
        self.config = config
        self.metrics = metrics
        self.counts_calls = counts_calls     # BATCH counts its calls itself (one per batch)
        self.operator = config.name
        self.location = config.store.location
        use_secrets(self.location, config.secrets)     # a `${NAME}` in ANSWERS, filled on the executor
        self.ttl_s = config.store.ttl_s
        self.owner = f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:12]}"
        # a miss is kept unless misses are retried (ON MISS RETRY): then only results are
        self.keeps = (lambda value: bool(value)) if config.on_miss is Outcome.RETRY else (lambda value: True)
        # BUDGET n CALLS, or n USD at a PRICE per call of an HTTP or PYTHON call (limits/money.py)
        self.budget = call_budget(config)
        self.budget_counter = f"budget:{config.name}:{config.store.run}"
        self.spent = False
        self._store: AnswerStore | None = None
        self._gets: PerStep[str, Stored | None] = PerStep(self._get_many)
        self._leases: PerStep[str, bool] = PerStep(self._lease_many)
        self._puts: PerStep[tuple[str, Any, Join | None], None] = PerStep(self._put_many)
        # what Spark joins an answer by, so a warm rerun finds it without Python (joinable.py)
        self._joinable = Joinable(config, inner)
        self._joinable = self._joinable if self._joinable.variant is not None else None
        self._releases: PerStep[str, None] = PerStep(self._release_many, quiet=True)
        self._spends: PerStep[int, int] = PerStep(self._spend_many)
        self._held: set[str] = set()                      # keys this instance is calling
        self._renewing: asyncio.Task[None] | None = None
        self._known: dict[str, Stored] = {}               # found by `lookup` (RATE admission)
        self._chunk_keys: dict[int, str | None] = {}       # request keys of the chunk `prefetch` looked up
        self._local: dict[str, asyncio.Future[Any]] = {}  # keys being resolved by an element here
        self._notes = config.provenance is not None          # PROVENANCE: a stored answer says so
        self._check = result_types.checker(config.returns)   # a stored answer fits today's RETURNS
        self._watch = ModelWatch(config, metrics) if watched(config) else None   # a model that changed

    # ----------------------------------------------------------------- the store, batched per loop step

    async def store(self) -> AnswerStore:
        if self._store is None:
            self._store = await store_for(self.location)
        return self._store

    def _through(self, operation: Callable[[AnswerStore], Awaitable[T]]) -> Awaitable[T]:
        """`operation` on the store; a store lost mid-run is waited for, else stops the run
        (store/lost.py), never the rows' error."""
        return through(self.store, self.location, operation)

    async def _get_many(self, keys: list[str]) -> list[Stored | None]:
        found = await self._found(keys)
        return [found.get(key) for key in keys]

    async def _found(self, keys: list[str]) -> dict[str, Stored]:
        """The stored answers of `keys` that can be read and fit today's RETURNS types. One that
        cannot (cut or edited, or stored before a column was retyped) is forgotten (if it is still
        the one read), so that its key is leased and called again and the answer written anew (a
        column added since is NULL in an answer without it, as in a fresh one)."""
        found = await self._through(lambda store: store.get_many(self.operator, unique(keys), self.ttl_s,
                                                                 unreadable=True))
        stale = [(key, stored.at) for key, stored in found.items() if not self._fits(stored.value)]
        if stale:
            await self._through(lambda store: store.forget(self.operator, stale))
            for key, _ in stale:
                del found[key]
        return found

    def _fits(self, value: Any) -> bool:
        if value is UNREADABLE:
            return False
        try:
            check_result_types(value, self._check)
        except CallError:
            return False
        return True

    async def _lease_many(self, keys: list[str]) -> list[bool]:
        held = await self._through(lambda store: store.lease(self.operator, unique(keys), self.owner, LEASE_S,
                                                             self.ttl_s))
        return [key in held for key in keys]

    async def _put_many(self, items: list[tuple[str, Any, Join | None]]) -> list[None]:
        joins = {key: join for key, _, join in items if join is not None}
        answers = [(key, value) for key, value, _ in items]
        await self._through(lambda store: store.put_many(self.operator, answers, self.ttl_s, joins))
        return [None] * len(items)

    def _join(self, row: Row, value: Any) -> Join | None:
        joinable = self._joinable
        if joinable is None:
            return None
        entry = joinable.entry(row, value)
        return Join(joinable.variant, *entry) if entry is not None else None

    async def _release_many(self, keys: list[str]) -> list[None]:
        await self._through(lambda store: store.release(self.operator, unique(keys), self.owner))
        return [None] * len(keys)

    async def _spend_many(self, amounts: list[int]) -> list[int]:
        total = await self._through(lambda store: store.spend(self.budget_counter, sum(amounts)))
        start = total - sum(amounts)
        out, running = [], start
        for amount in amounts:
            running += amount
            out.append(running)
        return out

    # ----------------------------------------------------------------- one element

    async def prefetch(self, rows: list[Row]) -> None:
        """Look the keys of a chunk of rows (an Arrow batch) up in one request: the rows whose
        answer is stored then answer at once, without a wait of their own."""
        request_key = self.inner.request_key
        memo = self._chunk_keys = {id(row): request_key(row) for row in rows}
        keys = [key for key in memo.values() if key is not None]
        if not keys:
            return
        if len(self._known) > 100_000:
            self._known.clear()
        self._known.update(await self._found(keys))

    prefetch.wanted = True   # type: ignore[attr-defined]

    def _key(self, row: Row) -> str | None:
        """The row's request key, made once for the rows of the chunk being looked up (they are
        alive while it is, so their ids are theirs)."""
        key = self._chunk_keys.get(id(row), NOT_KNOWN)
        return self.inner.request_key(row) if key is NOT_KNOWN else key

    def known_answer(self, row: Row) -> Any:
        """The row's answer if the chunk's lookup found it (a store hit), else NOT_KNOWN."""
        if not self._known:
            return NOT_KNOWN
        key = self._key(row)
        found = self._known.get(key) if key is not None else None
        if found is None:
            return NOT_KNOWN
        return self._hit(found)

    async def lookup(self, row: Row) -> bool:
        """True when the row's answer is in the store (kept for its call, which then costs
        nothing): RATE admits only elements that will call."""
        key = self._key(row)
        if key is None:
            return False
        if key in self._known:
            return True
        found = await self._gets(key)
        if found is None:
            return False
        self._known[key] = found
        return True

    async def __call__(self, row: Row) -> Any:
        key = self._key(row)
        if key is None:
            return await self._pay(row)
        known = self._known.get(key)
        if known is not None:
            return self._hit(known)
        while True:
            shared = self._local.get(key)
            if shared is None:
                break
            try:
                # shield: a follower's TIMEOUT must not cancel the element getting the answer
                value = await asyncio.shield(shared)
                return marked(value, "cache") if self._notes else value
            except _Abandoned:
                continue
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._local[key] = future
        try:
            value = await self._resolve(row, key)
        except BaseException as exc:
            if not future.done():
                future.set_exception(_Abandoned() if isinstance(exc, asyncio.CancelledError) else exc)
                future.exception()   # followers may all have gone
            raise
        else:
            future.set_result(value)
            return value
        finally:
            if self._local.get(key) is future:
                del self._local[key]

    async def _resolve(self, row: Row, key: str) -> Any:
        """The stored answer, or the one this element gets (holding the key's lease), or the one
        another task got while this one waited."""
        wait = POLL_S[0]
        while True:
            found = await self._gets(key)
            if found is not None:
                return self._hit(found)
            if await self._leases(key):
                break
            await asyncio.sleep(wait)          # another task is calling it: its answer comes soon
            wait = min(wait * 2, POLL_S[1])
        self._held.add(key)
        self._keep_renewing()
        try:
            value = await self._pay(row)
        except BaseException:
            self._held.discard(key)
            self._releases(key)                # not stored: another element or run may try
            raise
        if self.keeps(value):
            # written before the element goes on; shielded: a TIMEOUT now must not lose a paid answer
            await asyncio.shield(self._puts((key, value, self._join(row, value))))
        else:
            self._releases(key)
        self._held.discard(key)
        if self._watch is not None:
            await self._watch.seen(await self.store(), value)
        return value

    def _hit(self, found: Stored) -> Any:
        self.metrics.counters["store_hits"] += 1
        return marked(found.value, "store", found.at) if self._notes else found.value

    async def _pay(self, row: Row) -> Any:
        """The call itself, if the BUDGET allows it."""
        if self.budget is not None:
            if self.spent or await self._spends(1) > self.budget:
                self.spent = True
                raise BudgetSpent(f"BUDGET {self.budget} CALLS of '{self.operator}' is spent")
        if not self.counts_calls:
            return await self.inner(row)
        counters = self.metrics.counters
        counters["calls"] += 1
        counters["elements_called"] += 1
        try:
            return await self.inner(row)
        except (BudgetSpent, BatchLineFailed):   # BUDGET n TOKENS, or TIER BATCH's failed line: not sent
            counters["calls"] -= 1
            counters["elements_called"] -= 1
            raise

    # ----------------------------------------------------------------- leases of calls in flight

    def _keep_renewing(self) -> None:
        if self._renewing is None or self._renewing.done():
            self._renewing = asyncio.ensure_future(self._renew())

    async def _renew(self) -> None:
        """Renew this instance's leases while it holds any (so they lapse soon after it dies)."""
        while self._held:
            await asyncio.sleep(RENEW_S)
            if self._held:
                try:
                    await (await self.store()).renew(self.operator, list(self._held), self.owner, LEASE_S)
                except Exception:  # noqa: BLE001 - a lapsed lease costs at most one more call
                    pass

    async def flush(self) -> None:
        """Wait until every answer received has been written (end of input)."""
        await self._puts.drain()
