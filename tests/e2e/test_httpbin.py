"""A service nobody here wrote: httpbin (PyPI), its WSGI app served on 127.0.0.1 by werkzeug in a
thread, enriched through `/bearer` (a bearer token from a `${NAME}` secret) and `/anything/{id}`
(HEADERS with a secret, a POST BODY, the answer reshaped by ANSWER and read with PATH)."""
from __future__ import annotations

import json
import threading

import pytest
from jobs import run_flow

pytestmark = pytest.mark.spark

FLOW = """
PIPELINE httpbin {pipeline};
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE);
STREAM checked = ENRICH orders
  WITH HTTP GET 'http://127.0.0.1:{port}/bearer'
    HEADERS ('Authorization' = 'Bearer ${{HTTPBIN_TOKEN}}')
  RETURNS (authenticated BOOLEAN)
  ASYNC UNORDERED CAPACITY 4 TIMEOUT 10s;
STREAM echoed = ENRICH checked
  WITH HTTP POST 'http://127.0.0.1:{port}/anything/{{order_id}}' BODY (customer_id, amount)
    HEADERS ('X-Api-Key' = '${{HTTPBIN_KEY}}', 'X-Order' = 'dslc')
    ANSWER '{{sent: json, key: headers."X-Api-Key", via: headers."X-Order", method: method, url: url}}'
  RETURNS (sent_customer STRING PATH 'sent.customer_id', sent_amount DOUBLE PATH 'sent.amount',
           key STRING, via STRING, method STRING, url STRING)
  ASYNC UNORDERED CAPACITY 4 TIMEOUT 10s
  ON ERROR DEAD LETTER 'dlq';
SINK echoed TO JSON 'out';
"""
ORDERS = [{"order_id": f"o{i}", "customer_id": f"c{i % 3}", "amount": float(i)} for i in range(10)]


@pytest.fixture
def httpbin_server():
    """httpbin's Flask app under werkzeug's threaded server on a free port; counts requests."""
    from httpbin import app
    from werkzeug.serving import make_server

    calls: list[str] = []

    def counted(environ, start_response):
        calls.append(environ["PATH_INFO"])
        return app(environ, start_response)

    server = make_server("127.0.0.1", 0, counted, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.calls = calls
    try:
        yield server
    finally:
        server.shutdown()


@pytest.mark.parametrize("pipeline", ["MODE BATCH", "MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"])
def test_httpbin_bearer_and_anything(spark, tmp_path, monkeypatch, httpbin_server, pipeline):
    (tmp_path / "in").mkdir()
    (tmp_path / "in/o.json").write_text("".join(json.dumps(o) + "\n" for o in ORDERS))
    flow = tmp_path / "pipeline.flow"
    flow.write_text(FLOW.format(pipeline=pipeline, port=httpbin_server.server_port))
    monkeypatch.setenv("HTTPBIN_TOKEN", "bin-token-1")
    monkeypatch.setenv("HTTPBIN_KEY", "bin-key-2")
    run_flow(flow)

    rows = {r.order_id: r for r in spark.read.json(str(tmp_path / "out")).collect()}
    assert sorted(rows) == sorted(o["order_id"] for o in ORDERS)
    for order in ORDERS:
        row = rows[order["order_id"]]
        assert row.authenticated is True
        assert (row.sent_customer, row.sent_amount) == (order["customer_id"], order["amount"])
        assert (row.key, row.via, row.method) == ("bin-key-2", "dslc", "POST")
        assert row.url.endswith(f"/anything/{order['order_id']}")
    assert not list((tmp_path / "dlq").glob("part-*")) or \
        all(not p.read_text().strip() for p in (tmp_path / "dlq").glob("part-*"))
    assert sorted(httpbin_server.calls) == sorted(["/bearer"] * 10 + [f"/anything/{o['order_id']}" for o in ORDERS])


def test_httpbin_refuses_a_missing_bearer_token(spark, tmp_path, monkeypatch, httpbin_server):
    """The same pipeline without the Authorization header's secret set: the job stops before Spark
    runs anything (the job's own check), naming the secret."""
    from dslc.compiler.pipeline import compile_file

    (tmp_path / "in").mkdir()
    (tmp_path / "in/o.json").write_text(json.dumps(ORDERS[0]) + "\n")
    flow = tmp_path / "pipeline.flow"
    flow.write_text(FLOW.format(pipeline="MODE BATCH", port=httpbin_server.server_port))
    monkeypatch.delenv("HTTPBIN_TOKEN", raising=False)
    monkeypatch.setenv("HTTPBIN_KEY", "bin-key-2")
    job = tmp_path / "job.py"
    job.write_text(compile_file(flow, job_folder=str(tmp_path)))
    import runpy
    with pytest.raises(SystemExit) as stopped:
        runpy.run_path(str(job), run_name="__main__")
    assert stopped.value.code == 2 and not httpbin_server.calls
