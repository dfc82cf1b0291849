"""CAPACITY n ADAPTIVE (AIMD limit of elements in flight) and Retry-After, against a real server
that answers 429 above a hard concurrency limit."""
from __future__ import annotations

import time

import pytest

from dslc.runtime.adaptive import AdaptiveLimit
from dslc.runtime.config import Column, Enrich, HttpCall, Mode, Outcome, Retry

from runtime_support import run_operator as run

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
    assert limit.limit == 5 and not limit.slow_start
    for _ in range(5):
        limit.succeeded()
    assert limit.limit == 6                       # one more per round of answers
    for _ in range(50):
        limit.overloaded(limit.epoch)
    assert limit.limit == 1                       # never below 1
    for _ in range(10_000):
        limit.succeeded()
    assert limit.limit == 64                      # never above CAPACITY


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


def test_adaptive_needs_a_capacity_to_adapt() -> None:
    with pytest.raises(ValueError, match="ADAPTIVE"):
        make("http://h/{id}", capacity=1, adaptive=True)
