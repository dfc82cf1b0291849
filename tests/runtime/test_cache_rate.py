"""CACHE (LRU+TTL with coalescing) and RATE (token bucket), alone and inside the operator."""
from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from runtime_support import FaultServer, Reply
from runtime_support import run_operator as run

from dslc.runtime.config import (
    Cache,
    Column,
    Enrich,
    HttpCall,
    Mode,
    Outcome,
    Rate,
    Retry,
)
from dslc.runtime.limits.cache import CacheStats, TtlLruCache, cache_for, drop_cache
from dslc.runtime.limits.rate import TokenBucket, bucket_for

_names = iter(range(10**9))


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# --------------------------------------------------------------------------- cache unit


def test_lru_evicts_least_recently_used() -> None:
    c = TtlLruCache(2, 60)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == (True, 1)      # a is now most recent
    c.put("c", 3)
    assert c.get("b") == (False, None) and c.get("a") == (True, 1) and len(c) == 2


def test_ttl_expires_entries() -> None:
    clock = FakeClock()
    c = TtlLruCache(10, 5.0, clock=clock)
    c.put("k", "v")
    clock.now = 4.9
    assert c.get("k") == (True, "v")
    clock.now = 5.0
    assert c.get("k") == (False, None) and len(c) == 0


def test_concurrent_lookups_share_one_call() -> None:
    c = TtlLruCache(10, 60)
    stats = CacheStats()
    calls = 0

    async def call() -> str:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)
        return "v"

    async def main() -> list[str]:
        first = await asyncio.gather(*(c.get_or_call("k", call, stats) for _ in range(10)))
        return [*first, await c.get_or_call("k", call, stats)]

    assert asyncio.run(main()) == ["v"] * 11
    assert calls == 1 and (stats.misses, stats.coalesced, stats.hits) == (1, 9, 1)


def test_errors_are_shared_but_not_cached() -> None:
    c = TtlLruCache(10, 60)
    stats = CacheStats()
    calls = 0

    async def call() -> str:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.005)
        raise ValueError("down")

    async def main() -> list[Any]:
        return await asyncio.gather(*(c.get_or_call("k", call, stats) for _ in range(3)), return_exceptions=True)

    assert all(isinstance(r, ValueError) for r in asyncio.run(main()))
    assert calls == 1 and len(c) == 0
    with pytest.raises(ValueError):
        asyncio.run(c.get_or_call("k", call, stats))
    assert calls == 2


def test_cancelled_leader_hands_over_to_a_follower() -> None:
    c = TtlLruCache(10, 60)
    stats = CacheStats()
    calls = 0

    async def call() -> str:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.02)
        return "v"

    async def main() -> str:
        leader = asyncio.ensure_future(c.get_or_call("k", call, stats))
        await asyncio.sleep(0.001)
        follower = asyncio.ensure_future(c.get_or_call("k", call, stats))
        await asyncio.sleep(0.001)
        leader.cancel()
        return await follower

    assert asyncio.run(main()) == "v" and calls == 2


def test_uncacheable_values_are_not_stored() -> None:
    c = TtlLruCache(10, 60)

    async def miss() -> None:
        return None

    asyncio.run(c.get_or_call("k", miss, CacheStats(), cacheable=bool))
    assert len(c) == 0


def test_cache_for_is_per_operator_and_follows_the_clause() -> None:
    a = cache_for("cache_for_a", Cache(10, 60))
    assert cache_for("cache_for_a", Cache(10, 60)) is a
    assert cache_for("cache_for_b", Cache(10, 60)) is not a
    assert cache_for("cache_for_a", Cache(20, 60)) is not a
    drop_cache("cache_for_a")
    drop_cache("cache_for_b")


# --------------------------------------------------------------------------- rate unit


def test_token_bucket_paces_calls() -> None:
    bucket = TokenBucket(100.0)

    async def main() -> float:
        started = time.perf_counter()
        await asyncio.gather(*(bucket.acquire() for _ in range(21)))
        return time.perf_counter() - started

    elapsed = asyncio.run(main())
    assert elapsed >= 0.19             # first token free, then 20 at 10 ms


