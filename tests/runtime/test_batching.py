"""BATCH n [WITHIN d]: batches on one event loop (no threads), through the operator, and over HTTP POST."""
from __future__ import annotations

import asyncio
import importlib
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dslc.runtime import metrics as M
from dslc.runtime.calls.factory import build_call
from dslc.runtime.config import (
    Batch,
    Cache,
    Column,
    Enrich,
    HttpCall,
    Outcome,
    PythonCall,
    Retry,
)
from dslc.runtime.core.resolution import DeadLetter, ElementResolver, Rows
from dslc.runtime.metrics import OperatorMetrics

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
udfs = importlib.import_module("batch_udfs")

from runtime_support import run_operator as run  # noqa: E402

_names = iter(range(10**9))


@pytest.fixture(autouse=True)
def _reset_udfs() -> None:
    udfs.reset()


def config(ref: str = "batch_udfs:score", size: int = 4, within_s: float = 0.0, **kw: Any) -> Enrich:
    kw.setdefault("name", f"batch{next(_names)}")
    kw.setdefault("call", PythonCall(ref, (str(HERE),)))
    kw.setdefault("timeout_s", 5.0)
    return Enrich(line=4, returns=(Column("value", "STRING"),), key_columns=("id",),
                  batch=Batch(size, within_s), **kw)


def resolve_all(cfg: Enrich, rows: list[dict[str, Any]], flush: bool = True) -> tuple[list[Any], dict[str, Any]]:
    """Resolve the rows concurrently on one loop, as the operator's tasks would."""
    metrics = OperatorMetrics(cfg.name)
    call = build_call(cfg, metrics)   # BATCH composed by the factory
    call.open()
    resolver = ElementResolver(cfg, call, metrics)

    async def main() -> list[Any]:
        if flush:
            call.flush()
        return list(await asyncio.gather(*(resolver.resolve(r) for r in rows)))
    out = asyncio.run(main())
    return out, metrics.to_dict()


def row(i: int, outcome: str = "ok", **extra: Any) -> dict[str, Any]:
    return {"id": i, "outcome": outcome, **extra}


def values(out: list[Any]) -> list[Any]:
    return [o.rows[0]["value"] if isinstance(o, Rows) else type(o).__name__ for o in out]


def test_elements_fill_batches_of_n_within_the_call_slots() -> None:
    out, m = resolve_all(config(size=4, capacity=10), [row(i) for i in range(10)])
    assert values(out) == [f"v{i}" for i in range(10)]
    assert udfs.state["batches"] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]   # ceil(10/4) = 3 slots
    assert (m["calls"], m["elements_called"]) == (3, 10)
    assert M.summary(m)["mean_batch_size"] == 3.33


def test_busy_slots_make_later_elements_wait_and_fill_the_next_batch() -> None:
    out, _ = resolve_all(config(size=4, capacity=4), [row(i) for i in range(9)])   # one slot
    assert values(out) == [f"v{i}" for i in range(9)]
    assert udfs.state["batches"] == [[0, 1, 2, 3], [4, 5, 6, 7], [8]]
    assert udfs.state["max_running"] == 1


def test_within_holds_a_small_batch_until_d_has_passed() -> None:
    started = time.monotonic()
    out, _ = resolve_all(config(size=8, within_s=0.15), [row(i) for i in range(3)], flush=False)
    assert values(out) == ["v0", "v1", "v2"]
    assert udfs.state["batches"] == [[0, 1, 2]]
    assert time.monotonic() - started >= 0.15


def test_equal_keys_in_flight_share_one_slot() -> None:
    out, m = resolve_all(config(size=8), [row(1), row(2), row(1), row(1)])
    assert values(out) == ["v1", "v2", "v1", "v1"]
    assert udfs.state["batches"] == [[1, 2]]
    assert m["coalesced"] == 2


