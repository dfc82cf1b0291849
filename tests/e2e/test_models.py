"""WITH MODEL and WITH EMBEDDING end to end on Spark, against the local OpenAI-compatible service:
the same rows in BATCH and in STREAMING (AVAILABLE NOW), one call per row (per batch of 4 for
the embeddings), the tokens of the metrics JSON equal to what the service counted, and a
refused ticket dead-lettered with the model's words."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from jobs import run_flow

from dslc.testing.openai_service import REFUSE, OpenAIService, embedding_of, keyword_labeller, serve_in_thread

pytestmark = pytest.mark.spark

FLOW = """
PIPELINE {name} MODE {mode};
SOURCE tickets FROM JSON 'in/' SCHEMA (id STRING, subject STRING, body STRING);
STREAM labelled = ENRICH tickets
  WITH MODEL 'gpt-test' AT '{base}'
    SYSTEM 'You label support tickets.'
    PROMPT 'Subject: {{subject}}\\nBody: {{body}}'
  RETURNS (category STRING, urgency INT)
  ASYNC UNORDERED CAPACITY 8 TIMEOUT 10s RETRY 3 BACKOFF 10ms
  RATE 6000 PER MINUTE, 600000 TOKENS PER MINUTE
  ON ERROR DEAD LETTER 'dlq';
STREAM vectors = ENRICH tickets
  WITH EMBEDDING 'emb-test' AT '{base}' INPUT '{{subject}}'
  RETURNS (embedding ARRAY<FLOAT>)
  CAPACITY 8 BATCH 4 WITHIN 50ms;
SINK labelled TO PARQUET 'out/labelled';
SINK vectors TO PARQUET 'out/vectors';
"""

LABELS = keyword_labeller({"category": [("invoice", "billing"), ("password", "account"), ("", "other")],
                           "urgency": [("down", 5), ("", 2)]})
SUBJECTS = ["invoice twice", "password reset", "site down", "hello", f"{REFUSE} odd", "invoice missing",
            "cannot login password", "all down", "question", "refund invoice"]


def _tickets(folder: Path) -> None:
    (folder / "in").mkdir(parents=True)
    (folder / "in/1.json").write_text("".join(
        json.dumps({"id": f"t{i}", "subject": s, "body": f"body {i}"}) + "\n" for i, s in enumerate(SUBJECTS)))


def _metrics(folder: Path) -> dict:
    [path] = sorted((folder / "target" / "metrics").glob("*.json"))
    return json.loads(path.read_text())["operators"]


@pytest.mark.parametrize("mode", ["BATCH", "STREAMING"])
def test_labels_and_vectors_in_both_modes(spark, tmp_path, mode):
    service = OpenAIService(models=("gpt-test", "emb-test"), labeller=LABELS, shuffle=True)
    with serve_in_thread(service) as running:
        _tickets(tmp_path)
        flow = tmp_path / "pipeline.flow"
        header = mode if mode == "BATCH" else "STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"
        flow.write_text(FLOW.format(name=f"tickets_{mode.lower()}", mode=header, base=running.base_url))
        run_flow(flow)
        stats = running.stats
    labelled = {r.id: (r.category, r.urgency) for r in spark.read.parquet(str(tmp_path / "out/labelled")).collect()}
    assert labelled == {"t0": ("billing", 2), "t1": ("account", 2), "t2": ("other", 5), "t3": ("other", 2),
                        "t5": ("billing", 2), "t6": ("account", 2), "t7": ("other", 5), "t8": ("other", 2),
                        "t9": ("billing", 2)}
    vectors = {r.id: list(r.embedding) for r in spark.read.parquet(str(tmp_path / "out/vectors")).collect()}
    assert vectors == {f"t{i}": pytest.approx(embedding_of(s)) for i, s in enumerate(SUBJECTS)}
    [letter] = [json.loads(line) for p in (tmp_path / "dlq").glob("part-*") for line in p.read_text().splitlines()]
    assert letter["key"] == {"subject": f"{REFUSE} odd", "body": "body 4"} and "refused" in letter["error"]
    assert letter["answer"] and letter["attempts"] == 1         # a refusal is not asked again: it costs one call

    operators = _metrics(tmp_path)
    model, embed = operators["labelled"], operators["vectors"]
    assert stats["bad_requests"] == 0 and stats["rejected"] == 0
    assert model["calls"] == stats["chat_calls"] == 10                   # one per ticket, the refused one too
    assert embed["elements_called"] == stats["embedding_inputs"] == 10
    assert embed["calls"] == stats["embedding_calls"] <= 6               # batches of up to 4 per task
    tokens = {k: model[k] + embed[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    assert tokens == {k: stats[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    assert embed["completion_tokens"] == 0 and model["completion_tokens"] > 0
