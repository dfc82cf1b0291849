"""A plain `def` ENRICH function runs in threads; a call that outlives its TIMEOUT cannot be
interrupted. It must not keep a slot from the rows behind it (issue #16 item 7)."""
from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

import pytest
from runtime_support import run_operator as run

from dslc.runtime.config import Column, Enrich, Mode, Outcome, PythonCall

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
udfs = importlib.import_module("sync_udfs")


@pytest.fixture(autouse=True)
def _released():
    udfs.reset()
    yield
    udfs.release.set()          # let the stuck threads end
    deadline = time.monotonic() + 10
    while udfs.state["running"] and time.monotonic() < deadline:
        time.sleep(0.01)


def make(name: str, **kw) -> Enrich:
    return Enrich(name=name, line=3, call=PythonCall("sync_udfs:lookup", (str(HERE),)),
                  returns=(Column("value", "STRING"),), key_columns=("id",), **kw)


@pytest.mark.parametrize("mode", [Mode.ORDERED, Mode.UNORDERED])
def test_timed_out_sync_calls_do_not_starve_the_rows_behind_them(mode):
    """CAPACITY 2 TIMEOUT 300ms ON TIMEOUT NULL: two calls stuck far past their timeout; the 18
    rows behind them are still called and answered, and never more than CAPACITY counted calls
    are in flight."""
    rows = [{"id": f"r{i}", "stuck": i < 2} for i in range(20)]
    op, out = run(make(f"sync_{mode.name}", capacity=2, timeout_s=0.3, on_timeout=Outcome.NULL, mode=mode), rows)
    answers = {r["id"]: r["value"] for r in out.rows}
    assert answers == {f"r{i}": (None if i < 2 else f"vr{i}") for i in range(20)}
    assert sorted(udfs.state["called"]) == sorted(r["id"] for r in rows)     # every row was called
    metrics = op.metrics()
    assert metrics["timeouts"] == 2 and metrics["calls"] == 20
    assert metrics["max_in_flight"] <= 2
    # the two stuck threads plus at most CAPACITY counted calls
    assert udfs.state["max_running"] <= 4


def test_stuck_calls_beyond_capacity_wait_for_a_thread():
    """At most CAPACITY calls that outlived their timeout keep a thread each; when more are stuck,
    new calls wait for a thread (and time out in turn), so threads stay bounded at 2 x CAPACITY."""
    rows = [{"id": f"r{i}", "stuck": True} for i in range(8)]
    op, out = run(make("sync_bounded", capacity=2, timeout_s=0.2, on_timeout=Outcome.NULL), rows)
    assert [r["value"] for r in out.rows] == [None] * 8
    assert udfs.state["max_running"] <= 4
    assert op.metrics()["timeouts"] == 8