def test_cache_answers_before_batching() -> None:
    cfg = config(size=8, cache=Cache(10, 60.0))
    metrics = OperatorMetrics(cfg.name)
    call = build_call(cfg, metrics)   # BATCH composed by the factory
    call.open()
    resolver = ElementResolver(cfg, call, metrics)

    async def main() -> list[Any]:
        call.flush()
        first = await asyncio.gather(*(resolver.resolve(row(i)) for i in range(3)))
        again = await asyncio.gather(*(resolver.resolve(row(i)) for i in range(4)))
        return [*first, *again]
    out = asyncio.run(main())
    assert values(out) == ["v0", "v1", "v2", "v0", "v1", "v2", "v3"]
    assert udfs.state["batches"] == [[0, 1, 2], [3]]
    assert resolver.cache_stats.hits == 3


def test_a_bad_item_fails_its_element_only() -> None:
    out, m = resolve_all(config(size=4, on_error=Outcome.DEAD_LETTER),
                         [row(0), row(1, "bad"), row(2, "miss"), row(3, "list")])
    assert isinstance(out[1], DeadLetter) and out[1].letter["key"] == {"id": 1}
    assert values([out[0], out[3]]) == ["v0", "a3"] and len(out[3].rows) == 2
    assert out[2].rows[0]["value"] is None            # a null item is a miss (ON MISS NULL)
    assert m["errors"] == 1 and m["misses"] == 1 and m["calls"] == 1


def test_a_failed_call_is_retried_and_its_elements_travel_together_again() -> None:
    rows = [row(0), row(1, "boom", fail_times=1), row(2)]
    out, m = resolve_all(config(size=4, retry=Retry(2, 0.02)), rows)
    assert values(out) == ["v0", "v1", "v2"]
    assert udfs.state["batches"] == [[0, 1, 2], [0, 1, 2]]
    assert m["calls"] == 2 and m["retries"] == 3      # one retry per element


def test_spent_retries_meet_on_error_per_element() -> None:
    out, m = resolve_all(config(size=4, retry=Retry(1), on_error=Outcome.DEAD_LETTER),
                         [row(0, "short"), row(1)])
    assert [o.letter["attempts"] for o in out] == [2, 2]
    assert all("1 items for 2 rows" in o.letter["error"] for o in out)
    assert m["errors"] == 2 and m["calls"] == 2


def test_timeout_per_element_and_the_abandoned_call_is_cancelled() -> None:
    out, m = resolve_all(config(size=4, timeout_s=0.1, on_timeout=Outcome.DEAD_LETTER), [row(0, "slow"), row(1)])
    assert [o.letter["kind"] for o in out] == ["timeout", "timeout"]
    assert udfs.state["running"] == 0 and udfs.state["batches"] == []   # cancelled before answering
    assert m["timeouts"] == 2


def test_sync_batch_function_through_the_operator() -> None:
    op, out = run(config("batch_udfs:score_sync", size=8, capacity=16), [row(i) for i in range(40)])
    assert sorted(r["value"] for r in out.rows) == sorted(f"v{i}" for i in range(40))
    m = op.metrics()
    assert m["elements_called"] == 40 and m["calls"] == len(udfs.state["batches"]) < 40
    assert max(len(b) for b in udfs.state["batches"]) <= 8


def test_operator_flushes_a_waiting_batch_at_the_end_of_the_input() -> None:
    started = time.monotonic()
    op, out = run(config(size=64, within_s=30.0, capacity=100), [row(i) for i in range(5)])
    assert len(out.rows) == 5 and time.monotonic() - started < 30.0   # answered before WITHIN would flush
    assert udfs.state["batches"] == [[0, 1, 2, 3, 4]]


def test_http_post_batch_sends_an_array_and_reads_one_item_per_element(fault_server) -> None:
    cfg = config(call=HttpCall(fault_server.url("/post/b"), "POST", body=("id", "miss")), size=16, capacity=32)
    rows = [{"id": i, "miss": i == 3, "other": "x"} for i in range(20)]
    op, out = run(cfg, rows)
    got = {r["id"]: r["value"] for r in out.rows}
    assert got == {i: (None if i == 3 else f"p-{i}") for i in range(20)}
    assert all(isinstance(b, list) and len(b) <= 16 for b in fault_server.bodies)
    assert sorted(item["id"] for b in fault_server.bodies for item in b) == list(range(20))
    assert all(set(item) == {"id", "miss"} for b in fault_server.bodies for item in b)   # BODY columns only
    assert op.metrics()["calls"] == fault_server.total < 20


