"""BATCH n through the operator without a call task per element (core/joined_calls.py): the
elements join their batches directly and every per-element semantic stays (items, misses,
several rows, RETRY of a failed call, TIMEOUT per element, ORDERED emission, coalescing)."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from dslc.runtime.config import Batch, Column, Enrich, Mode, Outcome, PythonCall, Retry, Store

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
udfs = importlib.import_module("batch_udfs")

from runtime_support import run_operator as run  # noqa: E402

_names = iter(range(10**9))


@pytest.fixture(autouse=True)
def _reset_udfs() -> None:
    udfs.reset()


def config(size: int = 50, **kw: Any) -> Enrich:
    kw.setdefault("name", f"joined{next(_names)}")
    kw.setdefault("call", PythonCall("batch_udfs:score", (str(HERE),)))
    kw.setdefault("timeout_s", 5.0)
    kw.setdefault("capacity", 200)
    return Enrich(line=4, returns=(Column("value", "STRING"),), key_columns=("id",), batch=Batch(size, 0.0), **kw)


def row(i: int, outcome: str = "ok", **extra: Any) -> dict[str, Any]:
    return {"id": i, "outcome": outcome, **extra}


def test_a_batch_of_elements_costs_no_task_per_element() -> None:
    op, out = run(config(size=50, capacity=200), [row(i) for i in range(200)])
    assert sorted(r["value"] for r in out.rows) == sorted(f"v{i}" for i in range(200))
    assert len(udfs.state["batches"]) == 4
    # the batch calls (4 slots) and the loop's own few; a task per element would make it >= 200
    assert udfs.state["max_tasks"] < 20
    m = op.metrics()
    assert (m["calls"], m["elements_called"], m["elements_out"]) == (4, 200, 200)
    assert m["max_in_flight"] <= 200


def test_items_misses_and_several_rows_each_resolve_their_own_element() -> None:
    op, out = run(config(size=8, on_error=Outcome.DEAD_LETTER, on_miss=Outcome.NULL),
                  [row(0), row(1, "bad"), row(2, "miss"), row(3, "list")])
    assert sorted((r["id"], r["value"]) for r in out.rows) == [(0, "v0"), (2, None), (3, "a3"), (3, "b3")]
    assert [d["key"] for d in out.dead_letters] == [{"id": 1}]
    m = op.metrics()
    assert (m["errors"], m["misses"], m["dead_letters"], m["calls"]) == (1, 1, 1, 1)


def test_a_failed_batch_is_retried_and_its_elements_join_later_batches() -> None:
    op, out = run(config(size=8, retry=Retry(2, 0.02)), [row(0), row(1, "boom", fail_times=1), row(2)])
    assert sorted(r["value"] for r in out.rows) == ["v0", "v1", "v2"]
    first, *again = udfs.state["batches"]
    assert first == [0, 1, 2]
    # each element once more, in later batches: together when their backoffs end in one turn of
    # the loop (the usual case), apart when the machine is slow enough to wake them in several
    # (the input has ended, so a batch goes as soon as an element joins it)
    assert sorted(i for batch in again for i in batch) == [0, 1, 2]
    m = op.metrics()
    assert (m["calls"], m["retries"]) == (1 + len(again), 3)


def test_spent_retries_meet_on_error_per_element_with_their_attempts() -> None:
    op, out = run(config(size=8, retry=Retry(1), on_error=Outcome.DEAD_LETTER), [row(0, "short"), row(1)])
    assert [d["attempts"] for d in out.dead_letters] == [2, 2]
    assert op.metrics()["errors"] == 2


def test_a_miss_on_miss_retry_calls_again() -> None:
    op, out = run(config(size=8, retry=Retry(1), on_miss=Outcome.RETRY), [row(0, "miss"), row(1)])
    assert udfs.state["batches"] == [[0, 1], [0]]
    assert sorted((r["id"], r["value"]) for r in out.rows) == [(0, None), (1, "v1")]


def test_timeout_per_element_and_the_abandoned_batch_is_cancelled() -> None:
    op, out = run(config(size=8, timeout_s=0.1, on_timeout=Outcome.DEAD_LETTER), [row(0, "slow"), row(1)])
    assert sorted(d["kind"] for d in out.dead_letters) == ["timeout", "timeout"]
    assert udfs.state["running"] == 0 and udfs.state["batches"] == []   # cancelled before answering
    assert op.metrics()["timeouts"] == 2


def test_ordered_emission_keeps_input_order() -> None:
    op, out = run(config(size=7, capacity=21, mode=Mode.ORDERED), [row(i) for i in range(60)])
    assert [r["id"] for r in out.rows] == list(range(60))


def test_equal_keys_share_one_place_in_a_batch() -> None:
    _, out = run(config(size=50), [row(i % 5) for i in range(20)])
    assert sorted(r["id"] for r in out.rows) == sorted(i % 5 for i in range(20))
    assert udfs.state["batches"] == [[0, 1, 2, 3, 4]]   # one place per key


def test_a_store_still_sees_every_answer(tmp_path) -> None:
    """STORE must write each element's answer, so its elements await their calls as before."""
    store = Store(str(tmp_path / "answers.db"))
    op, out = run(config(size=8, store=store), [row(i) for i in range(10)])
    assert sorted(r["value"] for r in out.rows) == sorted(f"v{i}" for i in range(10))
    udfs.reset()
    op, out = run(config(size=8, store=store, name=op.name), [row(i) for i in range(10)])
    assert udfs.state["batches"] == [] and len(out.rows) == 10   # all answered from the store
