"""ElementResolver on one event loop, no operator and no threads: attempts, retry, cache, timeout, policies."""
from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from dslc.runtime.calls.factory import build_call
from dslc.runtime.config import Cache, Column, Enrich, Outcome, PythonCall, Retry
from dslc.runtime.core.operator import ElementFailure
from dslc.runtime.core.resolution import DeadLetter, Drop, ElementResolver, Fail, Rows
from dslc.runtime.metrics import OperatorMetrics

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
udfs = importlib.import_module("async_udfs")

_names = iter(range(10**9))


@pytest.fixture(autouse=True)
def _reset_udfs() -> None:
    udfs.reset()


def resolver(ref: str = "async_udfs:scripted", **kw: Any) -> ElementResolver:
    kw.setdefault("name", f"res{next(_names)}")
    config = Enrich(line=3, returns=(Column("value", "STRING"),), key_columns=("id",),
                    call=PythonCall(ref, (str(HERE),)), **{"timeout_s": 2.0, **kw})
    call = build_call(config)
    call.open()
    return ElementResolver(config, call, OperatorMetrics(config.name))


def resolve(res: ElementResolver, *rows: dict[str, Any]) -> list[Any]:
    async def main() -> list[Any]:
        return list(await asyncio.gather(*(res.resolve(r) for r in rows)))
    return asyncio.run(main())


def test_answer_becomes_rows_with_the_returns_columns_only() -> None:
    res = resolver()
    [out] = resolve(res, {"id": 1, "outcome": "ok"})
    assert isinstance(out, Rows)
    assert out.rows == [{"id": 1, "outcome": "ok", "value": "v1"}]
    assert res.metrics.counters["calls"] == 1


def test_retry_until_success_counts_each_attempt() -> None:
    res = resolver(retry=Retry(3))
    [out] = resolve(res, {"id": 1, "outcome": "error,error,ok"})
    assert isinstance(out, Rows) and out.rows[0]["value"] == "v1"
    assert udfs.state["attempts"][1] == 3
    assert res.metrics.counters["retries"] == 2


def test_spent_retries_meet_on_error_as_a_dead_letter_naming_the_attempts() -> None:
    res = resolver(retry=Retry(1), on_error=Outcome.DEAD_LETTER)
    [out] = resolve(res, {"id": 9, "outcome": "error"})
    assert isinstance(out, DeadLetter)
    assert out.letter["attempts"] == 2 and out.letter["kind"] == "error"
    assert out.letter["key"] == {"id": 9} and out.letter["line"] == 3


def test_timeout_cancels_the_call_and_applies_on_timeout() -> None:
    res = resolver(timeout_s=0.05, on_timeout=Outcome.DROP)
    [out] = resolve(res, {"id": 1, "outcome": "hang"})
    assert out is not None and isinstance(out, Drop)
    assert udfs.state["cancelled"] == 1
    assert res.metrics.counters["timeouts"] == 1


def test_timeout_answer_of_a_user_class_counts_as_a_result() -> None:
    res = resolver("async_udfs:Lookup", timeout_s=0.05)
    [out] = resolve(res, {"id": 4, "outcome": "hang"})
    assert isinstance(out, Rows) and out.rows[0]["value"] == "from-timeout"
    assert udfs.state["timeouts"] == [4]


def test_fail_policy_carries_the_element_key() -> None:
    res = resolver()
    [out] = resolve(res, {"id": 5, "outcome": "error"})
    assert isinstance(out, Fail) and isinstance(out.error, ElementFailure)
    assert "5" in str(out.error)


def test_cache_shares_one_call_between_equal_rows_in_flight() -> None:
    res = resolver(cache=Cache(10, 60.0))
    row = {"id": 1, "outcome": "ok", "delay_ms": 20}
    outs = resolve(res, row, dict(row), dict(row))
    assert [o.rows[0]["value"] for o in outs] == ["v1"] * 3
    assert res.metrics.counters["calls"] == 1
    assert res.cache_stats.coalesced == 2


def test_on_miss_retry_then_null() -> None:
    res = resolver(retry=Retry(2), on_miss=Outcome.RETRY)
    [out] = resolve(res, {"id": 2, "outcome": "miss"})
    assert isinstance(out, Rows) and out.rows == [{"id": 2, "outcome": "miss", "value": None}]
    assert udfs.state["attempts"][2] == 3


@pytest.mark.parametrize("delay_ms", [0, 5], ids=["answers-at-once", "waits"])
@pytest.mark.parametrize("outcome, calls", [("ok", 1), ("bad,ok", 1), ("error,ok", 2), ("miss,ok", 2),
                                            ("error,error", 2)])
def test_a_first_attempt_begun_by_start_ends_as_any_attempt(delay_ms: int, outcome: str, calls: int) -> None:
    """`start` runs the first attempt itself (no CACHE, RATE, ADAPTIVE or BATCH): whether it
    answers at once or waits, and whatever it answers, the element ends as the retry loop says,
    each attempt counted once."""
    res = resolver(retry=Retry(1), on_miss=Outcome.RETRY, on_error=Outcome.DEAD_LETTER)
    row = {"id": 1, "outcome": outcome, "delay_ms": delay_ms}
    [out] = resolve(res, row)
    if outcome == "error,error":
        assert isinstance(out, DeadLetter) and out.letter["attempts"] == 2
    elif outcome == "bad,ok":       # an answer that does not fit is the element's at once (not retried)
        assert isinstance(out, DeadLetter) and out.letter["attempts"] == 1
        assert out.letter["error_class"] == "answer"
    else:
        assert isinstance(out, Rows) and out.rows == [{**row, "value": "v1"}]
    assert udfs.state["attempts"][1] == calls
    assert res.metrics.counters["calls"] == calls
    assert res.metrics.counters["retries"] == calls - 1


def test_start_answers_at_once_without_a_coroutine_and_leaves_the_row_as_it_was() -> None:
    res = resolver("async_udfs:mutating")
    row = {"id": 7}
    attempts = [0]
    out = res.start(row, attempts)
    assert isinstance(out, Rows) and out.rows == [{"id": 7, "value": "v7"}]
    assert row == {"id": 7} and attempts == [1]
