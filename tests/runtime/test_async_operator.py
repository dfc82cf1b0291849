"""EnrichOperator with real async Python functions: order, policies, retries, timeouts, back-pressure."""
from __future__ import annotations

import importlib
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dslc.runtime import metrics as M
from dslc.runtime.config import Column, Enrich, Mode, Outcome, PythonCall, Retry
from dslc.runtime.core import worker_loop as W
from dslc.runtime.core.async_operator import EnrichOperator, worker_loop
from dslc.runtime.core.operator import ElementFailure

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
udfs = importlib.import_module("async_udfs")

from polling import until  # noqa: E402
from runtime_support import Collector  # noqa: E402
from runtime_support import run_operator as run

_names = iter(range(10**9))


def make(ref: str = "async_udfs:scripted", **kw: Any) -> Enrich:
    kw.setdefault("name", f"op{next(_names)}")
    kw.setdefault("line", 7)
    kw.setdefault("returns", (Column("value", "STRING"),))
    kw.setdefault("key_columns", ("id",))
    kw.setdefault("timeout_s", 5.0)
    return Enrich(call=PythonCall(ref, (str(HERE),)), **kw)




@pytest.fixture(autouse=True)
def _reset_udfs() -> None:
    udfs.reset()


def row(i: int, outcome: str = "ok", delay_ms: float = 0) -> dict[str, Any]:
    return {"id": i, "outcome": outcome, "delay_ms": delay_ms}


# --------------------------------------------------------------------------- basics


@pytest.mark.parametrize("on_loop", [True, False], ids=["driven on the loop", "driven from a thread"])
def test_ordered_emits_in_input_order_despite_latencies(on_loop: bool) -> None:
    rows = [row(i, delay_ms=(7 - i) * 3) for i in range(8)]
    op, out = run(make(mode=Mode.ORDERED, capacity=8), rows, on_loop=on_loop)
    assert [r["id"] for r in out.rows] == list(range(8))
    assert out.rows[0] == {"id": 0, "outcome": "ok", "delay_ms": 21, "value": "v0"}  # extra key ignored
    assert udfs.state["max_running"] == 8
    # emitted in the thread that drives the operator only, never in a completion callback
    assert out.threads == {W._loop_thread.ident if on_loop else threading.get_ident()}


def test_unordered_emits_in_completion_order() -> None:
    rows = [row(i, delay_ms=(4 - i) * 15) for i in range(5)]
    _, out = run(make(mode=Mode.UNORDERED, capacity=5), rows)
    assert [r["id"] for r in out.rows] == [4, 3, 2, 1, 0]


def test_unordered_holds_results_behind_a_watermark() -> None:
    items = [row(0, delay_ms=40), 1.0, row(1, delay_ms=0), row(2, delay_ms=5), 2.0]
    _, out = run(make(mode=Mode.UNORDERED, capacity=5), items)
    kinds = [(k, v["id"] if k == "row" else v) for k, v in out.events]
    assert kinds[:2] == [("row", 0), ("wm", 1.0)]
    assert sorted(kinds[2:4]) == [("row", 1), ("row", 2)]
    assert kinds[4] == ("wm", 2.0)


def test_list_result_gives_one_row_each_and_missing_keys_are_null() -> None:
    _, out = run(make(returns=(Column("value", "STRING"), Column("other", "INT"))),
                 [row(1, "list"), row(2, "partial")])
    assert [(r["id"], r["value"], r["other"]) for r in out.rows] == [(1, "a1", None), (1, "b1", None), (2, None, None)]
    assert all("extra" not in r for r in out.rows)


@pytest.mark.parametrize("policy,expect_rows,expect_dl", [
    (Outcome.NULL, 1, 0), (Outcome.DROP, 0, 0), (Outcome.DEAD_LETTER, 0, 1)])
