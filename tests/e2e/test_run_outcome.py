"""The outcome of a run (#41, item 6): rows read per source, rows written per sink, dead letters
per path with their top errors and counts, answers by origin, duration and exit code; printed as
the run's last lines, kept in the metrics JSON (and the report's header), written as JSON for a
scheduler ($DSLC_SUMMARY_JSON, what `dslc run --summary-json FILE` sets); in BATCH and STREAMING."""
from __future__ import annotations

import json

import pytest
from aiohttp import web
from jobs import run_flow

from dslc.runtime.spark.outcome import SUMMARY_ENV

pytestmark = pytest.mark.spark

MODES = {"BATCH": "MODE BATCH", "STREAMING": "MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"}
FLOW = """PIPELINE shop {pipeline};
SOURCE products FROM JSON 'in/' SCHEMA (sku STRING, category STRING, qty INT);
STREAM priced = ENRICH products WITH HTTP GET 'http://127.0.0.1:{port}/price/{{sku}}' RETURNS (price INT)
  ASYNC UNORDERED CAPACITY 4 TIMEOUT 5s STORE
  ON ERROR DEAD LETTER 'target/dlq/priced';
STREAM cheap = SELECT sku, price FROM priced WHERE price < 5;
SINK priced TO JSON 'target/out/priced';
SINK cheap TO PARQUET 'target/out/cheap';
"""


@pytest.mark.parametrize("mode", list(MODES))
def test_the_outcome_of_a_run(tmp_path, serve_app, spark, monkeypatch, capfd, mode):
    calls: list[str] = []

    async def price(request):
        sku = request.match_info["sku"]
        calls.append(sku)
        n = int(sku[1:])
        if n in (1, 2):
            return web.json_response({"price": n + 0.5})          # does not fit INT: a dead letter
        if n == 3:
            return web.Response(status=422, text="unknown sku")    # a request error: a dead letter
        return web.json_response({"price": n})

    app = web.Application()
    app.router.add_get("/price/{sku}", price)
    server = serve_app(app)
    (tmp_path / "in").mkdir()
    (tmp_path / "in/1.json").write_text("".join(json.dumps({"sku": f"p{i}", "category": "ab"[i % 2], "qty": i}) + "\n"
                                                for i in range(10)))
    flow = tmp_path / "pipeline.flow"
    flow.write_text(FLOW.format(pipeline=MODES[mode], port=server.port))
    summary = tmp_path / "summary.json"
    monkeypatch.setenv(SUMMARY_ENV, str(summary))
    monkeypatch.setenv("DSLC_METRICS_FILE", str(tmp_path / "metrics.json"))
    capfd.readouterr()
    run_flow(flow)
    err = capfd.readouterr().err
    outcome = json.loads(summary.read_text())
    assert outcome["exit_code"] == 0 and outcome["ended"] == "done" and outcome["duration_s"] > 0
    assert outcome["sources"] == {"products": {"rows": 10}}
    assert [(s["stream"], s["line"], s["path"], s["rows"]) for s in outcome["sinks"]] == [
        ("priced", 7, "target/out/priced", 7), ("cheap", 8, "target/out/cheap", 2)]
    [letters] = outcome["dead_letters"]
    assert (letters["path"], letters["operators"], letters["rows"]) == ("target/dlq/priced", ["priced"], 3)
    assert letters["top_errors"] == [
        {"error": "answer: CallError: answer field 'price' is declared INT but got float 1.5", "count": 1},
        {"error": "answer: CallError: answer field 'price' is declared INT but got float 2.5", "count": 1},
        {"error": f"request: CallError: HTTP 422 from http://127.0.0.1:{server.port}/price/{{sku}}: unknown sku",
         "count": 1}]
    assert {k: outcome["answers"][k] for k in ("calls", "cache", "store", "replay")} == \
        {"calls": 10, "cache": 0, "store": 0, "replay": 0}
    # printed as the run's last lines, and kept in the metrics JSON for the report
    lines = err.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("dslc: shop ended with exit code 0 (done) after "))
    tail = lines[start:]
    assert "  read       products: 10 rows" in tail and "  wrote      cheap (line 8) to target/out/cheap: 2 rows" in tail
    assert "  dead       target/dlq/priced: 3 rows from priced" in tail
    assert tail[-1] == "  answers    10 from calls, 0 from the cache, 0 from the store, 0 replayed"
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["outcome"] == outcome
    from dslc.compiler.report.page import render
    page = render(metrics)
    assert "Outcome: exit code 0 (done)" in page and "target/dlq/priced" in page

    # a second run of the same rows: the answers come from the store; the dead-lettered rows are called again
    calls.clear()
    if mode == "STREAMING":
        (tmp_path / "in/2.json").write_text((tmp_path / "in/1.json").read_text())
    run_flow(flow)
    again = json.loads(summary.read_text())
    assert sorted(calls) == ["p1", "p2", "p3"]
    assert (again["answers"]["calls"], again["answers"]["store"]) == (3, 7)
