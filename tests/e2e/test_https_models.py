"""MODEL and EMBEDDING over HTTPS with a private CA (#48 item 7), as HTTP's test_https.py: the
OpenAI-compatible test service served over TLS on 127.0.0.1 with a certificate signed by a CA the
test makes (trustme). The system's CA store does not trust it; OPTIONS (ca_file = ...) after the
PROMPT or INPUT does (a path beside the .flow file, read by the driver and shipped), and
verify = 'false' skips the check."""
from __future__ import annotations

import json

import pytest
from jobs import run_flow

from dslc.testing.openai_service import OpenAIService, keyword_labeller

pytestmark = pytest.mark.spark

FLOW = """
PIPELINE tls_models {pipeline};
SOURCE docs FROM JSON 'in/' SCHEMA (doc_id STRING, title STRING);
STREAM labelled = ENRICH docs
  WITH MODEL 'gpt-test' AT 'https://127.0.0.1:{port}/v1' PROMPT 'Title: {{title}}' {options}
  RETURNS (category STRING)
  ASYNC UNORDERED CAPACITY 4 TIMEOUT 10s
  ON ERROR DEAD LETTER 'dlq_labels';
STREAM vectors = ENRICH docs
  WITH EMBEDDING 'emb-test' AT 'https://127.0.0.1:{port}/v1' INPUT '{{title}}' {options}
  RETURNS (embedding ARRAY<FLOAT>)
  ASYNC UNORDERED CAPACITY 4 TIMEOUT 10s
  ON ERROR DEAD LETTER 'dlq_vectors';
SINK labelled TO JSON 'labels';
SINK vectors TO JSON 'vectors';
"""
DOCS = [{"doc_id": f"d{i}", "title": f"invoice {i}" if i % 2 else f"password {i}"} for i in range(6)]


@pytest.fixture
def tls_models(serve_tls_app):
    service = OpenAIService(labeller=keyword_labeller({"category": [("invoice", "billing"), ("", "account")]}))
    server = serve_tls_app(service.app())
    server.stats = service.stats
    return server


def _run(tmp_path, port, options, pipeline="MODE BATCH"):
    (tmp_path / "in").mkdir(exist_ok=True)
    (tmp_path / "in/d.json").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    flow = tmp_path / "pipeline.flow"
    flow.write_text(FLOW.format(pipeline=pipeline, port=port, options=options))
    run_flow(flow)


def _letters(tmp_path, folder):
    return [json.loads(line) for path in (tmp_path / folder).glob("part-*") for line in path.read_text().splitlines()]


@pytest.mark.parametrize("pipeline", ["MODE BATCH", "MODE STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"])
def test_a_private_ca_given_by_ca_file_is_trusted_by_model_and_embedding(spark, tmp_path, tls_models, pipeline):
    _run(tmp_path, tls_models.port, "OPTIONS (ca_file = 'certs/test-ca.pem')", pipeline)
    labels = spark.read.json(str(tmp_path / "labels")).collect()
    assert sorted((r.doc_id, r.category) for r in labels) == sorted(
        (d["doc_id"], "billing" if "invoice" in d["title"] else "account") for d in DOCS)
    vectors = spark.read.json(str(tmp_path / "vectors")).collect()
    assert sorted(r.doc_id for r in vectors) == sorted(d["doc_id"] for d in DOCS)
    assert all(len(r.embedding) > 0 for r in vectors)
    assert _letters(tmp_path, "dlq_labels") == [] and _letters(tmp_path, "dlq_vectors") == []
    assert tls_models.stats["chat_calls"] == len(DOCS) and tls_models.stats["embedding_inputs"] == len(DOCS)


def test_the_system_store_does_not_trust_a_private_ca(spark, tmp_path, tls_models):
    """Every element of both operators dead-lettered on the certificate (not retried, no
    outage): the run ends over its dead-letter ceiling (exit code 5); no request was answered."""
    with pytest.raises(SystemExit) as stopped:
        _run(tmp_path, tls_models.port, "")
    assert stopped.value.code == 5
    for folder in ("dlq_labels", "dlq_vectors"):
        letters = _letters(tmp_path, folder)
        assert len(letters) == len(DOCS), folder
        assert all("certificate verify failed" in letter["error"] for letter in letters), letters[0]["error"]
    assert tls_models.stats["chat_calls"] == 0 and tls_models.stats["embedding_calls"] == 0


def test_verify_false_skips_the_check(spark, tmp_path, tls_models):
    _run(tmp_path, tls_models.port, "OPTIONS (verify = 'false')")
    assert len(spark.read.json(str(tmp_path / "labels")).collect()) == len(DOCS)
    assert len(spark.read.json(str(tmp_path / "vectors")).collect()) == len(DOCS)
    assert tls_models.stats["chat_calls"] == len(DOCS)
