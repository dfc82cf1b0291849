"""Dead letters hold the whole input row and can be fed through the same ENRICH again (#41,
item 8): a run dead-letters the rows a service failed, the service is mended, and `dslc
replay-dead-letters FILE --operator NAME` answers exactly those rows, each called once more."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from aiohttp import web
from jobs import run_flow

pytestmark = pytest.mark.spark

FLOW = """PIPELINE shop MODE BATCH;
SOURCE products FROM JSON 'in/' SCHEMA (sku STRING, category STRING, qty INT);
STREAM priced = ENRICH products WITH HTTP GET 'http://127.0.0.1:{port}/price/{{sku}}' RETURNS (price DOUBLE)
  ASYNC UNORDERED CAPACITY 4 TIMEOUT 5s
  ON ERROR DEAD LETTER 'target/dlq/priced' UP TO 100%;
STREAM totals = SELECT category, sum(price * qty) AS total FROM priced GROUP BY category;
SINK totals TO PARQUET 'target/out/totals' MODE OVERWRITE;
"""


def test_dead_letters_are_answered_again_by_the_same_enrich(tmp_path, serve_app, spark):
    calls: list[str] = []
    broken = {"p1", "p4"}

    async def price(request):
        sku = request.match_info["sku"]
        calls.append(sku)
        if sku in broken:
            return web.Response(status=400, text="no price for it yet")
        return web.json_response({"price": float(sku[1:])})

    app = web.Application()
    app.router.add_get("/price/{sku}", price)
    server = serve_app(app)
    (tmp_path / "in").mkdir()
    rows = [{"sku": f"p{i}", "category": "ab"[i % 2], "qty": i} for i in range(6)]
    (tmp_path / "in/1.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    flow = tmp_path / "pipeline.flow"
    flow.write_text(FLOW.format(port=server.port))
    run_flow(flow)
    letters = [json.loads(line) for p in (tmp_path / "target/dlq/priced").glob("part-*") for line in p.read_text().splitlines()]
    # the whole input row, every column (the aggregate after the ENRICH reads only category, qty, price)
    assert sorted(letter["row"]["sku"] for letter in letters) == ["p1", "p4"]
    assert all(letter["row"] == next(r for r in rows if r["sku"] == letter["row"]["sku"]) for letter in letters)

    broken.clear()          # the service is mended
    calls.clear()
    env = {**os.environ}
    env.pop("DSLC_FLOW_FOLDER", None)
    done = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "replay-dead-letters", "pipeline.flow",
                           "--operator", "priced", "--master", "local[2]"], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(calls) == ["p1", "p4"]                 # each dead-lettered row called once more, no other
    replayed = {r.sku: (r.category, r.qty, r.price) for r in spark.read.parquet(str(tmp_path / "target/replayed/priced/rows")).collect()}
    assert replayed == {"p1": ("b", 1, 1.0), "p4": ("a", 4, 4.0)}
    assert "answered rows in target/replayed/priced/rows" in done.stdout
    assert not list(tmp_path.glob(".pipeline.replay-*.flow"))       # the generated pipeline is gone
