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
import time
import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any, TypeVar

from dslc.runtime.calls import errors
from dslc.runtime.calls.base import CallError, EnrichCall, UnsendableRequest, answer_error
from dslc.runtime.config import EmbeddingCall, Enrich, ModelCall, Outcome
from dslc.runtime.core.operator import ElementFailure, Row
from dslc.runtime.core.provenance import Stamper
from dslc.runtime.core.refusals import RUN_STOPS, RefusalGuard, guard_for
from dslc.runtime.limits.adaptive import AdaptiveLimit
from dslc.runtime.limits.cache import CacheStats, TtlLruCache, cache_for
from dslc.runtime.limits.job_rate import JobRate
from dslc.runtime.limits.outage import OutageBreaker, breaker_for
from dslc.runtime.limits.rate import TokenBucket, bucket_for
from dslc.runtime.metrics import OperatorMetrics
from dslc.runtime.policies.adaptive import AdaptiveAdmission
from dslc.runtime.policies.base import AGAIN, EXPIRES, AttemptPolicy, Element, hooks
from dslc.runtime.policies.base import UNANSWERED as LEFT_UNANSWERED
from dslc.runtime.policies.budget import BudgetWatch
from dslc.runtime.policies.outage import OutageHold
from dslc.runtime.policies.pushback import PushBack
from dslc.runtime.policies.rate import RateAdmission
from dslc.runtime.policies.refusal import RefusalWatch
from dslc.runtime.policies.retry import Repeater
from dslc.runtime.secrets import scrub


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
_CALLED = [True]     # an element without CACHE: its own call answered it (never written)
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
def returning(value: Any) -> Generator[Any, Any, Any]:
    """An awaitable of a first attempt that already answered `value`."""
    return value
    yield  # pragma: no cover - makes this a generator