@pytest.mark.parametrize("outcome", ["miss", "empty"])
def test_miss_policies(policy: Outcome, expect_rows: int, expect_dl: int, outcome: str) -> None:
    op, out = run(make(on_miss=policy), [row(1, outcome), row(2)])
    assert len(out.rows) == expect_rows + 1
    assert len(out.dead_letters) == expect_dl
    m = op.metrics()
    assert m["misses"] == 1 and m["dropped"] == (1 if policy is Outcome.DROP else 0)
    if expect_rows:
        assert out.rows[0] == {**row(1, outcome), "value": None}
    if expect_dl:
        letter = out.dead_letters[0]
        assert letter["kind"] == "miss" and letter["key"] == {"id": 1} and letter["row"] == row(1, outcome)
        assert letter["operator"] == op.name and letter["line"] == 7 and letter["attempts"] == 1


def test_error_fail_raises_element_failure_with_key_and_line() -> None:
    cfg = make(on_error=Outcome.FAIL, key_columns=("id", "outcome"))
    with pytest.raises(ElementFailure) as info:
        run(cfg, [row(1), row(2, "error"), row(3)])
    err = info.value
    assert err.operator == cfg.name and err.line == 7 and err.key == {"id": 2, "outcome": "error"}
    assert isinstance(err.cause, ValueError)
    assert f"operator '{cfg.name}' (line 7)" in str(err)


def test_bad_result_type_is_an_answer_error_not_retried() -> None:
    op, out = run(make(on_error=Outcome.DEAD_LETTER, retry=Retry(2, 0.0)), [row(1, "bad")])
    letter = out.dead_letters[0]
    assert letter["kind"] == "error" and letter["error_class"] == "answer"
    assert letter["error"] == "CallError: result is a int, expected an object, a list of objects or None"
    assert letter["attempts"] == 1      # the same call would answer the same
    assert op.metrics()["errors"] == 1 and op.metrics()["retries"] == 0


@pytest.mark.parametrize("on_loop", [True, False], ids=["driven on the loop", "driven from a thread"])
def test_ordered_failure_emits_everything_before_it_first(on_loop: bool) -> None:
    out = Collector()
    with pytest.raises(ElementFailure) as info:
        run(make(mode=Mode.ORDERED, capacity=10),
            [row(0, delay_ms=30), row(1, delay_ms=20), row(2, "error"), row(3), row(4, "error", 1)], out,
            on_loop=on_loop)
    assert info.value.key == {"id": 2}
    assert [r["id"] for r in out.rows] == [0, 1]
    # raised, like every row emitted, in the thread that drives the operator
    assert out.threads == {W._loop_thread.ident if on_loop else threading.get_ident()}


def test_error_policies_null_drop_dead_letter() -> None:
    for policy in (Outcome.NULL, Outcome.DROP, Outcome.DEAD_LETTER):
        udfs.reset()
        op, out = run(make(on_error=policy), [row(1, "error"), row(2)])
        m = op.metrics()
        assert m["errors"] == 1
        got = {"rows": [(r["id"], r["value"]) for r in out.rows], "dl": [d["kind"] for d in out.dead_letters]}
        assert got == {
            Outcome.NULL: {"rows": [(1, None), (2, "v2")], "dl": []},
            Outcome.DROP: {"rows": [(2, "v2")], "dl": []},
            Outcome.DEAD_LETTER: {"rows": [(2, "v2")], "dl": ["error"]},
        }[policy]


# --------------------------------------------------------------------------- retry / timeout


def test_retry_recovers_and_counts_attempts() -> None:
    cfg = make(retry=Retry(3, 0.001), on_error=Outcome.DEAD_LETTER)
    op, out = run(cfg, [row(1, "error,error,ok"), row(2, "error")])
    assert [(r["id"], r["value"]) for r in out.rows] == [(1, "v1")]
    assert out.dead_letters[0]["attempts"] == 4
    assert udfs.state["attempts"] == Counter({1: 3, 2: 4})
    m = op.metrics()
    assert m["retries"] == 2 + 3 and m["calls"] == 7 and m["errors"] == 1


def test_exponential_backoff_waits() -> None:
    cfg = make(retry=Retry(3, 0.02, exponential=True), on_error=Outcome.DROP)
    started = time.perf_counter()
    run(cfg, [row(1, "error")])
    assert time.perf_counter() - started >= 0.02 + 0.04 + 0.08 - 0.005