def test_http_post_batch_error_status_is_retried_as_a_whole(fault_server) -> None:
    from runtime_support import Reply

    fault_server.script("b", Reply(status=503))
    cfg = config(call=HttpCall(fault_server.url("/post/b"), "POST"), size=8, capacity=8, retry=Retry(2, 0.01))
    op, out = run(cfg, [{"id": i} for i in range(5)])
    assert sorted(r["value"] for r in out.rows) == [f"p-{i}" for i in range(5)]
    failed, *later = fault_server.bodies
    assert {item["id"] for item in failed} <= {item["id"] for b in later for item in b}   # all sent again
    assert sum(len(b) for b in later) == 5 and op.metrics()["retries"] == len(failed)


def test_http_post_without_batch_sends_one_object(fault_server) -> None:
    import datetime as dt

    cfg = Enrich(name=f"post{next(_names)}", line=2, returns=(Column("value", "STRING"),), key_columns=("id",),
                 call=HttpCall(fault_server.url("/post/{id}"), "POST"))
    when = dt.datetime(2026, 1, 2, 3, 4, 5)
    _, out = run(cfg, [{"id": 7, "ts": when}])
    assert out.rows[0]["value"] == "p-7"
    assert fault_server.bodies == [{"id": 7, "ts": "2026-01-02T03:04:05"}]


def test_batch_config_needs_post_without_placeholders() -> None:
    with pytest.raises(ValueError, match="POST"):
        config(call=HttpCall("http://h/x"))
    with pytest.raises(ValueError, match="placeholders"):
        config(call=HttpCall("http://h/{id}", "POST"))
    with pytest.raises(ValueError, match="BODY needs HTTP POST"):
        HttpCall("http://h/x", body=("id",))


def test_operator_coalesced_adds_the_cache_and_the_batch_counts() -> None:
    """With CACHE and BATCH both, `coalesced` keeps what each counted (the operator's metrics
    once set it to the cache's figure, losing BATCH's); reading the metrics twice counts nothing twice."""
    cfg = config(size=8, capacity=10, cache=Cache(10, 60.0))
    op, out = run(cfg, [row(i % 2) for i in range(6)])
    assert len(out.rows) == 6
    cached = op.metrics()["coalesced"]
    assert cached > 0                       # equal keys waited in the cache
    op._metrics.add("coalesced")            # what BATCH counts when an equal key shares a slot
    assert op.metrics()["coalesced"] == cached + 1
    assert op.metrics()["coalesced"] == cached + 1


@pytest.mark.parametrize("size", [None, 4])
def test_dispose_leaves_nothing_in_flight(size: int | None) -> None:
    """Elements waiting in a batch (BATCH's joined path) or in their calls (per element) are
    cancelled by dispose, and the operator's in-flight figure goes back to 0 either way."""
    from runtime_support import Collector

    from dslc.runtime.core.async_operator import EnrichOperator

    if size is None:   # per element: calls that hang
        importlib.import_module("async_udfs").reset()
        cfg = Enrich(name=f"batch{next(_names)}", call=PythonCall("async_udfs:scripted", (str(HERE),)), line=4,
                     returns=(Column("value", "STRING"),), key_columns=("id",), timeout_s=30.0, capacity=8)
    else:              # a batch held by WITHIN
        cfg = config(size=size, within_s=30.0, capacity=8, timeout_s=30.0)
    op = EnrichOperator(cfg)
    assert op._resolver.joins_batches == (size is not None)
    op.open(Collector())
    for i in range(3):
        op.process_element(row(i, "hang"))
    deadline = time.monotonic() + 5
    while op.metrics()["in_flight"] < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert op.metrics()["in_flight"] == 3
    op.dispose()
    assert op.metrics()["in_flight"] == 0
