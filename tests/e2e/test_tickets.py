"""The tickets example end to end, in BATCH and in STREAMING (TRIGGER AVAILABLE NOW), against its
own local OpenAI-compatible service: labels as the service's rules give them, urgent tickets
routed by the rules left after updates and deletes, the same rows in both modes, one chat
completion per ticket and the tokens of the metrics equal to the service's."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from jobs import EXAMPLES, copy_example, run_flow

from dslc.testing.openai_service import OpenAIService, serve_in_thread

pytestmark = pytest.mark.spark


def _labels():
    spec = importlib.util.spec_from_file_location("tickets_service", EXAMPLES / "tickets" / "service.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LABELS


def _run(spark, folder: Path, streaming: bool) -> tuple[set, set, dict, dict]:
    with serve_in_thread(OpenAIService(models=("gpt-4.1-mini",), labeller=_labels())) as running:
        flow = copy_example("tickets", folder, port=running.port)
        run_flow(flow, **({"mode": "streaming", "trigger": "available-now"} if streaming else {}))
        stats = running.stats
    labelled = {(r.ticket_id, r.category, r.urgency) for r in spark.read.parquet(str(folder / "target/out/labelled")).collect()}
    routed = {(r.ticket_id, r.team) for r in spark.read.parquet(str(folder / "target/out/routed")).collect()}
    [metrics] = [json.loads(p.read_text())["operators"]["labelled"] for p in (folder / "target/metrics").glob("*.json")]
    return labelled, routed, metrics, stats


def test_tickets_in_both_modes(spark, tmp_path):
    batch = _run(spark, tmp_path / "batch", streaming=False)
    streaming = _run(spark, tmp_path / "streaming", streaming=True)
    for labelled, routed, metrics, stats in (batch, streaming):
        assert len(labelled) == 12
        assert ("k01", "outage", 5) in labelled and ("k12", "account", 1) in labelled
        # r1 (outage >= 4) and r4 (outage >= 5) route; r2 was raised to 5 and r3 deleted
        assert routed == {("k01", "sre-oncall"), ("k01", "incident-commander"), ("k07", "sre-oncall"),
                          ("k09", "sre-oncall"), ("k11", "sre-oncall"), ("k11", "incident-commander")}
        assert metrics["calls"] == stats["chat_calls"] == 12 and stats["rejected"] == 0
        assert metrics["total_tokens"] == stats["total_tokens"] > 0
    assert batch[:2] == streaming[:2]