def test_token_bucket_serves_callers_in_order_and_no_later_than_their_turn() -> None:
    """The waits the bucket hands out (computed, not measured): each caller after the one before
    it, and none later than its place in the queue needs (time passing only shortens a wait)."""
    bucket = TokenBucket(100.0)
    waits = [bucket.reserve() for _ in range(21)]
    assert waits[0] == 0 and all(a < b for a, b in zip(waits, waits[1:]))
    assert all(wait <= place / 100.0 for place, wait in enumerate(waits))


def test_bucket_for_uses_the_task_share() -> None:
    assert bucket_for(Rate(100, share=0.25)).rate == 25
    with pytest.raises(ValueError):
        TokenBucket(0)


# --------------------------------------------------------------------------- in the operator


def make(server: FaultServer, **kw: Any) -> Enrich:
    kw.setdefault("name", f"cr{next(_names)}")
    return Enrich(line=3, call=HttpCall(server.url("/kv/{id}")), returns=(Column("value", "STRING"),),
                  key_columns=("id",), **kw)




def test_operator_cache_coalesces_and_survives_tasks(fault_server: FaultServer) -> None:
    fault_server.default = Reply(delay_ms=10)
    cfg = make(fault_server, capacity=10, mode=Mode.UNORDERED, cache=Cache(100, 60))
    rows = [{"id": str(i % 3), "n": i} for i in range(30)]
    op, out = run(cfg, rows)
    assert len(out.rows) == 30 and all(r["value"] == f"v-{r['id']}" for r in out.rows)
    assert fault_server.total == 3
    m = op.metrics()
    assert m["calls"] == 3 and m["cache_misses"] == 3 and m["cache_hits"] + m["coalesced"] == 27
    assert m["coalesced"] > 0
    op2, _ = run(cfg, rows[:5])            # the next task in this worker: all hits
    assert fault_server.total == 3 and op2.metrics()["cache_hits"] == 5


def test_operator_cache_ttl_expires(fault_server: FaultServer) -> None:
    cfg = make(fault_server, cache=Cache(100, 0.05))
    run(cfg, [{"id": "t"}])
    time.sleep(0.08)
    run(cfg, [{"id": "t"}])
    assert fault_server.by_key["t"] == 2


def test_operator_cache_keeps_misses_unless_misses_are_retried(fault_server: FaultServer) -> None:
    fault_server.script("m", *[Reply(status=404)] * 10)
    run(make(fault_server, cache=Cache(10, 60), name="cache_miss_a"), [{"id": "m"}, {"id": "m"}])
    assert fault_server.by_key["m"] == 1
    run(make(fault_server, cache=Cache(10, 60), name="cache_miss_b", on_miss=Outcome.RETRY, retry=Retry(1)),
        [{"id": "m"}])
    assert fault_server.by_key["m"] == 3


def test_operator_rate_limits_calls(fault_server: FaultServer) -> None:
    cfg = make(fault_server, capacity=10, rate=Rate(100, share=0.5))    # 50 per second for this task
    started = time.perf_counter()
    op, out = run(cfg, [{"id": str(i)} for i in range(11)])
    elapsed = time.perf_counter() - started
    assert len(out.rows) == 11 and elapsed >= 0.19
    # the waits the bucket asked for: no call later than its turn at 50 per second
    assert 0 < op.metrics()["rate_wait_seconds"] <= sum(range(11)) / 50


def test_waiting_for_rate_is_not_part_of_the_timeout(fault_server: FaultServer) -> None:
    cfg = make(fault_server, capacity=10, rate=Rate(20), timeout_s=0.1)
    op, out = run(cfg, [{"id": str(i)} for i in range(5)])           # the last waits ~200 ms for quota
    assert op.metrics()["timeouts"] == 0 and len(out.rows) == 5


def test_caches_of_same_named_operators_calling_different_things_are_separate():
    from dslc.runtime.config import Cache, HttpCall
    from dslc.runtime.limits.cache import cache_for
    clause = Cache(size=10, ttl_s=60.0)
    old = cache_for("located", clause, HttpCall("http://127.0.0.1:1/v1/{ip}"))
    new = cache_for("located", clause, HttpCall("http://127.0.0.1:1/v2/{ip}"))
    assert old is not new
    assert cache_for("located", clause, HttpCall("http://127.0.0.1:1/v1/{ip}")) is old
