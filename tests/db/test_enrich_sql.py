"""ENRICH ... WITH SQL on real Spark against a real PostgreSQL: what the database executed is
counted from its statement log (BATCH sends one `= ANY($1)` query per batch, never one per row,
and no key is ever pasted into a statement), and BATCH and STREAMING give the same rows."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

# keys with a quote and a semicolon: bound as parameters, they are looked up like any other
ODD = "o'brien; DROP TABLE sql_customers; --"
KEYS = [f"c{i:03d}" for i in range(699)] + [ODD]

FLOW = """
PIPELINE lookups {pipeline};
DATABASE crm AT '{url}';
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, customer_id STRING, amount DOUBLE);
STREAM enriched = ENRICH orders
  WITH SQL crm 'SELECT tier, risk FROM sql_customers WHERE customer_id = {{customer_id}}'
  RETURNS (tier STRING, risk DOUBLE)
  ASYNC UNORDERED CAPACITY 200 TIMEOUT 10s {batch};
SINK enriched TO JSON 'out';
"""


@pytest.fixture(scope="module")
def customers(postgres):
    postgres.execute("DROP TABLE IF EXISTS sql_customers")
    postgres.execute("CREATE TABLE sql_customers (customer_id TEXT PRIMARY KEY, tier TEXT, risk DOUBLE PRECISION)")
    # every key but the last ten has a customer; c005 has two rows (two output rows)
    rows = [(k, "gold" if i % 2 else "silver", i / 10) for i, k in enumerate(KEYS) if not 689 <= i < 699]
    postgres.copy_rows("sql_customers", ["customer_id", "tier", "risk"], rows)
    postgres.execute("CREATE TABLE IF NOT EXISTS sql_accounts (customer_id TEXT, tier TEXT, risk DOUBLE PRECISION)")
    return {k: (t, r) for k, t, r in rows}


def _write_orders(folder: Path, keys: list[str]) -> None:
    (folder / "in").mkdir()
    half = len(keys) // 2
    for part, chunk in enumerate((keys[:half], keys[half:])):
        lines = [json.dumps({"order_id": f"o{part}-{i}", "customer_id": k, "amount": 1.0}) for i, k in enumerate(chunk)]
        (folder / "in" / f"part{part}.json").write_text("\n".join(lines) + "\n")


def _run(spark, crm, run_flow, tmp_path: Path, pipeline: str, batch: str) -> list:
    _write_orders(tmp_path, KEYS)
    flow = tmp_path / "pipeline.flow"
    flow.write_text(FLOW.format(pipeline=pipeline, url=crm.flow_url, batch=batch))
    crm.mark()
    run_flow(flow)
    return spark.read.json(str(tmp_path / "out")).collect()


MODES = ["MODE BATCH", "MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"]


@pytest.mark.parametrize("pipeline", MODES)
def test_batch_sends_one_query_per_batch_of_distinct_keys(spark, crm, customers, run_flow, tmp_path, pipeline):
    rows = _run(spark, crm, run_flow, tmp_path, pipeline, "BATCH 100")
    got = {r.customer_id: (r.tier, r.risk) for r in rows}
    assert len(rows) == len(KEYS)                       # a miss is a row with NULLs (ON MISS NULL)
    assert got == {k: customers.get(k, (None, None)) for k in KEYS}
    assert got[ODD] == customers[ODD]
    executed = [s for s in crm.statements() if "sql_customers" in s]
    batches = [s for s in executed if "= ANY($1::text[])" in s]
    assert executed == batches                          # never one query per row
    # 700 keys, BATCH 100: 7 queries per task at least full, a partial one per task at most
    assert 7 <= len(batches) <= 7 + 4
    logged = "\n".join(crm.statements())
    assert not any(k in logged for k in KEYS)           # no key is ever part of a statement's text
    assert "o'brien" not in crm.log_text()


def test_without_batch_one_query_per_row_and_several_rows_several_outputs(spark, crm, customers, run_flow,
                                                                          tmp_path):
    crm.execute("TRUNCATE sql_accounts")
    crm.execute("INSERT INTO sql_accounts VALUES ('c001', 'a', 1), ('c001', 'b', 2), ('c002', 'c', 3)")
    _write_orders(tmp_path, ["c001", "c002", "c003", ODD])
    flow = tmp_path / "pipeline.flow"
    flow.write_text(FLOW.format(pipeline="MODE BATCH", url=crm.flow_url, batch="")
                    .replace("sql_customers", "sql_accounts"))
    crm.mark()
    run_flow(flow)
    rows = spark.read.json(str(tmp_path / "out")).collect()
    assert sorted((r.customer_id, r.tier, r.risk) for r in rows) == sorted(
        [("c001", "a", 1.0), ("c001", "b", 2.0), ("c002", "c", 3.0), ("c003", None, None), (ODD, None, None)])
    executed = [s for s in crm.statements() if "sql_accounts" in s]
    assert len(executed) == 4 and all("($1::text)" in s for s in executed)
    # one statement per lookup: no reset query after each (asyncpg's pool default doubles the round trips)
    assert not [s for s in crm.statements() if "RESET ALL" in s or "UNLISTEN" in s]