@types.coroutine
def raising(error: BaseException) -> Generator[Any, Any, Any]:
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
    """Decides each element of one ENRICH (one per operator instance, on the worker's loop).

    What comes around an element's attempts (RETRY, RATE, ADAPTIVE, ON OUTAGE, BUDGET, refused
    credentials) is a policy object each (runtime/policies/), called through its hooks in the
    orders `__init__` sets out; this class runs the attempts and makes their answers rows."""

    def __init__(self, config: Enrich, call: EnrichCall, metrics: OperatorMetrics,
                 limit: AdaptiveLimit | None = None) -> None:
        self.config = config
        self.name = config.name
        self.call = call
        self.metrics = metrics
        self.cache_stats = CacheStats()
        self.cache: TtlLruCache | None = cache_for(config.name, config.cache, config.call) if config.cache else None
        # a wrapper that counts its calls (BATCH one per batch, STORE none for a stored answer)
        self._counts = not call.counts_own_calls
        self._returns = tuple(c.name for c in config.returns)
        # PROVENANCE AS col: each output row's struct (None: no such column, nothing to do per row)
        self.stamper: Stamper | None = Stamper(config, call) if config.provenance is not None else None
        # CAPACITY n ADAPTIVE: each attempt takes a slot of the adaptive limit of requests in flight
        if limit is None and config.adaptive:
            limit = AdaptiveLimit(config.capacity, config.batch.size if config.batch else 1)
        self.limit = limit
        self.retry = Repeater(config, metrics)
        self.rate: RateAdmission | None = None
        if config.rate and call.rate_bucket is None:   # BATCH spends RATE per batch itself
            # with an answer store, one RATE for the whole job held by the store; else this task's share
            bucket = (JobRate(config.store.location, config.name, config.rate.per_second) if config.store
                      else bucket_for(config.rate))
            self.rate = RateAdmission(bucket, call.lookup)
        adaptive = AdaptiveAdmission(limit) if limit is not None else None
        # ON OUTAGE PAUSE | FAIL: told of every call's outcome; holds elements during an outage
        self.breaker: OutageBreaker | None = breaker_for(config.outage, config.name, config.line)
        outage = OutageHold(self.breaker, self.retry.retries, config.timeout_s, metrics) if self.breaker else None
        # HTTP, MODEL, EMBEDDING: refused credentials or a service never answered stop the run;
        # until a first answer, its gate admits elements (then `on_admits_changed` is called)
        self.guard: RefusalGuard | None = guard_for(config)
        refusal = RefusalWatch(self.guard) if self.guard is not None else None
        budget = BudgetWatch(config, metrics)
        # the order each hook runs in: admission as the first attempt's (quota, then the slot,
        # then an outage's or the refusal gate's turn), a retry's re-admission the same after
        # its backoff, a failure told to the guard first (it may stop the run)
        self._admit = hooks(_present(self.rate, adaptive, outage), "admit")
        self._gate = hooks(_present(refusal), "admit")
        self._before = hooks(_present(outage, self.retry, refusal, self.rate, adaptive), "before")
        self._failed = hooks(_present(refusal, budget, PushBack(metrics), adaptive, outage, self.retry), "failed")
        self._missed = hooks(_present(self.retry), "missed")
        self._answered = hooks(_present(outage, adaptive, refusal), "answered")
        self._released = hooks(_present(adaptive), "released")
        self._timed_out = hooks(_present(refusal, outage), "timed_out")
        self._expired = hooks(_present(adaptive), "expired")
        self._at_end = hooks(_present(refusal, budget), "at_end")
        self._admission = self._admit + self._gate
        self.admits = bool(self._admission)
        # an element may wait to be let through (limits/waits.py): RATE's tokens, or a MODEL's or
        # EMBEDDING's TOKENS PER MINUTE and the limits its service states; else nothing is noted
        self.may_wait = config.rate is not None or isinstance(config.call, (ModelCall, EmbeddingCall))
        self.on_admits_changed: Callable[[], None] | None = None
        if self.guard is not None:
            self.guard.on_open = self._gate_opened
        self._cacheable = (lambda v: bool(v)) if config.on_miss is Outcome.RETRY else (lambda v: True)
        # nothing comes between an element and its call; `start` then steps the first attempt
        # itself if the call may answer at once (which the call knows once it is open)
        self._inline = self.cache is None and not self.admits and self._counts

    @property
    def bucket(self) -> TokenBucket | JobRate | None:
        """The RATE the operator's calls spend (this resolver's, or the call's own: BATCH)."""
        return self.rate.bucket if self.rate is not None else self.call.rate_bucket

    @property
    def joins_batches(self) -> bool:
        """Whether an element's first attempt may join a batch without a task of its own
        (core/joined_calls.py): the call passes `join` on (BATCH, no STORE), nothing comes
        around a first attempt but RETRY's count (no admission, CACHE, ADAPTIVE, ON OUTAGE, guard)
        and no wait to be let through is kept out of its latency (RATE, a MODEL's limits)."""
        return (self.call.join is not None and not self.admits and self.cache is None and self.limit is None
                and self.breaker is None and self.guard is None and not self.may_wait and len(self._before) == 1)

    def joined(self, row: Row, value: Any, began: float) -> Resolution | None:
        """The resolution of an element whose first attempt joined a batch and was answered
        `value` (`joins_batches`): its rows, or its miss when ON MISS decides at once; None when
        the attempt loop must go on (ON MISS RETRY may call again). Raises what a bad answer raises."""
        results = normalize(self.call.finish(value))
        if results:
            return self.answered(row, results, 1, began)
        if self.retry.on_miss and self.retry.retries:
            return None
        self.metrics.add("misses")
        return self.policy(self.config.on_miss, "miss", "no result", row, 1)

    def _gate_opened(self) -> None:
        """The guard's gate opened (a first answer): elements need no admission for it any more."""
        self.admits = bool(self._admit)
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
        """Wait for what admits the first attempt (the first RATE token, ADAPTIVE's slot, an
        outage's turn, the refusal gate), outside TIMEOUT, since waiting for quota is not the
        call. `attempt` must follow at once."""
        for admit in self._admission:
            waits = admit(row)
            if waits is not None:
                await waits

    def epoch(self) -> int:
        """ADAPTIVE's epoch now (0 without): given back to `expired` for an element admitted now."""
        return self.limit.epoch if self.limit is not None else 0

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
        began = time.perf_counter() if self.stamper is not None else None
        try:
            step = call.start(row)
            waits_on = step.send(None)
        except StopIteration as done:
            try:
                results = normalize(call.finish(done.value))
            except Exception as exc:  # noqa: BLE001 - the ON ERROR policy decides, in `attempt`
                return self.attempt(row, attempts, raising(exc))
            if results:
                return self.answered(row, results, 1, began)
            return self.attempt(row, attempts, returning(done.value))   # a miss: RETRY may call again
        except Exception as exc:  # noqa: BLE001 - as above
            return self.attempt(row, attempts, raising(exc))
        return self.attempt(row, attempts, resume(step, waits_on))

    async def attempt(self, row: Row, attempts: list[int], first: Any = None) -> Resolution:
        """Call until an answer, a spent RETRY or a final error; `attempts[0]` counts the calls.
        `first`, from `start`, awaits the first attempt's answer, already begun and counted.
        The policies' hooks come before each attempt the loop sends itself and after each."""
        element = Element(row, attempts, time.monotonic())
        began = time.perf_counter() if self.stamper is not None else None
        # with CACHE: whether this element's own call answered (else the cache did)
        called = [True] if self.cache is not None else _CALLED
        while True:
            if first is None:
                for before in self._before:
                    waits = before(element)
                    if waits is not None:
                        await waits
                element.readmit = False
            failure = None
            try:
                if first is not None:
                    begun, first = first, None
                    results = normalize(self.call.finish(await begun))
                elif self.cache is None:
                    self._count_call()
                    results = normalize(await self.call(row))
                else:
                    results = normalize(await self._cached_call(row, called))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the policies, then ON ERROR, decide
                verdict = self._failure(element, exc)   # told before the attempt's ADAPTIVE slot is given back
                if verdict is AGAIN:
                    continue
                failure = exc
            finally:
                for released in self._released:
                    released(element)
            if failure is not None:
                return await self._given_up(element, verdict, failure)
            for answered in self._answered:
                answered(element)
            if results:
                return self.answered(row, results, attempts[0], began, not called[0])
            if any(missed(element) is AGAIN for missed in self._missed):
                continue
            self.metrics.add("misses")
            return self.policy(self.config.on_miss, "miss", "no result", row, attempts[0])

    async def _given_up(self, element: Element, verdict: str | None, exc: Exception) -> Resolution:
        """The resolution of an element whose attempt failed for good: left unanswered (BUDGET),
        its TIMEOUT outcome (a Retry-After beyond TIMEOUT), else ON ERROR."""
        if verdict is LEFT_UNANSWERED:
            return UNANSWERED
        if verdict is EXPIRES:
            return await self._time_out(element.row, element.attempts[0], element.why)
        self.metrics.add("errors")
        return self.policy(self.config.on_error, "error", f"{type(exc).__name__}: {exc}", element.row,
                           element.attempts[0], exc)

    def _failure(self, element: Element, exc: Exception) -> str | None:
        """The first say of a policy on a failed attempt (None: ON ERROR decides)."""
        if type(exc) is UnsendableRequest and self._counts:   # never sent: no call (#48 item 6)
            counters = self.metrics.counters
            counters["calls"] -= 1
            counters["elements_called"] -= 1
        error_class = errors.error_class(exc)
        for failed in self._failed:
            verdict = failed(element, exc, error_class)
            if verdict is not None:
                return verdict
        return None

    async def _cached_call(self, row: Row, called: list[bool]) -> Any:
        """One call through the cache (a row without a cache key calls directly); `called[0]`
        says whether this element's own call made the answer."""
        call, cache = self.call, self.cache
        assert cache is not None
        key = call.cache_key(row)
        if key is not None:
            called[0] = False

            async def counted() -> Any:
                called[0] = True
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
        A policy may hold it first (ON OUTAGE: the timeout may be the service's), to be resolved
        again from its first attempt under a TIMEOUT of its own."""
        for timed_out in self._timed_out:
            held = timed_out(row, rounds)
            if held is not None:
                await held
                return await self._again(row, rounds + 1)
        return await self._time_out(row, attempts, f"timed out after {self.config.timeout_s}s")

    async def _time_out(self, row: Row, attempts: int, why: str) -> Resolution:
        """The element's TIMEOUT outcome: a user `timeout(row)` answers it, else ON TIMEOUT."""
        self.metrics.add("timeouts")
        handler = self.call.timeout_handler
        if handler is not None:
            return await self._answer_timeout(handler, row, attempts)
        return self.policy(self.config.on_timeout, "timeout", why, row, attempts)

    async def expired(self, row: Row, attempts: int, epoch: int) -> Resolution:
        """The operator's TIMEOUT cut the call of an element admitted at `epoch` (see `epoch`):
        push-back for ADAPTIVE, then `timed_out`."""
        for expired in self._expired:
            expired(epoch)
        return await self.timed_out(row, attempts)

    def at_end(self) -> None:
        """At the end of the task's input: the policies that may stop the run then (refused
        credentials or a service that never answered, BUDGET in STREAMING) say so by raising."""
        for at_end in self._at_end:
            at_end()

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
            return self.answered(row, results, attempts)
        self.metrics.add("misses")
        miss = Outcome.NULL if cfg.on_miss is Outcome.RETRY else cfg.on_miss
        return self.policy(miss, "miss", "no result (timeout handler)", row, attempts)

    def from_store(self, row: Row, value: Any) -> Resolution:
        """The resolution of an element whose answer came from the answer store (no call)."""
        results = normalize(value)
        if results:
            return self.answered(row, results, 0)
        self.metrics.add("misses")
        return self.policy(self.config.on_miss, "miss", "no result (stored)", row, 0)

    def answered(self, row: Row, results: list[dict[str, Any]], attempts: int = 1, began: float | None = None,
                 cached: bool = False) -> Rows:
        """The rows an element's results make (one result, the usual answer, without a comprehension);
        with PROVENANCE each gets its struct (`attempts` calls made, the first at `began`)."""
        stamper = self.stamper
        if stamper is not None:
            return Rows([stamper.stamp(self.output_row(row, result), row, result, attempts, began, cached)
                         for result in results])
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
        whose text held one is not passed on (a masked copy keeps its fields: the status, what the
        service answered, masked too). Its class (calls/errors.py; `timeout` and `miss`
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
                if secrets or scrub(text) != text:   # the text masked, the fields kept (#48 items 1, 21)
                    raw = getattr(cause, "raw", None)
                    masked = CallError(scrub(text, secrets), status=getattr(cause, "status", None),
                                       retry_after_s=getattr(cause, "retry_after_s", None),
                                       raw=scrub(raw, secrets) if isinstance(raw, str) else raw,
                                       error_class=error_class)
                    masked.__suppress_context__ = True
                    cause = masked
        elif outcome is Outcome.DEAD_LETTER:
            self.metrics.note_error(None, f"miss: {error}")
        if outcome is Outcome.NULL or outcome is Outcome.RETRY:  # RETRY exhausted -> NULL
            if self.stamper is not None:
                return Rows([self.stamper.stamp(self.output_row(row, {}), row, {}, attempts, None, False)])
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


def _present(*policies: AttemptPolicy | None) -> tuple[AttemptPolicy, ...]:
    return tuple(p for p in policies if p is not None)
