"""The fraud example end to end, in BATCH and in STREAMING (TRIGGER AVAILABLE NOW), against a real
local customer service: each mode against an output computed independently from the input files
in plain Python, and the two modes against each other row for row."""
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


def _copy(tmp_path: Path, port: int, name: str) -> Path:
    folder = tmp_path / name
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("target"))
    flow = folder / "pipeline.flow"
    flow.write_text(flow.read_text().replace("127.0.0.1:8765", f"127.0.0.1:{port}"))
    return flow


def _outputs(spark, folder: Path) -> tuple[list, dict]:
    rows = spark.read.parquet(str(folder / "target/out/flagged")).collect()
    flagged = sorted(tuple(r) for r in rows)
    counts = spark.read.json(str(folder / "target/out/per_customer")).collect()
    per_customer = {(r.customer_id, dt.datetime.fromisoformat(r.w.start.replace("Z", "+00:00")).replace(tzinfo=None)): r.n
                    for r in counts}
    assert len(per_customer) == len(counts), "a window was written twice"
    return flagged, per_customer


def _passed_watermark(input_ts: list, counts: dict) -> dict:
    """The windows an append-mode streaming aggregation has written: those whose end the
    watermark has passed. The count reads the MATCH's stage folder, where the WATERMARK is declared
    again; the stage carries the latest event time of every row the SOURCE read (its TICK rows,
    taken before the `amount > 0` filter), so the watermark is the latest ts of all orders - 30s
    DELAY."""
    watermark = max(input_ts) - dt.timedelta(seconds=30)
    return {k: n for k, n in counts.items() if k[1] + dt.timedelta(minutes=1) <= watermark}


def _source_ts(folder: Path) -> list:
    """The ts of every order the SOURCE reads, paid or not."""
    orders = [json.loads(line) for path in sorted((folder / "data" / "orders").glob("*.json"))
              for line in path.read_text().splitlines() if line.strip()]
    return [dt.datetime.fromisoformat(o["ts"]).replace(tzinfo=None) for o in orders]


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_fraud_example_matches_independent_computation(spark, serve_app, tmp_path, mode):
    service = _load_service()
    server = serve_app(service.app())
    flow = _copy(tmp_path, server.port, "fraud")
    folder = flow.parent

    run_flow(flow, mode=mode, trigger="available-now" if mode == "streaming" else None)

    expected_flagged, expected_counts = _expected(folder, service)
    if mode == "streaming":
        expected_counts = _passed_watermark(_source_ts(folder), expected_counts)
        assert expected_counts, "the example data should close some windows"
        assert not list((folder / "target/out/flagged").glob("batch_id=*")), "the user's layout, no batch_id"
        assert (folder / "target/out/flagged/_spark_metadata").is_dir()
    rows = spark.read.parquet(str(folder / "target/out/flagged")).collect()
    assert "batch_id" not in rows[0].asDict()
    got = {(r.order_id, r.rule_id, r.tier) for r in rows}
    assert len(rows) == len(expected_flagged)
    assert got == expected_flagged
    assert "r4" not in {r.rule_id for r in rows}           # deleted by the second rules file
    assert {r.r_country for r in rows} <= {"DE", "FR", "US", "BR"}   # state column renamed on conflict
    assert _outputs(spark, folder)[1] == expected_counts


def test_fraud_example_gives_the_same_rows_in_both_modes(spark, serve_app, tmp_path):
    service = _load_service()
    server = serve_app(service.app())
    batch_flow = _copy(tmp_path, server.port, "batch")
    streaming_flow = _copy(tmp_path, server.port, "streaming")
    run_flow(batch_flow)
    run_flow(streaming_flow, mode="streaming", trigger="available-now")
    batch_flagged, batch_counts = _outputs(spark, batch_flow.parent)
    streaming_flagged, streaming_counts = _outputs(spark, streaming_flow.parent)
    assert streaming_flagged == batch_flagged                  # every column of every row
    assert streaming_counts == _passed_watermark(_source_ts(batch_flow.parent), batch_counts)
