"""STREAMING end to end: file sources, ENRICH (Python), BROADCAST rules and MATCH, a parquet sink;
trigger AVAILABLE NOW, then a second run on the same checkpoint picks up new files and new rules."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from jobs import run_flow

pytestmark = pytest.mark.spark

FLOW = """
PIPELINE limits MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW;
SOURCE events FROM JSON 'in/events/' SCHEMA (id STRING, user STRING, amount DOUBLE);
SOURCE limit_updates FROM JSON 'in/limits/' SCHEMA (user STRING, op STRING, max_amount DOUBLE);
BROADCAST limits FROM limit_updates KEY user OP op;
STREAM scored = ENRICH events WITH PYTHON 'lookup:score' RETURNS (score DOUBLE) ASYNC ORDERED CAPACITY 8 TIMEOUT 5s;
STREAM over = MATCH scored AGAINST limits AS l WHERE scored.user = l.user AND scored.amount > l.max_amount;
SINK over TO PARQUET 'out/over';
"""

LOOKUP = """
import asyncio

async def score(row):
    await asyncio.sleep(0.001)
    return {"score": row["amount"] / 10}
"""


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _over(spark, folder: Path) -> set[tuple]:
    rows = spark.read.parquet(str(folder / "out" / "over")).collect()
    assert len(rows) == len({(r.id, r.user) for r in rows}), "a row was written twice"
    return {(r.id, r.user, r.score, r.max_amount) for r in rows}


def test_streaming_runs_pick_up_new_files_and_new_rules(spark, tmp_path):
    (tmp_path / "pipeline.flow").write_text(FLOW)
    (tmp_path / "lookup.py").write_text(LOOKUP)
    _write(tmp_path / "in/limits/1.json", [{"user": "a", "op": "set", "max_amount": 10.0},
                                            {"user": "b", "op": "set", "max_amount": 50.0}])
    _write(tmp_path / "in/events/1.json", [{"id": "e1", "user": "a", "amount": 20.0},
                                            {"id": "e2", "user": "b", "amount": 20.0},
                                            {"id": "e3", "user": "b", "amount": 60.0}])
    run_flow(tmp_path / "pipeline.flow")
    assert _over(spark, tmp_path) == {("e1", "a", 2.0, 10.0), ("e3", "b", 6.0, 50.0)}

    # new rules: b's limit drops to 5, a is deleted; new events arrive
    _write(tmp_path / "in/limits/2.json", [{"user": "b", "op": "set", "max_amount": 5.0},
                                            {"user": "a", "op": "delete", "max_amount": None}])
    _write(tmp_path / "in/events/2.json", [{"id": "e4", "user": "a", "amount": 99.0},
                                            {"id": "e5", "user": "b", "amount": 6.0}])
    run_flow(tmp_path / "pipeline.flow")
    assert _over(spark, tmp_path) == {("e1", "a", 2.0, 10.0), ("e3", "b", 6.0, 50.0), ("e5", "b", 0.6, 5.0)}
    state = json.loads((tmp_path / "chk/state/limits/applied.json").read_text())
    assert state["batch_id"] == 1     # two rules batches applied, each once