def test_on_miss_retry_retries_then_gives_null() -> None:
    cfg = make(retry=Retry(2), on_miss=Outcome.RETRY)
    op, out = run(cfg, [row(1, "miss,ok"), row(2, "miss")])
    assert sorted((r["id"], r["value"]) for r in out.rows) == [(1, "v1"), (2, None)]
    assert udfs.state["attempts"] == Counter({1: 2, 2: 3})
    assert op.metrics()["misses"] == 1


def test_timeout_bounds_the_element_including_retries() -> None:
    cfg = make(timeout_s=0.15, retry=Retry(100, 0.02), on_error=Outcome.FAIL, on_timeout=Outcome.DEAD_LETTER)
    op, out = run(cfg, [row(1, "error")])
    letter = out.dead_letters[0]
    # the timeout ended the element before its retries did: an attempt is counted when its 20 ms
    # backoff begins, so no more than 2 + 150 / 20 are counted within the TIMEOUT, however slow
    # the machine (a count, not a clock)
    assert letter["kind"] == "timeout" and 2 <= letter["attempts"] <= 2 + 0.15 / 0.02
    assert op.metrics()["timeouts"] == 1


def test_hanging_call_times_out_and_is_cancelled() -> None:
    op, out = run(make(timeout_s=0.05, on_timeout=Outcome.NULL), [row(1, "hang"), row(2)])
    assert [(r["id"], r["value"]) for r in out.rows] == [(1, None), (2, "v2")]
    assert udfs.state["cancelled"] == 1 and udfs.state["running"] == 0


def test_timeout_fail_raises() -> None:
    with pytest.raises(ElementFailure, match="timed out"):
        run(make(timeout_s=0.05), [row(1, "hang")])


def test_class_timeout_method_answers_the_element() -> None:
    items = [row(1, "hang"), {**row(2, "hang"), "timeout_answer": "miss"}, {**row(3, "hang"), "timeout_answer": "error"}]
    op, out = run(make("async_udfs:Lookup", timeout_s=0.05, on_miss=Outcome.DROP, on_error=Outcome.DEAD_LETTER),
                  items)
    assert [(r["id"], r["value"]) for r in out.rows] == [(1, "from-timeout")]
    assert [d["key"] for d in out.dead_letters] == [{"id": 3}]
    assert sorted(udfs.state["timeouts"]) == [1, 2, 3]
    assert op.metrics()["dropped"] == 1


def test_class_lifecycle_open_close_also_after_failure() -> None:
    run(make("async_udfs:Lookup"), [row(1)])
    assert (udfs.state["opened"], udfs.state["closed"]) == (1, 1)
    with pytest.raises(ElementFailure):
        run(make("async_udfs:Lookup"), [row(1, "error")])
    assert (udfs.state["opened"], udfs.state["closed"]) == (2, 2)


def test_open_failure_propagates() -> None:
    op = EnrichOperator(make("async_udfs:BadOpen"))
    with pytest.raises(RuntimeError, match="cannot open"):
        op.open(Collector())
    op.dispose()


def test_plain_function_runs_in_a_thread_pool() -> None:
    rows = [row(i, delay_ms=30) for i in range(8)]
    _, out = run(make("async_udfs:blocking", capacity=8), rows)
    # several calls of the blocking function ran at once (counted by the function, not timed)
    assert len(out.rows) == 8 and udfs.state["max_running"] > 1
    assert udfs.state["max_running"] <= 8


# --------------------------------------------------------------------------- back-pressure


def test_full_queue_blocks_without_dropping_and_counts_blocked_time() -> None:
    rows = [row(i, delay_ms=10) for i in range(12)]
    op, out = run(make(mode=Mode.UNORDERED, capacity=3), rows)
    assert sorted(r["id"] for r in out.rows) == list(range(12))
    m = op.metrics()
    assert udfs.state["max_running"] <= 3 and m["max_in_flight"] <= 3
    assert m["blocked_seconds"] > 0.02
    assert m["elements_in"] == 12 and m["elements_out"] == 12


