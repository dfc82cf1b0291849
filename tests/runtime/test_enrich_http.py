"""ENRICH WITH HTTP GET against a real local aiohttp server with injected faults."""
from __future__ import annotations

import json
import time
import urllib.parse
from typing import Any

import pytest
from polling import until
from runtime_support import Collector, FaultServer, Reply
from runtime_support import run_operator as run

from dslc.runtime.calls import http as EF
from dslc.runtime.calls.url import placeholders
from dslc.runtime.config import Column, Enrich, HttpCall, Mode, Outcome, Retry
from dslc.runtime.core.async_operator import EnrichOperator
from dslc.runtime.core.operator import ElementFailure
from dslc.runtime.metrics import summary

_names = iter(range(10**9))


def make(server: FaultServer, template: str = "/kv/{id}", **kw: Any) -> Enrich:
    kw.setdefault("name", f"http{next(_names)}")
    kw.setdefault("line", 12)
    kw.setdefault("returns", (Column("key", "STRING"), Column("value", "STRING")))
    kw.setdefault("key_columns", ("id",))
    kw.setdefault("timeout_s", 5.0)
    return Enrich(call=HttpCall(server.url(template)), **kw)




def test_placeholders_helper() -> None:
    assert placeholders("http://h/{a}/x/{b}?q={a}&r={_c1}") == ("a", "b", "_c1")
    assert placeholders("http://h/plain") == ()


@pytest.mark.parametrize("on_loop", [True, False], ids=["driven on the loop", "driven from a thread"])
def test_basic_lookup_appends_returns(fault_server: FaultServer, on_loop: bool) -> None:
    op, out = run(make(fault_server), [{"id": "a", "n": 1}, {"id": "b", "n": 2}], on_loop=on_loop)
    assert out.rows == [{"id": "a", "n": 1, "key": "a", "value": "v-a"}, {"id": "b", "n": 2, "key": "b", "value": "v-b"}]
    assert fault_server.total == 2 and op.metrics()["calls"] == 2


@pytest.mark.parametrize("value", ["../x?y=1#z", "/", "a b", "ünï/cødé", "@evil.example:80", "%2F", "a+b&c=d"])
def test_hostile_placeholder_values_stay_in_their_segment(fault_server: FaultServer, value: str) -> None:
    _, out = run(make(fault_server), [{"id": value}])
    assert out.rows[0]["key"] == value                    # the server saw exactly this one segment
    raw = fault_server.raw_paths[-1]
    assert raw == "/kv/" + urllib.parse.quote(value, safe="")
    assert "?" not in raw and "#" not in raw and raw.count("/") == 2


def test_placeholder_in_query_cannot_add_parameters(fault_server: FaultServer) -> None:
    _, out = run(make(fault_server, "/kv/fixed?tag={id}", returns=(Column("tag", "STRING"), Column("status", "STRING"))),
                 [{"id": "x&status=500"}])
    assert out.rows[0]["tag"] == "x&status=500" and out.rows[0]["status"] is None


def test_null_placeholder_is_an_error(fault_server: FaultServer) -> None:
    op, out = run(make(fault_server, on_error=Outcome.DEAD_LETTER), [{"id": None}, {"id": "a"}])
    assert out.dead_letters[0]["error"].endswith("placeholder column id is null")
    # a request never sent is no call (#48 item 6): one element was called, once
    assert fault_server.total == 1 and (op.metrics()["calls"], op.metrics()["elements_called"]) == (1, 1)
    with pytest.raises(ElementFailure, match="placeholder column id is null"):
        run(make(fault_server), [{"id": None}])


def test_an_unsendable_request_is_not_retried(fault_server: FaultServer) -> None:
    op, out = run(make(fault_server, on_error=Outcome.DEAD_LETTER, retry=Retry(3, 0.001)),
                  [{"id": None}, {"id": ".."}])
    assert [letter["attempts"] for letter in out.dead_letters] == [1, 1]
    assert op.metrics()["retries"] == 0 and fault_server.total == 0


def test_404_is_a_miss(fault_server: FaultServer) -> None:
    fault_server.script("gone", Reply(status=404))
    op, out = run(make(fault_server, on_miss=Outcome.DEAD_LETTER), [{"id": "gone"}, {"id": "here"}])
    assert [d["kind"] for d in out.dead_letters] == ["miss"]
    assert [r["id"] for r in out.rows] == ["here"]
    assert op.metrics()["misses"] == 1


