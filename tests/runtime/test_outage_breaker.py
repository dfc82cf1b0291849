"""runtime/limits/outage.py: the circuit breaker of ON OUTAGE on a real event loop: what counts as
the service being down, when it opens, one probe at a time at growing intervals, PAUSE ending
in a failure after d, FAIL at once, and the message naming operator, line and last error."""
from __future__ import annotations

import asyncio

import aiohttp
import pytest

from dslc.runtime.calls.base import CallError
from dslc.runtime.config import Outage
from dslc.runtime.limits.outage import OutageBreaker, OutageStop, is_outage_error


def test_what_a_service_that_is_down_gives():
    assert is_outage_error(ConnectionRefusedError(111, "refused"))
    assert is_outage_error(aiohttp.ServerDisconnectedError())
    assert is_outage_error(TimeoutError())
    assert is_outage_error(CallError("HTTP 502", status=502))
    assert not is_outage_error(CallError("HTTP 404", status=404))
    assert not is_outage_error(CallError("HTTP 429", status=429))
    assert not is_outage_error(ValueError("bad answer"))


def _open(breaker: OutageBreaker) -> None:
    for _ in range(breaker.config.threshold):
        breaker.failed(ConnectionRefusedError(111, "Connect call failed"))


def test_an_answer_in_between_ends_a_streak():
    breaker = OutageBreaker(Outage("PAUSE", 60), "enriched", 4)
    for _ in range(9):
        breaker.failed("boom")
    breaker.succeeded()
    breaker.failed("boom")
    assert not breaker.open and breaker.failures == 1


def test_fail_stops_at_once_naming_operator_line_and_last_error():
    breaker = OutageBreaker(Outage("FAIL"), "enriched", 4)
    _open(breaker)
    with pytest.raises(OutageStop) as stop:
        asyncio.run(breaker.admit())
    assert str(stop.value) == ("ENRICH 'enriched' (line 4): the service is down (ON OUTAGE FAIL): 10 calls in a "
                               "row failed; last error: ConnectionRefusedError: [Errno 111] Connect call failed")


def test_pause_lets_one_probe_out_and_holds_the_rest_until_it_is_answered():
    async def scenario() -> list[str]:
        breaker = OutageBreaker(Outage("PAUSE", 30), "enriched", 4)
        _open(breaker)
        events: list[str] = []

        async def element(name: str) -> None:
            await breaker.admit()
            events.append(f"{name} sent")

        tasks = [asyncio.create_task(element(f"e{i}")) for i in range(3)]
        await asyncio.sleep(0.7)             # the first probe goes out after 0.5 s, alone
        events.append("probe answered")
        breaker.succeeded()
        await asyncio.gather(*tasks)
        return events

    events = asyncio.run(scenario())
    assert events[0].endswith(" sent") and events[1] == "probe answered"     # one probe, alone
    assert len(events) == 4 and {e.split()[0] for e in events if e.endswith(" sent")} == {"e0", "e1", "e2"}


def test_a_failed_probe_doubles_the_wait_and_pause_fails_after_d():
    async def scenario() -> float:
        breaker = OutageBreaker(Outage("PAUSE", 1.2), "enriched", 4)
        _open(breaker)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await breaker.admit()                # the first probe, after 0.5 s
        first = loop.time() - started
        breaker.failed(ConnectionResetError(104, "reset"))
        assert breaker.open and breaker._interval == 1.0
        with pytest.raises(OutageStop, match=r"paused 1.2s without an answer; last error: ConnectionResetError"):
            await breaker.admit()            # the next probe would be at 1.5 s: past d
        return first

    assert 0.4 < asyncio.run(scenario()) < 1.0
