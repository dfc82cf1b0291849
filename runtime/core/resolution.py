"""How one ENRICH element is resolved: attempts, RETRY, CACHE, the timeout answer, its outcome.

This is the per-element half of the async operator, as Flink keeps its ResultHandler and retry
delegator apart from the AsyncWaitOperator's queue: plain asyncio, no threads, no queue, no
deadlines. `ElementResolver.attempt(row, attempts)` runs the retry loop and is what the
operator's TIMEOUT cancels; `timed_out(row, attempts)` then decides the element (a user
`timeout(row)` answer, or ON TIMEOUT). Both return a `Resolution`, the element's fate:
rows to emit, a dead letter, dropped, or a failure to raise at the emission point.
`resolve(row)` chains the two under an `asyncio.timeout`, so the whole contract can be
exercised on one event loop without the operator (tests, simple drivers).
"""
from __future__ import annotations

import asyncio
import inspect
import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any, TypeVar

from dslc.runtime.calls import errors
from dslc.runtime.calls.base import CallError, EnrichCall, answer_error
from dslc.runtime.config import Enrich, Outcome
from dslc.runtime.core.operator import ElementFailure, Row
from dslc.runtime.core.refusals import RUN_STOPS, RefusalGuard, guard_for
from dslc.runtime.limits.adaptive import AdaptiveLimit
from dslc.runtime.limits.cache import CacheStats, TtlLruCache, cache_for
from dslc.runtime.limits.job_rate import JobRate
from dslc.runtime.limits.outage import OutageBreaker, breaker_for, is_outage_error
from dslc.runtime.limits.rate import TokenBucket, bucket_for
from dslc.runtime.metrics import OperatorMetrics
from dslc.runtime.secrets import scrub
from dslc.runtime.wrappers.stored import BudgetSpent, StoredCall


class Rows:
    """Answer: rows to emit."""

    __slots__ = ("rows",)

    def __init__(self, rows: list[Row]) -> None:
        self.rows = rows

    def __repr__(self) -> str:
        return f"Rows({self.rows!r})"


class DeadLetter:
    """Answer: one dead-letter record."""

    __slots__ = ("letter",)

    def __init__(self, letter: Row) -> None:
        self.letter = letter

    def __repr__(self) -> str:
        return f"DeadLetter({self.letter!r})"


class Drop:
    """Answer: nothing leaves (a DROP policy)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Drop()"


class Fail:
    """Answer: the task fails with this error when the element reaches the emission point."""

    __slots__ = ("error",)

    def __init__(self, error: ElementFailure) -> None:
        self.error = error

    def __repr__(self) -> str:
        return f"Fail({self.error!r})"


class Unanswered(Drop):
    """Answer: nothing leaves, the operator's BUDGET being spent (counted as `unanswered`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Unanswered()"


DROP = Drop()
UNANSWERED = Unanswered()
Resolution = Rows | DeadLetter | Drop | Fail

T = TypeVar("T")


@types.coroutine
def resume(step: Coroutine[Any, Any, T], waits_on: Any) -> Generator[Any, Any, T]:
    """Await coroutine `step`, whose first step already ran and yielded `waits_on`: what
    `await step` would do from there (values sent and exceptions thrown in by the task go on
    to `step`)."""
    while True:
        try:
            sent = yield waits_on
        except GeneratorExit:
            step.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - a cancellation, passed on to the call
            try:
                waits_on = step.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                waits_on = step.send(sent)
            except StopIteration as done:
                return done.value


@types.coroutine
def _returning(value: Any) -> Generator[Any, Any, Any]:
    """An awaitable of a first attempt that already answered `value`."""
    return value
    yield  # pragma: no cover - makes this a generator


@types.coroutine
def _raising(error: BaseException) -> Generator[Any, Any, Any]:
    """An awaitable of a first attempt that already failed with `error`."""
    raise error
    yield  # pragma: no cover - makes this a generator


def normalize(result: Any) -> list[dict[str, Any]]:
    """The call's answer as a list of result dicts ([] is a miss)."""
    if result is None:
        return []
    if isinstance(result, dict):
        return [result]
    if isinstance(result, (list, tuple)):
        for item in result:
            if not isinstance(item, dict):
                raise answer_error(f"result list holds a {type(item).__name__}, expected objects")
        return list(result)
    raise answer_error(f"result is a {type(result).__name__}, expected an object, a list of objects or None")