def test_window_is_continuous_across_calls() -> None:
    """A slow element does not stop later elements from starting (no per-batch gather). Row 0
    takes 2 s, so a stalled machine cannot end it before the others start; the test waits for
    the four starts rather than sleeping a fixed time."""
    op = EnrichOperator(make(mode=Mode.ORDERED, capacity=4))
    out = Collector()
    op.open(out)
    op.process_element(row(0, delay_ms=2000))
    for i in range(1, 4):
        op.process_element(row(i))
    assert until(lambda: {i for i, _ in udfs.state["started"]} == {0, 1, 2, 3})
    starts = dict(udfs.state["started"])
    # all in flight while 0 is still running: each started within 0's 2 s (read from the start
    # times, not from the clock after the wait); had 1..3 waited for 0, they would start later
    assert max(starts.values()) - starts[0] < 2.0, starts
    assert out.rows == []                       # ORDERED: 1..3 wait behind 0
    op.finish()
    op.close()
    op.dispose()
    assert [r["id"] for r in out.rows] == [0, 1, 2, 3]


def test_calls_that_answer_at_once_run_one_after_another_in_one_call_task() -> None:
    """No call waits, so no second call task is woken: each element costs no task switch."""
    op, out = run(make("async_udfs:at_once_or_later", mode=Mode.ORDERED, capacity=50), [row(i) for i in range(300)])
    assert [r["id"] for r in out.rows] == list(range(300))
    assert len(udfs.state["tasks"]) == 1
    assert not op._calls.pool.busy                 # noqa: SLF001 - dispose ended the call task


def test_calls_answered_at_once_with_nothing_ahead_are_counted_in_and_out() -> None:
    """Such elements leave without a queue entry; the metrics still count every one, and one that
    waits holds back those behind it (ORDERED) as if they had all entered the queue."""
    rows = [row(i) for i in range(20)] + [row(20, delay_ms=30)] + [row(i) for i in range(21, 30)]
    op, out = run(make("async_udfs:at_once_or_later", mode=Mode.ORDERED, capacity=5), rows)
    assert [r["id"] for r in out.rows] == list(range(30))
    metrics = op.metrics()
    assert (metrics["elements_in"], metrics["elements_out"]) == (30, 30)


def test_calls_that_wait_still_overlap_among_calls_that_answer_at_once() -> None:
    """A call task whose call must wait wakes others for the elements behind it."""
    rows = [row(i, delay_ms=60 if i % 2 else 0) for i in range(40)]
    op, out = run(make("async_udfs:at_once_or_later", mode=Mode.UNORDERED, capacity=20), rows)
    assert sorted(r["id"] for r in out.rows) == list(range(40))
    assert udfs.state["max_running"] >= 8       # of the 20 waiting calls, most at the same time
    assert op.metrics()["max_in_flight"] <= 20


def test_dispose_without_finish_cancels_pending_calls() -> None:
    op = EnrichOperator(make(capacity=5))
    op.open(Collector())
    for i in range(5):
        op.process_element(row(i, "hang"))
    assert until(lambda: udfs.state["running"] == 5)      # every call under way before dispose
    op.dispose()
    assert until(lambda: udfs.state["running"] == 0)
    assert udfs.state["cancelled"] == 5


def test_worker_loop_is_shared_and_reused() -> None:
    assert worker_loop() is worker_loop()
    a, b = EnrichOperator(make()), EnrichOperator(make())
    a.open(Collector())
    b.open(Collector())
    assert a._loop is b._loop  # noqa: SLF001
    for op in (a, b):
        op.finish()
        op.close()
        op.dispose()


def test_metrics_merge_and_summary() -> None:
    op1, _ = run(make(name="m"), [row(i, delay_ms=2) for i in range(5)])
    op2, _ = run(make(name="m", on_miss=Outcome.DROP), [row(9, "miss")])
    merged = M.merge(op1.metrics(), op2.metrics())
    assert merged["elements_in"] == 6 and merged["elements_out"] == 5 and merged["dropped"] == 1
    assert sum(merged["latency_histogram"].values()) == 6
    s = M.summary(merged)
    assert s["p50_ms"] is not None and 1.0 <= s["p50_ms"] <= 50 and s["p99_ms"] >= s["p50_ms"]
    assert "latency_histogram" not in s
    assert M.format_summary(merged).startswith("m: elements_in=6")
    assert M.merge_all([op1.metrics(), op2.metrics()])["m"]["elements_in"] == 6


