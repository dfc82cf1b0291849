"""STREAMING: each micro-batch's figures of every ENRICH in Spark's own StreamingQueryProgress
(observed metrics), so a StreamingQueryListener receives them, and in the run's metrics JSON."""
from __future__ import annotations

import json
import time

import pytest
from jobs import run_flow

pytestmark = pytest.mark.spark

FLOW = """
PIPELINE per_batch MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW;
SOURCE orders FROM JSON 'in/' SCHEMA (id STRING, amount DOUBLE) OPTIONS (maxFilesPerTrigger = '1');
STREAM enriched = ENRICH orders WITH PYTHON 'micro_batch_udfs:tier' RETURNS (tier STRING)
  ASYNC UNORDERED CAPACITY 8 TIMEOUT 5s;
SINK enriched TO PARQUET 'out';
"""

UDFS = '''
calls = []


async def tier(row):
    return {"tier": "gold" if row["amount"] > 10 else "basic"}
'''


def test_a_listener_receives_each_micro_batch_figures(spark, tmp_path, monkeypatch):
    from pyspark.sql.streaming import StreamingQueryListener

    received: list[tuple[int, dict, int]] = []

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            for name, row in (event.progress.observedMetrics or {}).items():
                if name.startswith("dslc_chain"):
                    received.append((event.progress.batchId, row.asDict(), event.progress.numInputRows))

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            pass

    (tmp_path / "in").mkdir()
    for n, rows in enumerate((3, 5, 2)):        # one file a micro-batch (maxFilesPerTrigger 1)
        (tmp_path / f"in/{n}.json").write_text("".join(json.dumps({"id": f"{n}-{i}", "amount": float(i * 7)}) + "\n"
                                                       for i in range(rows)))
    (tmp_path / "micro_batch_udfs.py").write_text(UDFS)   # a name no other test ships in this session
    (tmp_path / "pipeline.flow").write_text(FLOW)
    metrics = tmp_path / "metrics.json"
    monkeypatch.setenv("DSLC_METRICS_FILE", str(metrics))
    listener = Listener()
    spark.streams.addListener(listener)
    try:
        run_flow(tmp_path / "pipeline.flow")
        deadline = time.time() + 30             # the listener bus delivers asynchronously
        while len(received) < 3 and time.time() < deadline:
            time.sleep(0.2)
    finally:
        spark.streams.removeListener(listener)
    assert [batch for batch, _, _ in received] == [0, 1, 2]
    # each batch's own figures: its file's rows (Spark picks the files in its own order)
    assert all(figures["enriched.elements_in"] == figures["enriched.calls"] == rows for _, figures, rows in received)
    assert sorted(figures["enriched.elements_in"] for _, figures, _ in received) == [2, 3, 5]
    assert all(figures["enriched.errors"] == 0 and figures["enriched.max_in_flight"] >= 1 and
               figures["enriched.latency_ms"] >= 0 for _, figures, _ in received)
    document = json.loads(metrics.read_text())
    batches = document["micro_batches"]
    assert sorted(b["batch_id"] for b in batches) == [0, 1, 2]
    assert all(next(iter(b["figures"].values()))["enriched.elements_out"] == b["input_rows"] for b in batches)
    assert sorted(b["input_rows"] for b in batches) == [2, 3, 5]
    assert document["operators"]["enriched"]["elements_in"] == 10       # the totals still add up
