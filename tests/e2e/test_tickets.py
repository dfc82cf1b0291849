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


def test_the_pay_less_variant_labels_and_routes_the_same_through_a_provider_batch(spark, tmp_path, capfd):
    """examples/tickets/pay_less.flow (TIER BATCH): the rows pipeline.flow writes (asserted above),
    no online request, the money printed and in the metrics at the batch PRICE of the billed usage;
    run again, nothing is sent."""
    folder = tmp_path / "pay_less"
    with serve_in_thread(OpenAIService(models=("gpt-4.1-mini",), labeller=_labels(), batch_delay_s=1.0)) as running:
        copy_example("tickets", folder, port=running.port)
        flow = folder / "pay_less.flow"
        flow.write_text(flow.read_text().replace("127.0.0.1:8765", f"127.0.0.1:{running.port}"))
        run_flow(flow)
        stats = running.stats
        err = capfd.readouterr().err
        run_flow(flow)
        again = running.stats
    labelled = {(r.ticket_id, r.category, r.urgency) for r in spark.read.parquet(str(folder / "target/pay_less/labelled")).collect()}
    routed = {(r.ticket_id, r.team) for r in spark.read.parquet(str(folder / "target/pay_less/routed")).collect()}
    assert len(labelled) == 12 and ("k01", "outage", 5) in labelled and ("k12", "account", 1) in labelled
    assert routed == {("k01", "sre-oncall"), ("k01", "incident-commander"), ("k07", "sre-oncall"),
                      ("k09", "sre-oncall"), ("k11", "sre-oncall"), ("k11", "incident-commander")}
    assert stats["chat_calls"] == 0 and stats["batches_created"] == 1 and stats["batch_lines"] == 12
    paid = (stats["batch_prompt_tokens"] * 0.20 + stats["batch_completion_tokens"] * 0.80) / 1e6
    [metrics] = [json.loads(p.read_text())["operators"]["labelled"]
                 for p in sorted((folder / "target/metrics").glob("*.json"))[:1]]
    assert metrics["cost_usd"] == pytest.approx(paid) and paid > 0
    assert f"${paid:.4f}" in err                                           # the money, printed
    assert again["batches_created"] == 1 and again["chat_calls"] == 0      # the rerun: all from the store
