"""Calls that fail while the service is down, their elements held by ON OUTAGE PAUSE, are counted
(`outage_held`) and the diagnosis names the outage, not CAPACITY (issue #48 item 5)."""
from __future__ import annotations

from runtime_support import FaultServer, Reply
from runtime_support import run_operator as run

from dslc.runtime.config import Column, Enrich, HttpCall, Mode, Outage
from dslc.runtime.diagnosis import diagnose
from dslc.runtime.metrics import summary


def test_calls_refused_during_a_pause_are_counted_and_the_diagnosis_says_outage(fault_server: FaultServer) -> None:
    # three connections reset (a service that is down), then the answer
    fault_server.script("a", Reply(reset=True), Reply(reset=True), Reply(reset=True))
    config = Enrich(name="held", line=4, call=HttpCall(fault_server.url("/kv/{id}")),
                    returns=(Column("value", "STRING"),), key_columns=("id",), mode=Mode.UNORDERED, capacity=4,
                    timeout_s=20.0, outage=Outage("PAUSE", 30.0, threshold=2))
    op, out = run(config, [{"id": "a"}])
    assert [r["value"] for r in out.rows] == ["v-a"] and out.dead_letters == []
    m = op.metrics()
    held = m["outage_held"]        # aiohttp sends a GET again itself once on a reused connection reset
    assert held >= 1 and m["errors"] == 0 and m["calls"] == held + 1
    verdict = diagnose("held", summary(m))
    assert verdict["cause"] == "outage" and f"{held} calls failed while the service was down" in verdict["why"]
