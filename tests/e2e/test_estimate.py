"""`dslc explain FILE --estimate` calls nothing, and its calls are within 10% of what the run then
makes: on the fraud example (the service counts the requests) and on a workload with a filter
before the ENRICH and skewed keys; after the run, the store holds them and the estimate says so."""
from __future__ import annotations

import importlib.util
import json
import random
import shutil
from collections import Counter
from pathlib import Path

import pytest
from aiohttp import web

from jobs import run_flow

pytestmark = pytest.mark.spark
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _estimate(flow: Path, **kw):
    from dslc.compiler.cli.estimate_command import estimates
    return {e.operator: e for e in estimates(str(flow), **kw)}


def _counting(app: web.Application, calls: Counter) -> web.Application:
    @web.middleware
    async def count(request, handler):
        calls[request.path] += 1
        return await handler(request)

    app.middlewares.append(count)
    return app


def test_fraud_example_estimate_then_run(spark, serve_app, tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("fraud_service", EXAMPLES / "fraud/service.py")
    service = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(service)
    calls: Counter = Counter()
    server = serve_app(_counting(service.app(), calls))
    folder = tmp_path / "fraud"
    shutil.copytree(EXAMPLES / "fraud", folder, ignore=shutil.ignore_patterns("target"))
    flow = folder / "pipeline.flow"
    flow.write_text(flow.read_text().replace("127.0.0.1:8765", f"127.0.0.1:{server.port}"))

    before = _estimate(flow, latency="40ms")["enriched"]
    assert not calls, "the estimate called the service"
    assert before.stored_keys == 0 and before.rows >= before.distinct_keys > 0
    run_flow(flow)
    made = sum(calls.values())
    assert abs(before.calls - made) <= 0.1 * made, (before, made)
    after = _estimate(flow)["enriched"]
    assert after.stored_keys == before.distinct_keys and after.calls == 0
    assert sum(calls.values()) == made


FLOW = """PIPELINE skewed MODE BATCH;
SOURCE events FROM JSON 'in/' SCHEMA (id STRING, user STRING, amount DOUBLE);
STREAM big = SELECT * FROM events WHERE amount > 50;
STREAM scored = ENRICH big WITH HTTP GET 'http://127.0.0.1:{port}/u/{{user}}' RETURNS (score DOUBLE)
  ASYNC UNORDERED CAPACITY 16 TIMEOUT 5s STORE RATE 2000 PER SECOND BUDGET {budget} CALLS;
SINK scored TO JSON 'out/scored';
"""


def test_a_filtered_skewed_workload_and_the_budget_verdict(spark, serve_app, tmp_path):
    calls: Counter = Counter()

    async def user(request):
        return web.json_response({"score": 1.0})

    app = web.Application()
    app.router.add_get("/u/{id}", user)
    server = serve_app(_counting(app, calls))
    rng = random.Random(3)
    users = [f"u{min(int(rng.paretovariate(1.1)), 400)}" for _ in range(3000)]   # Zipf-like keys
    (tmp_path / "in").mkdir()
    (tmp_path / "in/1.json").write_text("".join(
        json.dumps({"id": f"e{i}", "user": u, "amount": float(rng.randint(0, 100))}) + "\n" for i, u in enumerate(users)))
    flow = tmp_path / "pipeline.flow"
    flow.write_text(FLOW.format(port=server.port, budget=10))
    short = _estimate(flow, sample=50, latency="10ms")["scored"]
    assert short.budget_enough is False and short.seconds >= short.calls / 2000
    flow.write_text(FLOW.format(port=server.port, budget=100000))
    est = _estimate(flow, sample=50)["scored"]
    assert est.budget_enough is True and not calls
    run_flow(flow)
    made = sum(calls.values())
    assert abs(est.calls - made) <= 0.1 * made
    assert est.rows == sum(1 for line in (tmp_path / "in/1.json").read_text().splitlines()
                           if json.loads(line)["amount"] > 50)
    after = _estimate(flow, sample=50)["scored"]               # a sample of the keys is looked up
    assert after.sampled and after.calls <= 0.1 * made
