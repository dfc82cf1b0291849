"""BATCH on Spark, BATCH and STREAMING (AVAILABLE NOW): HTTP POST of JSON arrays and a Python
batch function give the same rows as one call per row would, in fewer calls."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from aiohttp import web
from jobs import run_flow

pytestmark = pytest.mark.spark

FLOW = """
PIPELINE batched {pipeline};
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer STRING, amount DOUBLE);
STREAM scored = ENRICH orders
  WITH HTTP POST 'http://127.0.0.1:{port}/v1/score' BODY (order_id, amount)
  RETURNS (score DOUBLE, label STRING)
  ASYNC UNORDERED CAPACITY 64 BATCH 16 WITHIN 20ms TIMEOUT 10s RETRY 2 BACKOFF 10ms;
STREAM tagged = ENRICH scored WITH PYTHON 'tags:tag' RETURNS (tag STRING)
  ASYNC ORDERED BY (customer) CAPACITY 32 BATCH 8;
SINK tagged TO JSON 'out';
"""

TAGS = """
async def tag(rows):
    return [None if row["amount"] == 13 else {"tag": row["label"] + "-" + row["customer"]} for row in rows]
"""

ROWS = [{"order_id": f"o{i}", "customer": f"c{i % 4}", "amount": float(i)} for i in range(50)]


def _serve(serve_app, batches: list[int]):
    async def score(request: web.Request) -> web.Response:
        items = await request.json()
        batches.append(len(items))
        assert all(set(item) == {"order_id", "amount"} for item in items)
        return web.json_response([{"score": item["amount"] * 2, "label": "big" if item["amount"] > 25 else "small"}
                                  for item in items])

    app = web.Application()
    app.router.add_post("/v1/score", score)
    return serve_app(app)


@pytest.mark.parametrize("pipeline", ["MODE BATCH", "MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"])
def test_batched_http_and_python_enrich(spark, serve_app, tmp_path: Path, pipeline: str) -> None:
    batches: list[int] = []
    server = _serve(serve_app, batches)
    (tmp_path / "in").mkdir()
    (tmp_path / "in/o.json").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (tmp_path / "tags.py").write_text(TAGS)
    flow = tmp_path / "pipeline.flow"
    flow.write_text(FLOW.format(pipeline=pipeline, port=server.port))
    run_flow(flow)
    out = {r.order_id: (r.score, r.label, r.tag) for r in spark.read.json(str(tmp_path / "out")).collect()}
    expected = {}
    for r in ROWS:
        label = "big" if r["amount"] > 25 else "small"
        expected[r["order_id"]] = (r["amount"] * 2, label, None if r["amount"] == 13 else f"{label}-{r['customer']}")
    assert out == expected
    assert sum(batches) == len(ROWS)                  # every row sent once, no retries needed
    assert len(batches) < len(ROWS) and max(batches) <= 16