# --------------------------------------------------------------------------- property


element = st.tuples(st.integers(0, 3), st.sampled_from(["ok", "ok", "list", "miss", "error"]))
stream = st.lists(st.one_of(element, st.just("wm")), max_size=14)
policies = st.sampled_from([Outcome.NULL, Outcome.DROP, Outcome.DEAD_LETTER, Outcome.FAIL])


def expected_for(outcome: str, on_miss: Outcome, on_error: Outcome) -> tuple[str, list[Any]]:
    """Reference model: where one element ends and which values it produces."""
    policy = {"miss": on_miss, "error": on_error}.get(outcome)
    if outcome == "ok":
        return "out", ["v"]
    if outcome == "list":
        return "out", ["a", "b"]
    assert policy is not None
    if policy is Outcome.NULL:
        return "out", [None]
    if policy is Outcome.DROP:
        return "drop", []
    if policy is Outcome.DEAD_LETTER:
        return "dl", [outcome]
    return "fail", []


@settings(max_examples=50, deadline=None)
@given(items=stream, ordered=st.booleans(), capacity=st.integers(1, 5),
       on_miss=st.sampled_from([Outcome.NULL, Outcome.DROP, Outcome.DEAD_LETTER]), on_error=policies)
def test_operator_against_reference_model(items: list[Any], ordered: bool, capacity: int,  # noqa: C901 - a reference model reads best as one loop
                                          on_miss: Outcome, on_error: Outcome) -> None:
    udfs.reset()
    feed: list[Any] = []
    model: dict[int, tuple[str, list[Any]]] = {}
    wm = 0.0
    for item in items:
        if item == "wm":
            wm += 1
            feed.append(wm)
        else:
            i = len(model)
            delay, outcome = item
            feed.append(row(i, outcome, delay))
            model[i] = expected_for(outcome, on_miss, on_error)
    cfg = make(mode=Mode.ORDERED if ordered else Mode.UNORDERED, capacity=capacity,
               on_miss=on_miss, on_error=on_error)
    out = Collector()
    failure: ElementFailure | None = None
    try:
        op, _ = run(cfg, feed, out)
    except ElementFailure as exc:
        failure = exc

    # in flight never above CAPACITY; nothing left running after dispose
    assert udfs.state["max_running"] <= capacity
    deadline = time.monotonic() + 1
    while udfs.state["running"] and time.monotonic() < deadline:
        time.sleep(0.002)
    assert udfs.state["running"] == 0

    # where each element ended (at most once)
    seen: dict[int, list[Any]] = {}
    order: list[Any] = []
    for kind, payload in out.events:
        if kind == "wm":
            order.append(("wm", payload))
            continue
        i = payload["id"] if kind == "row" else payload["key"]["id"]
        value = payload["value"] if kind == "row" else payload["kind"]
        if kind == "row" and value is not None:
            value = value[0]
        if value == "v" or (isinstance(value, str) and value.startswith("v")):
            value = "v"
        seen.setdefault(i, []).append(("out" if kind == "row" else "dl", value))
        if not order or order[-1] != i:
            order.append(i)

    for i, got in seen.items():
        where, values = model[i]
        assert where in ("out", "dl") and got == [(where, v) for v in values], (i, got, model[i])

    fails = [i for i, (where, _) in model.items() if where == "fail"]
    if failure is None:
        assert not fails
        ended = set(seen) | {i for i, (where, _) in model.items() if where == "drop"}
        assert ended == set(model)                                  # every element ended
        assert len(out.watermarks) == int(wm)
    else:
        assert failure.key["id"] in fails and failure.key["id"] not in seen
        if ordered:
            assert failure.key["id"] == fails[0]                    # the first failing element
            before = {i for i in model if i < fails[0] and model[i][0] != "drop"}
            assert set(seen) == before

    # order
    input_order: list[Any] = [("wm", x) if not isinstance(x, dict) else x["id"] for x in feed]
    emitted = [x for x in order]
    if ordered:
        filtered = [x for x in input_order if not isinstance(x, int) or x in seen]
        assert emitted == filtered[: len(emitted)]
    else:
        # every watermark separates exactly the elements that arrived before it from those after
        seg_of: dict[int, int] = {}
        seg = 0
        for x in input_order:
            if isinstance(x, int):
                seg_of[x] = seg
            else:
                seg += 1
        seg = 0
        for x in emitted:
            if isinstance(x, int):
                assert seg_of[x] == seg, (x, emitted, input_order)
            else:
                seg += 1


