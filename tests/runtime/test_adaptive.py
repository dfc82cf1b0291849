"""CAPACITY n ADAPTIVE (AIMD limit of elements in flight) and Retry-After, against a real server
that answers 429 above a hard concurrency limit."""
from __future__ import annotations

import asyncio
import time

import pytest
from runtime_support import Reply
from runtime_support import run_operator as run

from dslc.runtime.calls.factory import build_call
from dslc.runtime.config import Column, Enrich, HttpCall, Mode, Outcome, Retry
from dslc.runtime.core.operator import ElementFailure
from dslc.runtime.core.resolution import ElementResolver, Rows
from dslc.runtime.limits.adaptive import AdaptiveLimit
from dslc.runtime.metrics import OperatorMetrics

_names = iter(range(10**9))


def make(url: str, **kw) -> Enrich:
    return Enrich(name=f"adaptive{next(_names)}", line=5, call=HttpCall(url), returns=(Column("value", "STRING"),),
                  key_columns=("id",), mode=Mode.UNORDERED, timeout_s=20.0, **kw)


def test_limit_grows_by_doubling_then_by_one_and_shrinks_once_per_round() -> None:
    limit = AdaptiveLimit(64)
    assert limit.limit == 2
    for _ in range(6):
        limit.succeeded()
    assert limit.limit == 8                       # slow start: one more per answer
    epoch = limit.epoch
    limit.overloaded(epoch)
    limit.overloaded(epoch)                       # the same round's second 429 does not count
    assert limit.limit == 4 and not limit.slow_start   # the first push-back halves: the last safe round
    for _ in range(5):
        limit.succeeded()
    assert limit.limit == 5                       # one more per round of answers (+1/value each)
    limit.overloaded(limit.epoch)
    assert limit.limit == 4                       # after slow start: 5 x 0.8
    for _ in range(50):
        limit.overloaded(limit.epoch)
    assert limit.limit == 1                       # never below 1
    for _ in range(10_000):
        limit.succeeded()
    assert limit.limit == 64                      # never above CAPACITY


def test_with_batch_the_limit_is_whole_batches_and_slow_start_ends_at_the_last_safe_round() -> None:
    """#33 item 7: BATCH 64 against a service that refuses a fifth request: a limit of 129
    elements would send a third request of one element; it stays at two requests until it has
    grown by a whole batch. Slow start's first 429 (at 4 requests) halves it to 2 requests at
    once, instead of rounds of 429s stepping down by 0.8."""
    limit = AdaptiveLimit(256, batch=64)
    assert limit.limit == 2                       # below a batch: elements
    while limit.limit < 256:
        limit.succeeded()
    limit.overloaded(limit.epoch)
    assert limit.limit == 128                     # two requests of 64
    for _ in range(60):
        limit.succeeded()                         # about a round: 128 -> 128.5
    assert limit.limit == 128
    limit.value = 191.9
    assert limit.limit == 128
    limit.value = 192.0
    assert limit.limit == 192                     # a third request only with a whole batch


def _storm(fault_server, adaptive: bool) -> tuple[int, int, list]:
    fault_server.reset_counters()
    url = fault_server.url("/limited/{id}?limit=16&delay_ms=15")
    cfg = make(url, capacity=64, adaptive=adaptive, retry=Retry(100, 0.005), on_error=Outcome.DEAD_LETTER)
    _, out = run(cfg, [{"id": i} for i in range(800)])
    return fault_server.total, fault_server.rejected, out.rows


def test_adaptive_capacity_avoids_the_429_storm(fault_server) -> None:
    total_fixed, rejected_fixed, rows_fixed = _storm(fault_server, adaptive=False)
    total, rejected, rows = _storm(fault_server, adaptive=True)
    assert sorted(r["value"] for r in rows) == sorted(f"v-{i}" for i in range(800)) == \
        sorted(r["value"] for r in rows_fixed)
    assert rejected_fixed > 0.3 * total_fixed, (rejected_fixed, total_fixed)   # without: a storm of 429s
    assert rejected < 0.1 * total, (rejected, total)    # with it: few (bench: under 5% on a quiet machine)
    assert fault_server.max_in_flight <= 16


def test_retry_after_sets_the_wait_before_the_next_attempt(fault_server) -> None:
    fault_server.reset_counters()
    url = fault_server.url("/limited/{id}?limit=1&delay_ms=300&retry_after=1")
    started = time.monotonic()
    _, out = run(make(url, capacity=2, retry=Retry(2, 0.01)), [{"id": 1}, {"id": 2}])
    elapsed = time.monotonic() - started
    assert sorted(r["value"] for r in out.rows) == ["v-1", "v-2"]
    assert fault_server.rejected == 1 and fault_server.total == 3
    assert elapsed >= 1.0                         # waited Retry-After (1 s), not BACKOFF (10 ms)


