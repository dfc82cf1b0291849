"""A chain with an ENRICH runs on the worker loop: one hand-off per chunk, back-pressure by awaiting."""
from __future__ import annotations

import asyncio
import importlib
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from dslc.runtime import config as C
from dslc.runtime.core import loop_chain
from dslc.runtime.core.async_operator import EnrichOperator
from dslc.runtime.core.chain import OperatorChain
from dslc.runtime.core.operator import ElementFailure, Watermark
from dslc.runtime.core.process_operator import ProcessOperator

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
udfs = importlib.import_module("async_udfs")

THREADS: list[str] = []


def fan_out(row: dict[str, Any]) -> Any:
    """PROCESS: three rows per input row, noting the thread it runs on."""
    THREADS.append(threading.current_thread().name)
    for copy in range(3):
        yield {"id": row["id"] * 10 + copy, "outcome": row["outcome"], "delay_ms": row["delay_ms"]}


def passed(row: dict[str, Any]) -> Any:
    THREADS.append(threading.current_thread().name)
    return {"id": row["id"], "value": row["value"]}


@pytest.fixture(autouse=True)
def _reset() -> None:
    udfs.reset()
    THREADS.clear()


ROW = (C.Column("id", "BIGINT"), C.Column("outcome", "STRING"), C.Column("delay_ms", "DOUBLE"))
OUT = (C.Column("id", "BIGINT"), C.Column("value", "STRING"))


def enrich(name: str, **kw: Any) -> EnrichOperator:
    kw.setdefault("timeout_s", 5.0)
    return EnrichOperator(C.Enrich(name, 7, C.PythonCall("async_udfs:scripted", (str(HERE),)),
                                   (C.Column("value", "STRING"),), ("id",), **kw))


def process(name: str, fn: str, returns: tuple[C.Column, ...]) -> ProcessOperator:
    return ProcessOperator(C.Process(name, 5, C.PythonCall(f"test_loop_chain:{fn}", (str(HERE),)), returns,
                                     key_columns=("id",)))


def rows(ids: range, delay_ms: float = 0.0, outcome: str = "ok") -> list[dict[str, Any]]:
    return [{"id": i, "outcome": outcome, "delay_ms": delay_ms} for i in ids]


def run(chain: OperatorChain, chunks: list[list[Any]]) -> list[dict[str, Any]]:
    return [row for emitted in chain.run(chunks) for row in emitted.rows]


def test_the_operators_run_on_the_loop_thread_and_rows_keep_their_order() -> None:
    chain = OperatorChain([process("fan", "fan_out", ROW), enrich("e", mode=C.Mode.ORDERED, capacity=4),
                           process("out", "passed", OUT)])
    out = run(chain, [rows(range(5), delay_ms=2), rows(range(5, 9))])
    assert [r["id"] for r in out] == [i * 10 + c for i in range(9) for c in range(3)]
    assert set(THREADS) == {"dslc-async-io"}   # PROCESS user code too: no hand-off per row
    assert udfs.state["max_running"] <= 4       # a fan-out of 3 into CAPACITY 4 waits, never exceeds
    metrics = chain.metrics()["e"]
    assert metrics["elements_in"] == metrics["elements_out"] == 27
    assert metrics["blocked_seconds"] > 0      # the driver waited for room


def test_a_chain_without_an_enrich_stays_on_the_callers_thread() -> None:
    chain = OperatorChain([process("fan", "fan_out", ROW)])
    assert len(run(chain, [rows(range(3))])) == 9
    assert set(THREADS) == {threading.current_thread().name}


def test_a_watermark_behind_a_full_queue_keeps_its_place() -> None:
    """Two ENRICHes: the second's queue fills while the first emits, so its elements and the
    watermark between them wait in its backlog; the watermark must not overtake them."""
    first, second = enrich("a", mode=C.Mode.ORDERED, capacity=8), enrich("b", mode=C.Mode.UNORDERED, capacity=2)
    chain = OperatorChain([first, second])
    seen: list[Any] = []
    chain.collector.emit = lambda row: seen.append(row["id"])   # type: ignore[method-assign]
    chain.collector.emit_watermark = lambda wm: seen.append(("wm", wm.timestamp))   # type: ignore[method-assign]
    items: list[Any] = [*rows(range(4), delay_ms=3), Watermark(1.0), *rows(range(4, 8), delay_ms=1)]
    list(chain.run([items]))
    position = seen.index(("wm", 1.0))
    assert sorted(seen[:position]) == [0, 1, 2, 3]
    assert sorted(seen[position + 1:]) == [4, 5, 6, 7]
    assert udfs.state["max_running"] <= 8 + 2


def test_a_failing_call_that_waited_fails_the_chain_with_its_key() -> None:
    chain = OperatorChain([enrich("e", mode=C.Mode.ORDERED, capacity=3)])
    with pytest.raises(ElementFailure, match=r"operator 'e' \(line 7\) failed on element id=4"):
        run(chain, [rows(range(4), delay_ms=2) + rows(range(4, 5), delay_ms=2, outcome="error") + rows(range(5, 9))])
    assert not chain.operators[0]._calls.pool.busy   # disposed: the pool's call tasks have ended


def test_a_loop_that_stopped_running_is_reported_not_waited_for() -> None:
    driver = loop_chain.LoopDriver([])
    driver.loop = asyncio.new_event_loop()   # as after the loop thread died: nothing runs it
    never_run = asyncio.sleep(0)
    try:
        with pytest.raises(RuntimeError, match="loop thread died"):
            driver.call(never_run)             # reported after about a second
    finally:
        never_run.close()
        driver.loop.close()
