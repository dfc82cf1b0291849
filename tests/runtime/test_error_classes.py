"""Errors are classified, and paid for once (#41, item 1): RETRY calls again only for an error
whose next answer may differ (5xx, 408, 425, 429, connection faults); other 4xx, 401/403 and an
answer that does not fit RETURNS are the element's at once. Against the real fault server,
counting the requests it saw; each dead letter names its class."""
from __future__ import annotations

import socket
from typing import Any

import pytest
from runtime_support import FaultServer, Reply
from runtime_support import run_operator as run

from dslc.runtime.calls import errors
from dslc.runtime.calls.base import CallError, UnsendableRequest, answer_error
from dslc.runtime.config import Column, Enrich, HttpCall, Outcome, Retry
from dslc.runtime.core.refusals import ServiceUnreachable

_names = iter(range(10**9))


def make(url: str, **kw: Any) -> Enrich:
    kw.setdefault("name", f"classes{next(_names)}")
    kw.setdefault("returns", (Column("key", "STRING"), Column("value", "STRING")))
    return Enrich(line=4, call=HttpCall(url), key_columns=("id",), timeout_s=5.0,
                  retry=Retry(2, 0.001), on_error=Outcome.DEAD_LETTER, **kw)


@pytest.mark.parametrize(("status", "error_class", "requests"), [
    (400, "request", 1), (405, "request", 1), (409, "request", 1), (410, "request", 1), (422, "request", 1),
    (401, "credentials", 1), (403, "credentials", 1),
    (408, "transient", 3), (425, "transient", 3), (429, "transient", 3), (500, "transient", 3),
    (503, "transient", 3),
])
def test_a_status_is_retried_only_when_the_next_answer_may_differ(fault_server: FaultServer, status: int,
                                                                  error_class: str, requests: int) -> None:
    fault_server.script("bad", *[Reply(status=status, body="no")] * 3)
    op, out = run(make(fault_server.url()), [{"id": "ok"}, {"id": "bad"}])
    assert [r["id"] for r in out.rows] == ["ok"]
    [letter] = out.dead_letters
    assert letter["error_class"] == error_class and f"HTTP {status}" in letter["error"]
    assert letter["attempts"] == requests
    assert fault_server.by_key["bad"] == requests
    assert op.metrics()["retries"] == requests - 1


def test_an_answer_that_does_not_fit_returns_is_not_retried(fault_server: FaultServer) -> None:
    fault_server.script("float", Reply(body={"key": "float", "value": 2.5}))
    fault_server.script("text", Reply(body="not json"))
    fault_server.script("scalar", Reply(body=[1, 2]))
    cfg = make(fault_server.url(), returns=(Column("key", "STRING"), Column("value", "INT")))
    op, out = run(cfg, [{"id": "float"}, {"id": "text"}, {"id": "scalar"}])
    letters = {d["key"]["id"]: d for d in out.dead_letters}
    assert {k: d["error_class"] for k, d in letters.items()} == {"float": "answer", "text": "answer", "scalar": "answer"}
    assert "answer field 'value' is declared INT but got float 2.5" in letters["float"]["error"]
    assert "response body is not JSON" in letters["text"]["error"]
    assert {k: d["attempts"] for k, d in letters.items()} == {"float": 1, "text": 1, "scalar": 1}
    assert fault_server.total == 3 and op.metrics()["retries"] == 0


def test_a_refused_connection_is_unreachable_and_retried() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]       # closed when the block ends: nothing listens there
    # retried (RETRY 2: three calls); a task whose every call could not connect then stops the
    # run (core/refusals.py) rather than dead-letter the row
    with pytest.raises(ServiceUnreachable, match="the service never answered: 3 calls could not connect"):
        run(make(f"http://127.0.0.1:{port}/kv/{{id}}"), [{"id": "a"}])


def test_error_counts_group_the_elements_by_the_request_as_written(fault_server: FaultServer) -> None:
    for key in ("a", "b", "c"):
        fault_server.script(key, Reply(status=422, body="bad sku"))
    op, _ = run(make(fault_server.url()), [{"id": "ok"}, {"id": "a"}, {"id": "b"}, {"id": "c"}])
    assert op.metrics()["error_messages"] == {
        f"request: CallError: HTTP 422 from {fault_server.url()}: bad sku": 3}


def test_the_class_of_each_kind_of_error() -> None:
    assert errors.error_class(CallError("HTTP 401", 401)) == "credentials"
    assert errors.error_class(CallError("HTTP 404 batch", 404)) == "request"
    assert errors.error_class(CallError("bad length")) == "transient"
    assert errors.error_class(answer_error("the model refused: no")) == "answer"
    assert errors.error_class(UnsendableRequest("null placeholder")) == "request"
    assert errors.error_class(ConnectionRefusedError()) == "unreachable"
    assert errors.error_class(ValueError("a user function failed")) == "transient"
    assert not errors.retried(CallError("HTTP 403", 403)) and errors.retried(CallError("HTTP 429", 429))


def test_a_certificate_the_connection_fails_is_the_requests_error_not_an_unreachable_service():
    """An untrusted CA is the pipeline's configuration (its CA file, `verify`), not an outage: the
    same request fails the same way, so it is not retried and never stops the run as a service
    that never answered (tests/e2e/test_https.py runs it against a real TLS service)."""
    import ssl

    from aiohttp import ClientConnectorCertificateError, ClientConnectorError
    from aiohttp.client_reqrep import ConnectionKey

    key = ConnectionKey("127.0.0.1", 443, True, True, None, None, None, None)
    refused_tls = ClientConnectorCertificateError(key, ssl.SSLCertVerificationError("certificate verify failed"))
    assert errors.error_class(refused_tls) == errors.REQUEST and not errors.retried(refused_tls)
    assert errors.error_class(ClientConnectorError(key, ConnectionRefusedError(111, "refused"))) == errors.UNREACHABLE