@pytest.mark.parametrize("on_timeout", [Outcome.DEAD_LETTER, Outcome.FAIL])
def test_a_retry_after_beyond_timeout_is_the_timeout_outcome_at_once_naming_it(fault_server, on_timeout) -> None:
    """#48 item 2: a gateway's Retry-After: 60 against TIMEOUT 3s is not waited for until a bare
    "timed out": the element's ON TIMEOUT decides at once and says why; nothing is sent again."""
    fault_server.reset_counters()
    url = fault_server.url("/limited/{id}?limit=1&delay_ms=300&retry_after=60")
    config = make(url, capacity=2, retry=Retry(2, 0.01), on_timeout=on_timeout)
    config = Enrich(**{**{f: getattr(config, f) for f in config.__dataclass_fields__}, "timeout_s": 3.0})
    why = "429 with Retry-After 60 s exceeds TIMEOUT 3s"
    if on_timeout is Outcome.FAIL:
        with pytest.raises(ElementFailure, match=why):
            run(config, [{"id": 1}, {"id": 2}])
    else:
        op, out = run(config, [{"id": 1}, {"id": 2}])
        [letter] = out.dead_letters
        assert letter["kind"] == "timeout" and letter["error"] == why and letter["attempts"] == 1
        assert len(out.rows) == 1 and op.metrics()["timeouts"] == 1
    assert fault_server.rejected == 1 and fault_server.total == 2      # the 429 was not sent again


def test_adaptive_needs_a_capacity_to_adapt() -> None:
    with pytest.raises(ValueError, match="ADAPTIVE"):
        make("http://h/{id}", capacity=1, adaptive=True)


def test_slots_wait_at_the_limit_and_pass_on_when_released() -> None:
    async def main() -> None:
        limit = AdaptiveLimit(8)                   # starts at 2
        await limit.acquire()
        await limit.acquire()
        third = asyncio.ensure_future(limit.acquire())
        for _ in range(3):
            await asyncio.sleep(0)
        assert not third.done() and limit.in_flight == 2
        limit.release()                            # an answer arrived: its slot goes to the waiter
        await asyncio.wait_for(third, 5)
        assert limit.in_flight == 2
        limit.succeeded()                          # slow start: a third slot
        await asyncio.wait_for(limit.acquire(), 5)
        assert limit.in_flight == 3
        cancelled = asyncio.ensure_future(limit.acquire())
        await asyncio.sleep(0)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert not limit._waiters                  # noqa: SLF001 - a cancelled waiter leaves the queue
    asyncio.run(main())


def test_retry_after_pauses_every_new_attempt_of_the_task() -> None:
    async def main() -> None:
        limit = AdaptiveLimit(8)
        limit.pause(30.0)                          # a 429 said Retry-After: 30
        blocked = asyncio.ensure_future(limit.acquire())
        for _ in range(3):
            await asyncio.sleep(0)
        assert not blocked.done() and limit.in_flight == 0    # free slots, but paused
        blocked.cancel()
        short = AdaptiveLimit(8)
        short.pause(0.01)
        await asyncio.wait_for(short.acquire(), 5)
        assert short.in_flight == 1
    asyncio.run(main())


def test_an_element_waiting_for_its_retry_leaves_its_slot(fault_server) -> None:
    fault_server.script("1", Reply(status=503))
    config = make(fault_server.url("/kv/{id}"), capacity=4, adaptive=True, retry=Retry(1, 0.3))
    limit = AdaptiveLimit(config.capacity)
    call = build_call(config)
    call.open()
    resolver = ElementResolver(config, call, OperatorMetrics(config.name), limit)

    async def main() -> tuple[object, int]:
        element = asyncio.ensure_future(resolver.resolve({"id": 1}))
        while resolver.metrics.counters["retries"] == 0 and not element.done():
            await asyncio.sleep(0.005)
        during_backoff = limit.in_flight           # the 503 came back; the element sleeps 300 ms
        try:
            return await element, during_backoff
        finally:
            await call.aclose_clients()            # its session lives on this loop, which ends here

    try:
        resolution, during_backoff = asyncio.run(main())
    finally:
        call.close()
    assert during_backoff == 0
    assert isinstance(resolution, Rows) and resolution.rows[0]["value"] == "v-1"
    assert fault_server.total == 2 and limit.in_flight == 0 and limit.epoch == 1   # the 503 shrank it
