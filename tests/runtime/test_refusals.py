"""Refused credentials and a service that never answered stop the run (#41, item 2): against the
real fault server, counting the requests it saw."""
from __future__ import annotations

import asyncio
import re
import socket
from typing import Any

import pytest
from runtime_support import FaultServer, Reply
from runtime_support import run_operator as run

from dslc.runtime.config import Column, Enrich, HttpCall, Outage, Outcome, Retry
from dslc.runtime.core.operator import ElementFailure
from dslc.runtime.core.refusals import JUDGED, CredentialsRefused, ServiceUnreachable, share_of
from dslc.runtime.secrets import Secrets

_names = iter(range(10**9))


def make(url: str, **kw: Any) -> Enrich:
    kw.setdefault("name", f"refusals{next(_names)}")
    kw.setdefault("capacity", 8)
    kw.setdefault("retry", Retry(2, 0.001))
    kw.setdefault("on_error", Outcome.DEAD_LETTER)
    return Enrich(line=9, call=HttpCall(url, headers=(("Authorization", "Bearer ${TOKEN}"),)),
                  returns=(Column("value", "STRING"),), key_columns=("id",), timeout_s=5.0,
                  secrets=Secrets({"TOKEN": "s3cr3t-value"}), **kw)


def rows(n: int) -> list[dict[str, Any]]:
    return [{"id": f"k{i}"} for i in range(n)]


def stop_of(cfg: Enrich, items: list[dict[str, Any]]) -> BaseException:
    """The run's stop raised by driving the operator: from an element (as its ElementFailure's
    cause), or at the end of the task's input."""
    with pytest.raises((ElementFailure, CredentialsRefused, ServiceUnreachable)) as info:
        run(cfg, items)
    error = info.value
    return error.cause if isinstance(error, ElementFailure) else error


def test_a_service_refusing_every_call_is_called_at_most_judged_times(fault_server: FaultServer) -> None:
    fault_server.default = Reply(status=401, body="invalid token s3cr3t-value")
    cfg = make(fault_server.url())
    cause = stop_of(cfg, rows(40))
    assert fault_server.total <= JUDGED       # not 40 rows x 3 attempts, not CAPACITY more than the gate
    assert isinstance(cause, CredentialsRefused)
    text = str(cause)
    assert text.startswith(f"ENRICH '{cfg.name}' (line 9): the service refused the credentials: "
                           f"{JUDGED} calls were refused and none was answered")
    assert "header 'Authorization: Bearer ${TOKEN}'" in text
    assert "s3cr3t-value" not in text and "HTTP 401" in text


def test_a_few_rows_all_refused_stop_the_run_at_the_end_of_the_task(fault_server: FaultServer) -> None:
    fault_server.default = Reply(status=403, body="forbidden")
    cause = stop_of(make(fault_server.url()), rows(3))
    assert isinstance(cause, CredentialsRefused)
    assert "3 calls were refused and none was answered" in str(cause)
    assert fault_server.total == 3           # 403 is not retried


def test_some_rows_refused_beside_answered_ones_are_dead_letters(fault_server: FaultServer) -> None:
    for key in ("k3", "k5"):
        fault_server.script(key, Reply(status=403, body="not yours"))
    op, out = run(make(fault_server.url(), capacity=2), rows(12))
    assert sorted(d["key"]["id"] for d in out.dead_letters) == ["k3", "k5"]
    assert {d["error_class"] for d in out.dead_letters} == {"credentials"}
    assert len(out.rows) == 10 and fault_server.total == 12


def test_refusals_in_a_row_after_answers_stop_the_run(fault_server: FaultServer) -> None:
    for key in (f"k{i}" for i in range(5, 40)):      # the token expired after five answers
        fault_server.script(key, Reply(status=401, body="expired"))
    cause = stop_of(make(fault_server.url(), capacity=1), rows(40))
    assert "10 calls were refused in a row" in str(cause)
    assert fault_server.total == 5 + JUDGED


def test_a_service_that_never_answers_stops_the_run() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cause = stop_of(make(f"http://127.0.0.1:{port}/kv/{{id}}"), rows(30))
    assert isinstance(cause, ServiceUnreachable)
    assert f"the service never answered: {JUDGED} calls could not connect" in str(cause)
    assert f"is it running at http://127.0.0.1:{port}/kv/{{id}}?" in str(cause)


def test_under_on_outage_pause_the_breaker_decides_an_outage() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cfg = make(f"http://127.0.0.1:{port}/kv/{{id}}", outage=Outage("FAIL"))
    with pytest.raises(ElementFailure) as info:
        run(cfg, rows(30))
    assert str(info.value.cause).startswith("OutageStop: ") and "(ON OUTAGE FAIL)" in str(info.value.cause)


def test_the_calls_judged_are_shared_by_the_tasks_that_run_at_once() -> None:
    assert [share_of(n) for n in (1, 2, 3, 4, 100)] == [10, 5, 4, 3, 3]


def test_on_error_fail_says_the_credentials_were_refused(fault_server: FaultServer) -> None:
    fault_server.default = Reply(status=401, body="no")
    cause = stop_of(make(fault_server.url(), on_error=Outcome.FAIL), rows(5))
    # CAPACITY 8: the calls already out when the first 401 stops the operator are refused too
    said = re.search(r"(\d+) (call was|calls were) refused and none was answered", str(cause))
    assert isinstance(cause, CredentialsRefused) and said is not None
    refused = int(said.group(1))
    assert (refused == 1) == (said.group(2) == "call was") and 1 <= refused <= fault_server.total <= 5


def test_elements_that_send_nothing_free_their_place_at_the_gate(fault_server: FaultServer) -> None:
    """An element admitted through the gate whose call is never sent (a spent BUDGET) gives its
    place back: the next elements are not held for an answer that cannot come (the tickets
    example with BUDGET TOKENS hung there)."""
    from dslc.runtime.core.refusals import RefusalGuard

    guard = RefusalGuard(make(fault_server.url()), share=2)

    async def admit_all(n: int) -> None:
        for _ in range(n):
            await asyncio.wait_for(guard.admit(), 1.0)
            guard.not_sent()

    asyncio.run(admit_all(6))
    assert guard.out == 0 and guard.gated
