"""`dslc run --lineage DEST` on Spark (local, spark-submit as users run it): START before the job,
a RUNNING event after each micro-batch of a STREAMING query (sent by the job's driver), COMPLETE
at the end; every event validates against OpenLineage's published schemas and names the
sources, the sink and the column lineage the compiler derived."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lineage"))
from lineage_schemas import problems  # noqa: E402

pytestmark = pytest.mark.spark

FLOW = """PIPELINE lineage_run MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW;
SOURCE orders FROM JSON 'in/' SCHEMA (order_id STRING, amount DOUBLE)
  OPTIONS (maxFilesPerTrigger = '1');
STREAM big = SELECT order_id, amount * 2 AS doubled FROM orders WHERE amount > 1;
SINK big TO JSON 'out/big';
"""


def test_a_streaming_run_sends_start_running_per_micro_batch_and_complete(tmp_path):
    (tmp_path / "in").mkdir()
    for part in range(3):            # three files, one per micro-batch
        (tmp_path / f"in/{part}.json").write_text(json.dumps({"order_id": f"o{part}", "amount": part + 1.0}) + "\n")
    flow = tmp_path / "pipeline.flow"
    flow.write_text(FLOW)
    dest = tmp_path / "lineage/events.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in ("DSLC_FLOW_FOLDER", "SPARK_REMOTE")}
    done = subprocess.run([sys.executable, "-m", "dslc.compiler.cli", "run", str(flow), "--lineage", str(dest)],
                          env=env, capture_output=True, text=True, timeout=500, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    events = [json.loads(line) for line in dest.read_text().splitlines() if line]
    kinds = [e["eventType"] for e in events]
    assert kinds[0] == "START" and kinds[-1] == "COMPLETE"
    assert kinds.count("RUNNING") >= 3 and set(kinds[1:-1]) == {"RUNNING"}      # one per micro-batch at least
    assert len({e["run"]["runId"] for e in events}) == 1
    for event in events:
        assert problems(event) == []
    [output] = events[0]["outputs"]
    assert output["name"] == str((tmp_path / "out/big").resolve())
    assert output["facets"]["columnLineage"]["fields"]["doubled"]["inputFields"][0]["field"] == "amount"
    assert events[0]["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