def test_json_array_gives_rows_and_bad_bodies_are_errors(fault_server: FaultServer) -> None:
    fault_server.script("arr", Reply(body=[{"value": "1"}, {"value": "2"}]))
    fault_server.script("txt", Reply(body="<html>not json</html>"))
    fault_server.script("num", Reply(body=42))
    fault_server.script("big", Reply(body="x" * (EF.MAX_BODY_BYTES + 1)))
    _, out = run(make(fault_server, on_error=Outcome.DEAD_LETTER, mode=Mode.ORDERED),
                 [{"id": k} for k in ("arr", "txt", "num", "big")])
    assert [(r["id"], r["value"]) for r in out.rows] == [("arr", "1"), ("arr", "2")]
    errors = {d["key"]["id"]: d["error"] for d in out.dead_letters}
    assert "not JSON" in errors["txt"] and "expected an object or array" in errors["num"]
    assert "exceeds" in errors["big"]


def test_a_json_null_answer_is_a_miss_like_404_and_an_empty_list(fault_server: FaultServer) -> None:
    """The contract: no result (None, an empty list, HTTP 404) is a miss (issue #16 item 6)."""
    fault_server.script("null", Reply(body="null"))
    fault_server.script("empty", Reply(body=[]))
    fault_server.script("gone", Reply(status=404))
    op, out = run(make(fault_server, on_miss=Outcome.DEAD_LETTER, on_error=Outcome.FAIL, mode=Mode.ORDERED),
                  [{"id": k} for k in ("null", "empty", "gone", "here")])
    assert [r["id"] for r in out.rows] == ["here"]
    assert sorted(d["key"]["id"] for d in out.dead_letters) == ["empty", "gone", "null"]
    assert {d["kind"] for d in out.dead_letters} == {"miss"}
    assert op.metrics()["misses"] == 3 and op.metrics()["errors"] == 0
    assert fault_server.total == 4


def test_5xx_is_an_error_and_retries_are_seen_by_the_server(fault_server: FaultServer) -> None:
    fault_server.script("flaky", Reply(status=503), Reply(status=500), Reply())
    fault_server.script("down", *[Reply(status=502)] * 5)
    cfg = make(fault_server, retry=Retry(2, 0.005), on_error=Outcome.DEAD_LETTER)
    op, out = run(cfg, [{"id": "flaky"}, {"id": "down"}])
    assert [r["id"] for r in out.rows] == ["flaky"]
    assert out.dead_letters[0]["key"] == {"id": "down"} and "HTTP 502" in out.dead_letters[0]["error"]
    assert out.dead_letters[0]["attempts"] == 3
    assert fault_server.by_key["flaky"] == 3 and fault_server.by_key["down"] == 3
    m = op.metrics()
    assert m["retries"] == 4 and m["calls"] == 6 and m["errors"] == 1


def test_connection_reset_is_an_error_then_retried(fault_server: FaultServer) -> None:
    # aiohttp itself retries an idempotent GET once when a kept-alive connection drops, so
    # the server may see one extra request per reset: script enough resets
    fault_server.script("r1", Reply(reset=True), Reply(reset=True), Reply())
    fault_server.script("r2", *[Reply(reset=True)] * 4)
    op, out = run(make(fault_server, on_error=Outcome.NULL, retry=Retry(2)), [{"id": "r1"}])
    assert out.rows[0]["value"] == "v-r1" and fault_server.by_key["r1"] == 3
    _, out = run(make(fault_server, on_error=Outcome.DEAD_LETTER), [{"id": "r2"}])
    assert out.dead_letters[0]["kind"] == "error"


def test_hang_longer_than_timeout(fault_server: FaultServer) -> None:
    fault_server.script("stuck", Reply(hang=True), Reply(hang=True))
    cfg = make(fault_server, timeout_s=0.2, retry=Retry(3, 0.0), on_timeout=Outcome.DEAD_LETTER)
    op, out = run(cfg, [{"id": "stuck"}, {"id": "fine"}])
    # The TIMEOUT covers the retries: one attempt, then the timeout answer (not 3 more hangs).
    assert out.dead_letters[0]["kind"] == "timeout" and out.dead_letters[0]["attempts"] == 1
    assert fault_server.by_key["stuck"] == 1
    assert [r["id"] for r in out.rows] == ["fine"]
    assert op.metrics()["timeouts"] == 1
    deadline = time.monotonic() + 2
    while fault_server.in_flight and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fault_server.in_flight == 0  # the client really went away


