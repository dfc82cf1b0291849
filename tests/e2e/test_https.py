"""HTTPS for real: a TLS aiohttp server on 127.0.0.1 whose certificate is signed by a CA the test
makes (trustme). The system's CA store does not trust it (every row an error), OPTIONS (ca_file
= ...) does (the driver reads the file and ships it), and verify = 'false' skips the check."""
from __future__ import annotations

import json

import pytest
from aiohttp import web
from jobs import run_flow

pytestmark = pytest.mark.spark

FLOW = """
PIPELINE tls {pipeline};
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING);
STREAM enriched = ENRICH orders
  WITH HTTP GET 'https://127.0.0.1:{port}/customers/{{customer_id}}' {options}
  RETURNS (tier STRING)
  ASYNC UNORDERED CAPACITY 4 TIMEOUT 5s
  ON ERROR DEAD LETTER 'dlq';
SINK enriched TO JSON 'out';
"""
ORDERS = [{"order_id": f"o{i}", "customer_id": f"c{i % 3}"} for i in range(12)]


@pytest.fixture
def tls_service(serve_tls_app):
    calls = []

    async def customer(request: web.Request) -> web.Response:
        calls.append(request.match_info["customer_id"])
        return web.json_response({"tier": "gold"})

    app = web.Application()
    app.router.add_get("/customers/{customer_id}", customer)
    server = serve_tls_app(app)
    server.calls = calls
    return server


def _run(tmp_path, port, options, pipeline="MODE BATCH"):
    (tmp_path / "in").mkdir(exist_ok=True)
    (tmp_path / "in/o.json").write_text("".join(json.dumps(o) + "\n" for o in ORDERS))
    flow = tmp_path / "pipeline.flow"
    flow.write_text(FLOW.format(pipeline=pipeline, port=port, options=options))
    run_flow(flow)


def _letters(tmp_path):
    return [json.loads(line) for path in (tmp_path / "dlq").glob("part-*") for line in path.read_text().splitlines()]


@pytest.mark.parametrize("pipeline", ["MODE BATCH", "MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"])
def test_a_private_ca_given_by_ca_file_is_trusted(spark, tmp_path, tls_service, pipeline):
    _run(tmp_path, tls_service.port, "OPTIONS (ca_file = 'certs/test-ca.pem')", pipeline)
    rows = spark.read.json(str(tmp_path / "out")).collect()
    assert sorted(r.order_id for r in rows) == sorted(o["order_id"] for o in ORDERS)
    assert {r.tier for r in rows} == {"gold"} and _letters(tmp_path) == []
    assert len(tls_service.calls) == len(ORDERS)


def test_the_system_store_does_not_trust_a_private_ca(spark, tmp_path, tls_service):
    """Every element dead-lettered at once (a certificate is not retried, and is no outage), so
    the run ends over its dead-letter ceiling (exit code 5) after writing them."""
    with pytest.raises(SystemExit) as stopped:
        _run(tmp_path, tls_service.port, "")
    assert stopped.value.code == 5
    letters = _letters(tmp_path)
    assert len(letters) == len(ORDERS) and not tls_service.calls
    assert all("certificate verify failed" in letter["error"] for letter in letters), letters[0]["error"]


def test_verify_false_skips_the_check(spark, tmp_path, tls_service):
    _run(tmp_path, tls_service.port, "OPTIONS (verify = 'false')")
    assert len(spark.read.json(str(tmp_path / "out")).collect()) == len(ORDERS)
    assert len(tls_service.calls) == len(ORDERS) and _letters(tmp_path) == []