# --------------------------------------------------------------------------- ORDERED BY


def test_ordered_by_keeps_input_order_per_key_while_other_keys_overtake() -> None:
    # key 0 (even ids) is slow at its head; key 1 (odd ids) completes and leaves meanwhile
    rows = [{**row(i, delay_ms=60 if i == 0 else (8 - i) * 2), "k": i % 2} for i in range(8)]
    _, out = run(make(mode=Mode.ORDERED, order_by=("k",), capacity=8), rows)
    ids = [r["id"] for r in out.rows]
    assert [i for i in ids if i % 2 == 0] == [0, 2, 4, 6]
    assert [i for i in ids if i % 2 == 1] == [1, 3, 5, 7]
    assert ids.index(7) < ids.index(0)          # the fast key did not wait for the slow one


def test_ordered_by_failure_leaves_after_its_key_only() -> None:
    out = Collector()
    rows = [{**row(0, delay_ms=80), "k": "a"}, {**row(1, "error"), "k": "b"}, {**row(2), "k": "a"}]
    with pytest.raises(ElementFailure) as info:
        run(make(mode=Mode.ORDERED, order_by=("k",), capacity=4), rows, out)
    assert info.value.key == {"id": 1}
    assert out.rows == []                       # key b had nothing before it; key a was still out


def test_ordered_by_accepts_unhashable_key_values() -> None:
    rows = [{**row(i, delay_ms=(3 - i) * 5), "tags": ["x", str(i % 2)]} for i in range(4)]
    _, out = run(make(mode=Mode.ORDERED, order_by=("tags",), capacity=4), rows)
    ids = [r["id"] for r in out.rows]
    assert [i for i in ids if i % 2 == 0] == [0, 2] and [i for i in ids if i % 2 == 1] == [1, 3]


def test_ordered_by_needs_ordered_mode() -> None:
    with pytest.raises(ValueError, match="ORDERED BY"):
        make(mode=Mode.UNORDERED, order_by=("id",))


keyed = st.lists(st.one_of(st.tuples(st.integers(0, 3), st.integers(0, 6)), st.just("wm")), max_size=16)


@settings(max_examples=40, deadline=None)
@given(items=keyed, capacity=st.integers(1, 5))
def test_ordered_by_against_reference_model(items: list[Any], capacity: int) -> None:
    """Any latencies (so any completion order): per-key input order, in flight never above
    CAPACITY, every element once, none across a watermark."""
    udfs.reset()
    feed: list[Any] = []
    segment_of: dict[int, int] = {}
    for item in items:
        if item == "wm":
            feed.append(float(len(feed)))
        else:
            delay, key = item
            i = len(segment_of)
            segment_of[i] = sum(1 for x in feed if not isinstance(x, dict))
            feed.append({**row(i, delay_ms=delay * 3), "k": key})
    _, out = run(make(mode=Mode.ORDERED, order_by=("k",), capacity=capacity), feed)
    assert udfs.state["max_running"] <= capacity
    ids = [r["id"] for r in out.rows]
    assert sorted(ids) == list(range(len(segment_of)))          # no loss, no duplicate
    for key in range(4):
        mine = [r["id"] for r in out.rows if r["k"] == key]
        assert mine == sorted(mine)                             # input order within a key
    passed = 0
    for kind, payload in out.events:
        if kind == "wm":
            passed += 1
        else:
            assert segment_of[payload["id"]] == passed