def test_latency_and_concurrency_never_above_capacity(fault_server: FaultServer) -> None:
    fault_server.default = Reply(delay_ms=20)
    rows = [{"id": str(i)} for i in range(60)]
    op, out = run(make(fault_server, capacity=6, mode=Mode.UNORDERED), rows)
    assert sorted(r["id"] for r in out.rows) == sorted(r["id"] for r in rows)
    # Concurrency is counted by the server, not timed (this machine is shared): calls overlap,
    # never more than CAPACITY at once.
    assert 4 <= fault_server.max_in_flight <= 6
    m = op.metrics()
    assert m["max_in_flight"] <= 6 and m["blocked_seconds"] > 0
    assert summary(m)["p50_ms"] >= 15           # each call waited for the service's 20 ms


def test_slow_element_does_not_stall_the_next_batch(fault_server: FaultServer) -> None:
    """UNORDERED: batch 2's requests start while batch 1's slow element is still in flight.

    What is asserted is an order (each of batch 2's requests reached the service before the
    slow answer was sent), not a duration: the slow answer takes 3 s so that a loaded machine
    cannot blur the order."""
    slow_s = 3.0
    fault_server.script("slow", Reply(delay_ms=slow_s * 1000))
    op = EnrichOperator(make(fault_server, capacity=10, mode=Mode.UNORDERED))
    out = Collector()
    op.open(out)
    for r in [{"id": "slow"}] + [{"id": f"b1-{i}"} for i in range(9)]:    # "batch 1"
        op.process_element(r)
    for r in [{"id": f"b2-{i}"} for i in range(9)]:                        # "batch 2"
        op.process_element(r)
    wanted = {f"b2-{i}" for i in range(9)}
    deadline = time.monotonic() + slow_s
    while not wanted <= set(fault_server.started) and time.monotonic() < deadline:
        time.sleep(0.002)
    assert wanted <= set(fault_server.started)
    slow_answered = fault_server.started["slow"] + slow_s
    assert max(fault_server.started[k] for k in wanted) < slow_answered     # all started while "slow" was in flight
    assert not any(r["id"] == "slow" for r in out.rows)
    op.finish()
    op.close()
    op.dispose()
    assert out.rows[-1]["id"] == "slow" and len(out.rows) == 19


def test_session_is_reused_across_tasks_and_closed_after_failure(fault_server: FaultServer) -> None:
    cfg = make(fault_server, name="shared_http")
    run(cfg, [{"id": "1"}])
    sessions = [s for k, s in EF._sessions.items() if k[2] == "shared_http"]  # noqa: SLF001
    assert len(sessions) == 1
    run(cfg, [{"id": "2"}])
    again = [s for k, s in EF._sessions.items() if k[2] == "shared_http"]  # noqa: SLF001
    assert again == sessions and not sessions[0].closed
    fault_server.script("boom", Reply(status=500))
    with pytest.raises(ElementFailure, match="HTTP 500"):
        run(cfg, [{"id": "boom"}])
    assert sessions[0].closed
    assert not [k for k in EF._sessions if k[2] == "shared_http"]  # noqa: SLF001
    _, out = run(cfg, [{"id": "3"}])                                # a new session next time
    assert out.rows[0]["value"] == "v-3"


def test_dispose_mid_flight_cancels_requests(fault_server: FaultServer) -> None:
    fault_server.default = Reply(hang=True)
    op = EnrichOperator(make(fault_server, capacity=4))
    op.open(Collector())
    for i in range(4):
        op.process_element({"id": str(i)})
    until(lambda: fault_server.in_flight == 4, "the four requests never were in flight together")
    op.dispose()
    until(lambda: fault_server.in_flight == 0, "dispose left requests in flight")