class ElementResolver:
    """Decides each element of one ENRICH (one per operator instance, on the worker's loop)."""

    def __init__(self, config: Enrich, call: EnrichCall, metrics: OperatorMetrics,
                 limit: AdaptiveLimit | None = None) -> None:
        self.config = config
        self.name = config.name
        self.call = call
        self.metrics = metrics
        self.cache_stats = CacheStats()
        self.cache: TtlLruCache | None = cache_for(config.name, config.cache, config.call) if config.cache else None
        # BATCH: the batching call counts calls and spends RATE tokens per batch, not per element
        self.batched = config.batch is not None
        # STORE: the stored call counts the calls it makes (an answer found in the store is none)
        self.stored: StoredCall | None = call if isinstance(call, StoredCall) else None
        self._counts = not self.batched and self.stored is None
        self.bucket: TokenBucket | JobRate | None = None
        if config.rate and not self.batched:
            # with an answer store, one RATE for the whole job held by the store; else this task's share
            self.bucket = (JobRate(config.store.location, config.name, config.rate.per_second) if config.store
                           else bucket_for(config.rate))
        self._returns = tuple(c.name for c in config.returns)
        self.limit = limit          # CAPACITY n ADAPTIVE: told of answers and of push-back
        # ON OUTAGE PAUSE | FAIL: told of every call's outcome; holds elements during an outage
        self.breaker: OutageBreaker | None = breaker_for(config.outage, config.name, config.line)
        self._holding: dict[int, int] = {}     # id(row) -> breaker.answered when it began to hold
        # HTTP, MODEL, EMBEDDING: refused credentials or a service never answered stop the run;
        # until a first answer, its gate admits elements (then `on_admits_changed` is called)
        self.guard: RefusalGuard | None = guard_for(config)
        self._admits = self.bucket is not None or limit is not None or self.breaker is not None
        self.admits = self._admits or self.guard is not None
        self.on_admits_changed: Callable[[], None] | None = None
        if self.guard is not None:
            self.guard.on_open = self._gate_opened
        self._retries = config.retry.attempts if config.retry else 0
        self._cacheable = (lambda v: bool(v)) if config.on_miss is Outcome.RETRY else (lambda v: True)
        # nothing comes between an element and its call; `start` then steps the first attempt
        # itself if the call may answer at once (which the call knows once it is open)
        self._inline = self.cache is None and not self.admits and not self.batched and self.stored is None

    def _gate_opened(self) -> None:
        """The guard's gate opened (a first answer): elements need no admission for it any more."""
        self.admits = self._admits
        if self.on_admits_changed is not None:
            self.on_admits_changed()

    async def resolve(self, row: Row) -> Resolution:
        """The whole contract for one element on the running loop (TIMEOUT by asyncio.timeout)."""
        attempts = [0]
        if self.admits:
            await self.admit(row)
        try:
            async with asyncio.timeout(self.config.timeout_s):
                step = self.start(row, attempts)
                return await step if type(step) is types.CoroutineType else step
        except TimeoutError:
            return await self.timed_out(row, attempts[0])

    async def admit(self, row: Row | None = None) -> None:
        """Wait for the first RATE token and, with ADAPTIVE, the first attempt's slot; outside
        TIMEOUT, since waiting for quota is not the call. `attempt` must follow at once. With
        STORE, an element whose answer is stored needs no RATE token (it calls nothing)."""
        if self.bucket is not None:
            stored = self.stored
            if stored is None or row is None or not await stored.lookup(row):
                await self.bucket.acquire()
        if self.limit is not None:
            await self.limit.acquire()
        if self.breaker is not None and self.breaker.open:
            await self.breaker.admit()
        if self.guard is not None and self.guard.gated:
            await self.guard.admit()

    def start(self, row: Row, attempts: list[int]) -> Resolution | Coroutine[Any, Any, Resolution]:
        """Start the element's calls (it is admitted): its resolution when the first attempt
        answered with results without waiting, else the rest of `attempt` as a coroutine not yet
        started, which picks the first attempt up where it is.

        Without CACHE, RATE, ADAPTIVE or BATCH nothing comes between the element and its call,
        so for a call that may answer at once (an async Python function, a replayed recording)
        the first attempt runs here, the call's own coroutine stepped directly: an answer given
        at once costs no coroutine of the resolver's and no StopIteration of its own."""
        if not (self._inline and self.call.answers_at_once):   # known once the call is open
            return self.attempt(row, attempts)
        attempts[0] = 1
        self._count_call()
        call = self.call
        try:
            step = call.start(row)
            waits_on = step.send(None)
        except StopIteration as done:
            try:
                results = normalize(call.finish(done.value))
            except Exception as exc:  # noqa: BLE001 - the ON ERROR policy decides, in `attempt`
                return self.attempt(row, attempts, _raising(exc))
            if results:
                return self.answered(row, results)
            return self.attempt(row, attempts, _returning(done.value))   # a miss: RETRY may call again
        except Exception as exc:  # noqa: BLE001 - as above
            return self.attempt(row, attempts, _raising(exc))
        return self.attempt(row, attempts, resume(step, waits_on))

    async def attempt(self, row: Row, attempts: list[int], first: Any = None) -> Resolution:  # noqa: C901 - to be split (#42)
        """Call until an answer, a spent RETRY or a final error; `attempts[0]` counts the calls.
        `first`, from `start`, awaits the first attempt's answer, already begun and counted.
        With ADAPTIVE each attempt holds a slot of the limit (the first one's taken by `admit`)
        only while its request is out, not while it sleeps before a retry."""
        cfg = self.config
        retries = self._retries
        asked = 0.0     # a Retry-After of the last answer: wait at least this long
        limit = self.limit
        breaker = self.breaker
        held = 0        # extra tries while a failure may be the service's (ON OUTAGE)
        met_5xx = False  # this element got a 5xx answer (counted once, for the diagnosis)
        rejoin = None   # a held element: what to wait for before it sends again (outside its ADAPTIVE
                        # slot), then RATE and ADAPTIVE admit it as a first attempt
        while True:
            if rejoin is not None:
                await rejoin
            if first is None:
                attempts[0] += 1
                if attempts[0] > 1:
                    self.metrics.add("retries")
                    assert cfg.retry is not None
                    delay = max(cfg.retry.delay(attempts[0] - 1), asked)
                    if delay > 0:
                        await asyncio.sleep(delay)
                if attempts[0] > 1 or rejoin is not None:
                    rejoin = None
                    if self.guard is not None:
                        self.guard.check()
                    if self.bucket is not None:
                        await self.bucket.acquire()
                    if limit is not None:
                        await limit.acquire()
            epoch = limit.epoch if limit is not None else 0
            try:
                if first is not None:
                    begun, first = first, None
                    results = normalize(self.call.finish(await begun))
                elif self.cache is None:
                    self._count_call()
                    results = normalize(await self.call(row))
                else:
                    results = normalize(await self._cached_call(row))
            except asyncio.CancelledError:
                raise
            except BudgetSpent:
                if self.guard is not None:
                    self.guard.not_sent()
                self.metrics.add("unanswered")
                return UNANSWERED
            except Exception as exc:  # noqa: BLE001 - the ON ERROR policy decides
                error_class = errors.error_class(exc)
                if self.guard is not None:
                    self.guard.failed_call(error_class, exc)    # raises the run's stop when it is due
                status = exc.status if isinstance(exc, CallError) else None
                if status is not None and (status == 429 or status >= 500):
                    counters = self.metrics.counters
                    counters["pushed_back"] += 1
                    if status == 429:
                        counters["answered_429"] += 1
                    elif not met_5xx:       # elements, not calls: one key's 500s are not an overload
                        met_5xx = True
                        counters["elements_5xx"] += 1
                overload = isinstance(exc, CallError) and exc.overload
                asked = (exc.retry_after_s or 0.0) if overload else 0.0
                if overload and limit is not None:
                    limit.overloaded(epoch)
                    limit.pause(asked)
                if breaker is not None:
                    if is_outage_error(exc):
                        rejoin = self._hold(breaker, row, attempts, held, exc)
                        if rejoin is not None:
                            held += 1
                            continue
                    else:
                        breaker.succeeded()     # the service answered, with an error of the element
                if attempts[0] <= retries and error_class in errors.RETRIED:
                    continue
                self.metrics.add("errors")
                return self.policy(cfg.on_error, "error", f"{type(exc).__name__}: {exc}", row, attempts[0], exc)
            finally:
                if limit is not None:
                    limit.release()
            if breaker is not None:
                breaker.succeeded()
                self._holding.pop(id(row), None)
            if limit is not None:
                limit.succeeded()
            if self.guard is not None:
                self.guard.succeeded_call()
            if results:
                return self.answered(row, results)
            if cfg.on_miss is Outcome.RETRY and attempts[0] <= retries:
                continue
            self.metrics.add("misses")
            return self.policy(cfg.on_miss, "miss", "no result", row, attempts[0])

    def _hold(self, breaker: OutageBreaker, row: Row, attempts: list[int], held: int,
              exc: BaseException) -> Coroutine[Any, Any, None] | None:
        """An attempt failed the way a service that is down fails: tell the breaker, and say
        whether the element tries again instead of its RETRY / ON ERROR going on: what to wait
        for first (`attempts` reset; the wait raises OutageStop when the breaker fails the task),
        or None (RETRY goes on, or the failure is the element's)."""
        breaker.failed(exc)
        mark = self._holding.setdefault(id(row), breaker.answered)
        if not breaker.open:
            if attempts[0] <= self._retries:
                return None             # RETRY goes on as usual
            if breaker.answered_since(mark):
                self._holding.pop(id(row), None)
                return None             # others are answered: this element's failure, ON ERROR decides
            attempts[0] = 0
            return breaker.settle(held)
        attempts[0] = 0
        return breaker.admit()

    async def _cached_call(self, row: Row) -> Any:
        """One call through the cache (a row without a cache key calls directly)."""
        call, cache = self.call, self.cache
        assert cache is not None
        key = call.cache_key(row)
        if key is not None:
            async def counted() -> Any:
                self._count_call()
                return await call(row)

            return await cache.get_or_call((self.name, key), counted, self.cache_stats, cacheable=self._cacheable)
        self._count_call()
        return await call(row)

    def _count_call(self) -> None:
        if self._counts:
            counters = self.metrics.counters
            counters["calls"] += 1
            counters["elements_called"] += 1

    async def timed_out(self, row: Row, attempts: int, rounds: int = 0) -> Resolution:
        """The element's TIMEOUT ran out: a user `timeout(row)` answers it, else ON TIMEOUT.
        With ON OUTAGE a timeout may be the service's: the element is held and tried again (under
        a TIMEOUT of its own), up to the breaker's threshold of times while it is not open."""
        if self.guard is not None:
            self.guard.timed_out()
        breaker = self.breaker
        if breaker is not None:
            holding = self._holding.pop(id(row), None)
            if holding is None and not breaker.open:      # a call timed out (not a hold)
                breaker.failed(f"timed out after {self.config.timeout_s:g}s")
            if breaker.open or (rounds < breaker.config.threshold
                                and not breaker.answered_since(holding if holding is not None else breaker.answered)):
                await (breaker.admit() if breaker.open else breaker.settle(rounds))
                return await self._again(row, rounds + 1)
        self.metrics.add("timeouts")
        handler = self.call.timeout_handler
        if handler is not None:
            return await self._answer_timeout(handler, row, attempts)
        cfg = self.config
        return self.policy(cfg.on_timeout, "timeout", f"timed out after {cfg.timeout_s}s", row, attempts)

    async def _again(self, row: Row, rounds: int) -> Resolution:
        """An element held by ON OUTAGE, resolved again from its first attempt."""
        attempts = [0]
        try:
            async with asyncio.timeout(self.config.timeout_s):
                return await self.attempt(row, attempts)
        except TimeoutError:
            return await self.timed_out(row, attempts[0], rounds)

    async def _answer_timeout(self, handler: Any, row: Row, attempts: int) -> Resolution:
        """A user `timeout(row)` answers a timed-out element; its answer counts as a result."""
        cfg = self.config
        try:
            if inspect.iscoroutinefunction(handler):
                result = await asyncio.wait_for(handler(dict(row)), cfg.timeout_s)
            else:
                result = handler(dict(row))   # on the loop: it must be quick
            results = normalize(result)
        except Exception as exc:  # noqa: BLE001
            self.metrics.add("errors")
            return self.policy(cfg.on_error, "error", f"timeout(): {type(exc).__name__}: {exc}", row, attempts, exc)
        if results:
            return self.answered(row, results)
        self.metrics.add("misses")
        miss = Outcome.NULL if cfg.on_miss is Outcome.RETRY else cfg.on_miss
        return self.policy(miss, "miss", "no result (timeout handler)", row, attempts)

    def from_store(self, row: Row, value: Any) -> Resolution:
        """The resolution of an element whose answer came from the answer store (no call)."""
        results = normalize(value)
        if results:
            return self.answered(row, results)
        self.metrics.add("misses")
        return self.policy(self.config.on_miss, "miss", "no result (stored)", row, 0)

    def answered(self, row: Row, results: list[dict[str, Any]]) -> Rows:
        """The rows an element's results make (one result, the usual answer, without a comprehension)."""
        if len(results) == 1:
            return Rows([self.output_row(row, results[0])])
        return Rows([self.output_row(row, result) for result in results])

    def output_row(self, row: Row, result: dict[str, Any]) -> Row:
        """The input row with the RETURNS columns of one result (missing ones NULL)."""
        out = dict(row)
        for column in self._returns:
            out[column] = result.get(column)
        return out

    def policy(self, outcome: Outcome, kind: str, error: str, row: Row, attempts: int,
               cause: BaseException | None = None) -> Resolution:
        """What a miss, timeout or error becomes under `outcome`. The error's text goes through
        `secrets.scrub` (secret values, a URL's user:password and credential-like query values)
        before it reaches a metric, a dead letter or a task failure, and an original exception
        whose text held one is not passed on. Its class (calls/errors.py; `timeout` and `miss`
        for those) goes with it into the metrics and the dead letter."""
        if kind == "error":
            error_class = errors.error_class(cause) if cause is not None else errors.TRANSIENT
        else:
            error_class = kind
        if kind != "miss":
            secrets = self.config.secrets
            error = scrub(error, secrets)
            general = getattr(cause, "general", None)   # the message without this element's values
            self.metrics.note_error(f"{kind}: {error}", f"{error_class}: " + (
                scrub(f"{type(cause).__name__}: {general}", secrets) if general else error))
            if cause is not None:
                text = f"{type(cause).__name__}: {cause}"
                if secrets or scrub(text) != text:
                    masked = CallError(scrub(text, secrets), error_class=error_class)
                    masked.__suppress_context__ = True
                    cause = masked
        elif outcome is Outcome.DEAD_LETTER:
            self.metrics.note_error(None, f"miss: {error}")
        if outcome is Outcome.NULL or outcome is Outcome.RETRY:  # RETRY exhausted -> NULL
            return Rows([self.output_row(row, {})])
        if outcome is Outcome.DROP:
            return DROP
        if outcome is Outcome.DEAD_LETTER:
            letter = {
                "operator": self.name, "line": self.config.line, "kind": kind, "error_class": error_class,
                "error": error, "attempts": attempts, "key": self.key(row), "row": dict(row),
            }
            raw = getattr(cause, "raw", None)
            if raw is not None:     # what the service answered (a model's content): kept to look at
                letter["answer"] = raw
            return DeadLetter(letter)
        guard = self.guard
        if error_class == errors.CREDENTIALS and guard is not None and not guard.succeeded:
            cause = guard.credentials()     # ON ERROR FAIL on a refusal with none answered: say why
        return Fail(self.failure(row, cause if cause is not None else f"{kind}: {error}"))

    def key(self, row: Row) -> dict[str, Any]:
        """The element's key columns, for error messages and dead letters."""
        return {c: row.get(c) for c in self.config.key_columns}

    def failure(self, row: Row, cause: BaseException | str) -> ElementFailure:
        """The task failure of this element (its text through `secrets.scrub` when that changes it)."""
        if isinstance(cause, RUN_STOPS):      # their messages show secrets as written only
            return ElementFailure(self.name, self.config.line, self.key(row), cause)
        secrets = self.config.secrets
        text = cause if isinstance(cause, str) else f"{type(cause).__name__}: {cause}"
        if secrets or scrub(text) != text:
            cause = scrub(text, secrets)
        return ElementFailure(self.name, self.config.line, self.key(row), cause)
