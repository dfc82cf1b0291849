"""One call per input row per run, whatever the plan's shape: an ENRICH read by several sinks
through other statements, by a self-union inside one query, and split into dead letters and rows.
In BATCH and in STREAMING (TRIGGER AVAILABLE NOW); the real aiohttp
test server counts the calls per key."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from aiohttp import web
from jobs import run_flow

pytestmark = pytest.mark.spark

HEAD = """PIPELINE shared MODE {mode};
SOURCE orders FROM JSON 'orders/' SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE, country STRING);
SOURCE rule_updates FROM JSON 'rules/' SCHEMA (rule_id STRING, op STRING, country STRING, max_amount DOUBLE);
BROADCAST rules FROM rule_updates KEY rule_id OP op;
STREAM enriched = ENRICH orders WITH HTTP GET 'http://127.0.0.1:{port}/c/{{order_id}}' RETURNS (tier STRING)
  ASYNC UNORDERED CAPACITY 4 TIMEOUT 5s {dead};
"""

SHAPES = {
    # the shape: two consumers of a SELECT over the ENRICH
    "select_then_two_sinks": """
STREAM paid = SELECT * FROM enriched WHERE amount > 0;
STREAM flagged = MATCH paid AGAINST rules AS r WHERE paid.country = r.country AND paid.amount > r.max_amount;
SINK paid TO PARQUET 'out/paid' {overwrite};
SINK flagged TO PARQUET 'out/flagged' {overwrite};
""",
    # one sink, but the query names the ENRICH twice
    "self_union": """
STREAM both = SELECT order_id, tier FROM enriched WHERE amount > 100
              UNION ALL SELECT order_id, tier FROM enriched WHERE amount <= 100;
SINK both TO PARQUET 'out/paid' {overwrite};
""",
    # dead letters beside the rows, the rows read by two sinks
    "dead_letters_and_two_sinks": """
STREAM paid = SELECT * FROM enriched WHERE amount > 0;
SINK paid TO PARQUET 'out/paid' {overwrite};
SINK enriched TO JSON 'out/all' {overwrite};
""",
}


def _service(serve_app, calls: Counter):
    async def customer(request):
        key = request.match_info["id"]
        calls[key] += 1
        if key.endswith("7"):
            return web.Response(status=500, text="boom")
        return web.json_response({"tier": "gold" if int(key[1:]) % 2 else "silver"})

    app = web.Application()
    app.router.add_get("/c/{id}", customer)
    return serve_app(app)


def _orders(n: int) -> list[dict]:
    return [{"order_id": f"o{i}", "customer_id": f"c{i % 5}", "amount": float(i * 10 + 5),
             "country": "DE" if i % 2 else "FR"} for i in range(n)]


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize("mode", ["BATCH", "STREAMING"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_row_calls_the_service_once(spark, serve_app, tmp_path, shape, mode):
    calls: Counter = Counter()
    server = _service(serve_app, calls)
    dead = "ON ERROR DEAD LETTER 'out/dlq'" if shape == "dead_letters_and_two_sinks" else "ON ERROR NULL"
    flow = tmp_path / "pipeline.flow"
    pipeline = "BATCH" if mode == "BATCH" else "STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"
    flow.write_text(HEAD.format(mode=pipeline, port=server.port, dead=dead)
                    + SHAPES[shape].format(overwrite="MODE OVERWRITE" if mode == "BATCH" else ""))
    orders = _orders(40)
    _write(tmp_path / "orders/1.json", orders[:25])
    _write(tmp_path / "orders/2.json", orders[25:])
    _write(tmp_path / "rules/1.json", [{"rule_id": "r1", "op": "set", "country": "DE", "max_amount": 100.0}])

    run_flow(flow)

    assert calls == Counter({o["order_id"]: 1 for o in orders}), "a row called the service more or less than once"
    job = flow.with_name("job.py").read_text()
    assert ("chains.keep(" if mode == "BATCH" else "streaming.write_stage(") in job
    paid = {r.order_id: r.tier for r in spark.read.parquet(str(tmp_path / "out/paid")).collect()}
    good = [o for o in orders if not o["order_id"].endswith("7") or shape != "dead_letters_and_two_sinks"]
    assert set(paid) == {o["order_id"] for o in good}
    if shape == "dead_letters_and_two_sinks":
        letters = [json.loads(r.value) for r in spark.read.text(str(tmp_path / "out/dlq")).collect()]
        assert sorted(l["row"]["order_id"] for l in letters) == sorted(o["order_id"] for o in orders
                                                                       if o["order_id"].endswith("7"))