def test_an_answer_setting_a_cookie_does_not_reach_other_rows_requests(serve_app) -> None:
    """The operator's session is shared by every element: a cookie one answer sets must not be
    sent with the next row's request (rows are independent), so the session keeps no cookies.
    (A host name, not an IP: aiohttp's default jar ignores cookies from IP addresses.)"""
    from aiohttp import web

    seen: list[str | None] = []

    async def kv(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Cookie"))
        response = web.json_response({"key": request.match_info["id"], "value": "v"})
        response.set_cookie("session", f"from-{request.match_info['id']}")
        return response

    app = web.Application()
    app.router.add_get("/kv/{id}", kv)
    server = serve_app(app)
    config = Enrich(name=f"http{next(_names)}", line=12, call=HttpCall(f"http://localhost:{server.port}/kv/{{id}}"),
                    returns=(Column("key", "STRING"), Column("value", "STRING")), key_columns=("id",),
                    capacity=1, timeout_s=5.0)
    _, out = run(config, [{"id": "a"}, {"id": "b"}, {"id": "c"}])
    assert [r["key"] for r in out.rows] == ["a", "b", "c"]
    assert seen == [None, None, None]


def test_a_call_task_whose_element_timed_out_goes_on_with_the_next_elements(fault_server: FaultServer) -> None:
    """CAPACITY 1: one call task runs every element. The TIMEOUT cancels it at the hung element;
    it answers that element by the timeout policy and goes on with the rest, in order."""
    fault_server.script("stuck", Reply(hang=True))
    cfg = make(fault_server, capacity=1, timeout_s=0.2, on_timeout=Outcome.DEAD_LETTER, mode=Mode.ORDERED)
    op, out = run(cfg, [{"id": "a"}, {"id": "stuck"}, {"id": "b"}, {"id": "c"}])
    assert [r["id"] for r in out.rows] == ["a", "b", "c"]
    assert [d["key"] for d in out.dead_letters] == [{"id": "stuck"}]
    m = op.metrics()
    assert m["timeouts"] == 1 and m["calls"] == 4 and m["max_in_flight"] == 1
    assert not op._calls.pool.busy                 # noqa: SLF001 - dispose ended the call task


TOKEN = "Tk-4f81/c0de93a7-never-written"


def _with_token(server: FaultServer, **kw: Any) -> Enrich:
    from dslc.runtime.secrets import Secrets

    return Enrich(name=f"http{next(_names)}", line=12, returns=(Column("key", "STRING"),),
                  key_columns=("id",), timeout_s=5.0, on_error=Outcome.DEAD_LETTER,
                  call=HttpCall(server.url("/kv/{id}"), headers=(("Authorization", "Bearer ${TOKEN}"),)),
                  secrets=Secrets({"TOKEN": TOKEN}), **kw)


def test_a_secret_echoed_by_an_error_body_is_masked_in_any_encoding_and_where_it_is_cut(fault_server) -> None:
    """#48 item 17: an error body writing `/` as `\\/` (PHP's json_encode), and a 503 body whose
    token straddles the point where the text shown is cut, leave no part of the token."""
    echoed = json.dumps({"error": f"bad token {TOKEN}"}).replace("/", "\\/")
    fault_server.script("php", Reply(status=400, body=echoed))
    fault_server.script("cut", Reply(status=503, body="x" * 190 + f" token {TOKEN} rejected"))
    op, out = run(_with_token(fault_server), [{"id": "php"}, {"id": "cut"}])
    errors = {letter["key"]["id"]: letter["error"] for letter in out.dead_letters}
    assert "${TOKEN}" in errors["php"] and "HTTP 400" in errors["php"]
    shown = json.dumps([errors, op.metrics()])
    for piece in (TOKEN[:6], TOKEN[-8:], "Tk-4f81\\\\/c0de"):
        assert piece not in shown, piece


def test_a_long_json_error_body_shows_the_errors_message(fault_server: FaultServer) -> None:
    """#48 item 4: a gateway's error object longer than 300 bytes shows its `message` (and code),
    not its first bytes of braces and field names; a body that is not JSON is shortened."""
    gateway = {"error": {"message": "Invalid model name passed in model=gpt-9", "type": "invalid_request_error",
                         "param": None, "code": "model_not_found"},
               "request": {"id": "req_" + "0" * 40, "trace": ["litellm.proxy"] * 20}}
    fault_server.script("gateway", Reply(status=400, body=json.dumps(gateway)))
    fault_server.script("fastapi", Reply(status=422, body=json.dumps({"detail": [
        {"loc": ["body", "x"], "msg": "field required", "type": "value_error.missing", "pad": "p" * 300}]})))
    fault_server.script("html", Reply(status=502, body="<html>" + "b" * 1000 + "</html>"))
    op, out = run(make(fault_server, on_error=Outcome.DEAD_LETTER), [{"id": "gateway"}, {"id": "fastapi"}, {"id": "html"}])
    errors = {letter["key"]["id"]: letter["error"] for letter in out.dead_letters}
    assert errors["gateway"].endswith("/kv/gateway: Invalid model name passed in model=gpt-9 [model_not_found]")
    assert errors["fastapi"].endswith("/kv/fastapi: field required [value_error.missing]")
    assert errors["html"].endswith(": <html>" + "b" * 293 + "\u2026")
