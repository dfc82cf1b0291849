"""ASYNC ORDERED BY on Spark, BATCH and STREAMING (AVAILABLE NOW): the same rows, and within each
key the input order, although later rows answer sooner."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from jobs import run_flow

pytestmark = pytest.mark.spark

FLOW = """
PIPELINE keyed {pipeline};
SOURCE events FROM JSON 'in/' SCHEMA (seq INT, user STRING);
STREAM scored = ENRICH events WITH PYTHON 'slow_scores:score' RETURNS (score INT)
  ASYNC ORDERED BY (user) CAPACITY 16 TIMEOUT 5s;
SINK scored TO JSON 'out';
"""

SLOW = """
import asyncio

async def score(row):
    await asyncio.sleep((40 - row["seq"] % 40) / 2000)   # later rows of a burst answer first
    return {"score": row["seq"] * 10}
"""

ROWS = [{"seq": i, "user": f"u{i % 3}"} for i in range(60)]


def _run(tmp_path: Path, pipeline: str) -> list[dict]:
    folder = tmp_path / pipeline.split()[1].lower()
    (folder / "in").mkdir(parents=True)
    (folder / "in/e.json").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (folder / "slow_scores.py").write_text(SLOW)
    flow = folder / "pipeline.flow"
    flow.write_text(FLOW.format(pipeline=pipeline))
    run_flow(flow)
    lines: list[dict] = []
    for part in sorted((folder / "out").glob("part-*.json")):   # one input file: one partition
        lines += [json.loads(line) for line in part.read_text().splitlines()]
    return lines


@pytest.mark.parametrize("pipeline", ["MODE BATCH", "MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"])
def test_ordered_by_keeps_each_keys_input_order(spark, tmp_path, pipeline):
    out = _run(tmp_path, pipeline)
    assert sorted((r["seq"], r["user"], r["score"]) for r in out) == [
        (r["seq"], r["user"], r["seq"] * 10) for r in ROWS]
    for user in ("u0", "u1", "u2"):
        seqs = [r["seq"] for r in out if r["user"] == user]
        assert seqs == sorted(seqs), user
