"""examples/orders_db end to end on real Spark against the PostgreSQL its service.py starts: the
orders read in 4 ranges, customers looked up 200 at a time, the limits read as broadcast state, the
flagged orders upserted (a second run writes nothing twice), the totals per tier a table of Spark's
catalog under the example's folder."""
from __future__ import annotations

import importlib.util

import pytest
from jobs import EXAMPLES, copy_example, run_flow

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _service():
    spec = importlib.util.spec_from_file_location("orders_db_service", EXAMPLES / "orders_db" / "service.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_orders_db_example(spark, tmp_path, monkeypatch):
    service = _service()
    db = service.start()
    try:
        monkeypatch.setenv("SHOP_PORT", str(db.port))
        monkeypatch.setenv("SHOP_PASSWORD", db.password)
        flow = copy_example("orders_db", tmp_path / "orders_db")
        db.mark()
        run_flow(flow)
        customers = {c: (tier, risk) for c, tier, risk in service.customers()}
        limits = {country: (rule, limit) for rule, country, limit in service.LIMITS}
        expected = sorted((n, c, limits[country][0]) for n, c, amount, country in service.orders()
                          if country in limits and (amount > limits[country][1] or customers.get(c, (None, 0))[1] > 0.9))
        got = db.query("SELECT order_no, customer_id, rule_id, tier FROM flagged_orders ORDER BY order_no")
        assert [(r["order_no"], r["customer_id"], r["rule_id"]) for r in got] == expected
        assert all(r["tier"] == customers.get(r["customer_id"], (None,))[0] for r in got)
        lookups = [s for s in db.statements() if "FROM customers" in s]
        assert lookups and all("ANY($1::text[])" in s for s in lookups)
        assert len(lookups) <= 4 * 2           # 200 distinct customers, BATCH 200, per task: a few queries
        totals = {r["tier"]: r["orders"] for r in spark.read.parquet(
            str(flow.parent / "spark-warehouse/shop.db/tier_totals")).collect()}
        assert sum(totals.values()) == 2000 and totals["unknown"] == sum(1 for o in service.orders() if o[1] == "c013")
        run_flow(flow)                                       # again: upserted, nothing twice
        assert db.query("SELECT count(*)::int AS n FROM flagged_orders")[0]["n"] == len(expected)
    finally:
        db.stop()
