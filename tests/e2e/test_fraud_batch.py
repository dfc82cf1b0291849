"""The fraud example end to end in BATCH mode, against a real local customer service; the
expected output is computed independently from the input files in plain Python."""
from __future__ import annotations

import csv
import datetime as dt
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from jobs import run_flow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fraud"
pytestmark = pytest.mark.spark


def _load_service():
    spec = importlib.util.spec_from_file_location("fraud_service", EXAMPLE / "service.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _expected(folder: Path, service) -> tuple[set, dict]:
    rules: dict[str, dict] = {}
    for path in sorted((folder / "data" / "rules").glob("*.csv")):
        for row in csv.DictReader(path.open()):
            if row["op"].lower() == "delete":
                rules.pop(row["rule_id"], None)
            else:
                rules[row["rule_id"]] = row
    flagged, per_customer = set(), {}
    for path in sorted((folder / "data" / "orders").glob("*.json")):
        for line in path.read_text().splitlines():
            order = json.loads(line)
            if order["amount"] <= 0:
                continue
            profile = service.customer(order["customer_id"]) or {"tier": None}
            for rule in rules.values():
                if rule["country"] == order["country"] and order["amount"] > float(rule["max_amount"]):
                    flagged.add((order["order_id"], rule["rule_id"], profile["tier"]))
                    minute = dt.datetime.fromisoformat(order["ts"]).replace(second=0)
                    key = (order["customer_id"], minute)
                    per_customer[key] = per_customer.get(key, 0) + 1
    return flagged, per_customer


def test_fraud_example_matches_independent_computation(spark, serve_app, tmp_path):
    service = _load_service()
    server = serve_app(service.app())
    folder = tmp_path / "fraud"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("target"))
    flow = folder / "pipeline.flow"
    flow.write_text(flow.read_text().replace("127.0.0.1:8765", f"127.0.0.1:{server.port}"))

    run_flow(flow)

    expected_flagged, expected_counts = _expected(folder, service)
    rows = spark.read.parquet(str(folder / "target/out/flagged")).collect()
    got = {(r.order_id, r.rule_id, r.tier) for r in rows}
    assert len(rows) == len(expected_flagged)
    assert got == expected_flagged
    assert "r4" not in {r.rule_id for r in rows}           # deleted by the second rules file
    assert {r.r_country for r in rows} <= {"DE", "FR", "US", "BR"}   # state column renamed on conflict
    counts = spark.read.json(str(folder / "target/out/per_customer")).collect()
    got_counts = {(r.customer_id, dt.datetime.fromisoformat(r.w.start.replace("Z", "+00:00")).replace(tzinfo=None)): r.n
                  for r in counts}
    assert got_counts == expected_counts
