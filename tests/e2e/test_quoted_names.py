"""Every name `dslc check` accepts runs on Spark: a dash, a space, a keyword and non-ASCII letters
in source, stream, state and column names, through the pushed-down filter before an ENRICH, the
pruned chain, a MATCH and a partitioned sink, in BATCH and STREAMING mode with the same rows."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from aiohttp import web
from jobs import run_flow

from dslc.compiler.pipeline import check_file

pytestmark = pytest.mark.spark

HEAD = {
    "BATCH": "PIPELINE `quoted names` MODE BATCH;",
    "STREAMING": "PIPELINE `quoted names` MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW;",
}

FLOW = """
SOURCE `raw-orders` FROM JSON 'in/orders/'
  SCHEMA (`order id` STRING, customer STRING, `montant€` DOUBLE, `select` STRING, `event time` TIMESTAMP)
  WATERMARK `event time` DELAY 1m;
SOURCE `limit updates` FROM JSON 'in/limits/' SCHEMA (customer STRING, op STRING, `max-amount` DOUBLE);
BROADCAST `größen grenzen` FROM `limit updates` KEY customer OP op;
STREAM `enriched-orders` = ENRICH `raw-orders` WITH HTTP GET 'http://127.0.0.1:PORT/tier/{customer}'
  RETURNS (`tier level` STRING) ASYNC ORDERED CAPACITY 8 TIMEOUT 5s;
STREAM `paid orders` = SELECT `order id`, customer, `montant€`, `tier level` FROM `enriched-orders`
  WHERE `montant€` > 10 AND `select` = 'yes';
STREAM `order` = MATCH `paid orders` AGAINST `größen grenzen` AS `l`
  WHERE `paid orders`.customer = `l`.customer AND `paid orders`.`montant€` > `l`.`max-amount`;
SINK `order` TO PARQUET 'out/over' MODE MODE_WORD PARTITION BY (`tier level`);
"""

ORDERS = [  # (order id, customer, amount, select)
    ("o1", "a", 20.0, "yes"), ("o2", "a", 5.0, "yes"), ("o3", "b", 60.0, "no"),
    ("o4", "b", 60.0, "yes"), ("o5", "b", 40.0, "yes"), ("o6", "c", 99.0, "yes"),
]
LIMITS = {"a": 10.0, "b": 50.0}


def _write_inputs(folder: Path) -> None:
    (folder / "in/orders").mkdir(parents=True)
    (folder / "in/limits").mkdir(parents=True)
    (folder / "in/orders/1.json").write_text("".join(
        json.dumps({"order id": o, "customer": c, "montant€": a, "select": s, "event time": "2024-01-01T00:00:00Z"},
                   ensure_ascii=False) + "\n" for o, c, a, s in ORDERS))
    (folder / "in/limits/1.json").write_text("".join(
        json.dumps({"customer": c, "op": "set", "max-amount": m}) + "\n" for c, m in LIMITS.items()))


@pytest.mark.parametrize("mode", ["BATCH", "STREAMING"])
def test_quoted_names_run_through_every_rewrite(spark, serve_app, tmp_path, mode):
    calls: list[str] = []

    async def tier(request):
        calls.append(request.match_info["customer"])
        return web.json_response({"tier level": "gold" if request.match_info["customer"] == "a" else "silver"})

    app = web.Application()
    app.router.add_get("/tier/{customer}", tier)
    server = serve_app(app)
    flow = tmp_path / "pipeline.flow"
    flow.write_text(HEAD[mode] + FLOW.replace("PORT", str(server.port))
                    .replace("MODE_WORD", "OVERWRITE" if mode == "BATCH" else "APPEND"))
    _write_inputs(tmp_path)

    accepted = check_file(flow)     # `dslc check` accepts every name; it must also run
    assert accepted.node("order").name == "order"
    run_flow(flow)

    rows = spark.read.parquet(str(tmp_path / "out/over")).collect()
    got = {(r["order id"], r["customer"], r["montant€"], r["tier level"], r["max-amount"]) for r in rows}
    tiers = {"a": "gold", "b": "silver"}
    expected = {(o, c, a, tiers[c], LIMITS[c]) for o, c, a, s in ORDERS
                if a > 10 and s == "yes" and c in LIMITS and a > LIMITS[c]}
    assert got == expected
    # the filter ran before the calls: only rows with an amount over 10 and `select` = 'yes' were looked up
    assert sorted(calls) == sorted(c for _, c, a, s in ORDERS if a > 10 and s == "yes")
    job = flow.with_name("job.py").read_text()
    assert "createOrReplaceTempView('`raw-orders`')" in job
