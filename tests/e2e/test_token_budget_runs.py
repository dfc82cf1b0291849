"""BUDGET n TOKENS on a MODEL call (and an EMBEDDING call, last test), end to end on Spark (local[2], 4 partitions) against the local
OpenAI-compatible service, which reports `usage` and counts every prompt it answers: each run
stops with exit code 3 (STREAMING: the query fails with the budget's message, the job exits 3) having spent at
most the budget plus the documented slack (the estimate errors of the requests in flight), the
reruns complete the job, and every prompt is paid once over all runs."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from jobs import run_flow
from ticket_rows import LABELS
from ticket_rows import write_tickets as _tickets

from dslc.testing.openai_service import OpenAIService, serve_in_thread

pytestmark = pytest.mark.spark

CAPACITY = 3
PARTITIONS = 4
BUDGET = 500

FLOW = """PIPELINE tokens_{name} MODE {mode};
SOURCE tickets FROM JSON 'in/' SCHEMA (id STRING, subject STRING, body STRING);
STREAM spread = SELECT /*+ REPARTITION({partitions}) */ * FROM tickets;
STREAM labelled = ENRICH spread
  WITH MODEL 'gpt-test' AT '{base}'
    SYSTEM 'You label support tickets: a category and an urgency from 1 to 5.'
    PROMPT 'Subject: {{subject}}\\nBody: {{body}}'
  RETURNS (category STRING, urgency INT, summary STRING)
  ASYNC UNORDERED CAPACITY {capacity} TIMEOUT 10s
  STORE BUDGET {budget} TOKENS;
SINK labelled TO JSON 'out/labelled';
"""


def _flow(folder: Path, base: str, mode: str) -> Path:
    header = mode if mode == "BATCH" else "STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"
    flow = folder / "pipeline.flow"
    flow.write_text(FLOW.format(name=mode.lower(), mode=header, base=base, partitions=PARTITIONS,
                                capacity=CAPACITY, budget=BUDGET))
    return flow


def _slack(stats: dict) -> int:
    """The documented overshoot: the estimate errors of the requests in flight at the last
    admission. The prompt is estimated exactly here (the service counts 4 characters a token, as
    dslc does without tiktoken), so a request's error is at most its completion tokens; at most
    CAPACITY requests of each of the (local[2]) 2 running tasks are in flight."""
    calls = max(1, stats["chat_calls"])
    return 2 * CAPACITY * (stats["completion_tokens"] // calls + 8)


@pytest.mark.parametrize("mode", ["BATCH", "STREAMING"])
def test_a_token_budget_stops_each_run_and_reruns_complete_it_paying_each_prompt_once(
        spark, tmp_path, capfd, mode):
    rows = _tickets(tmp_path)
    service = OpenAIService(models=("gpt-test",), labeller=LABELS)
    with serve_in_thread(service) as running:
        flow = _flow(tmp_path, running.base_url, mode)
        spent: list[int] = []
        stops = 0
        for _ in range(8):
            before = running.stats["total_tokens"]
            try:
                run_flow(flow)
            except SystemExit as exc:               # the job stops with exit code 3, in both modes
                assert exc.code == 3
                err = capfd.readouterr().err
                assert f"dslc: BUDGET {BUDGET} TOKENS of 'labelled' (line 4) is spent:" in err
                assert "still unanswered" in err
                if mode == "BATCH":
                    assert not (tmp_path / "out/labelled").exists()      # nothing written: it stopped first
                stops += 1
            else:
                spent.append(running.stats["total_tokens"] - before)
                break
            spent.append(running.stats["total_tokens"] - before)
        else:
            pytest.fail(f"the job did not complete in 8 runs: {spent}")
        stats = running.stats
    paid = Counter(stats["prompts"])
    assert len(paid) == 24 and set(paid.values()) == {1}, paid      # each distinct prompt paid once overall
    whole = stats["total_tokens"]
    assert stops >= 2 and whole > 2 * BUDGET                        # the budget did stop runs
    assert all(0 < s <= BUDGET + _slack(stats) for s in spent), (spent, _slack(stats))
    assert sum(spent) == whole
    # Spark's reader lists only committed files (STREAMING: the _spark_metadata log), not those a
    # micro-batch stopped by its budget left behind
    out = [r.asDict() for r in spark.read.json(str(tmp_path / "out/labelled")).collect()]
    assert sorted(r["id"] for r in out) == sorted(r["id"] for r in rows)              # each row once
    assert all(r["category"] == ("billing" if "invoice" in r["subject"] else r["category"]) for r in out)


EMBEDDING_BUDGET = 100

EMBEDDING_FLOW = """PIPELINE tokens_embedding MODE BATCH;
SOURCE tickets FROM JSON 'in/' SCHEMA (id STRING, subject STRING, body STRING);
STREAM spread = SELECT /*+ REPARTITION({partitions}) */ * FROM tickets;
STREAM vectors = ENRICH spread
  WITH EMBEDDING 'emb-test' AT '{base}' INPUT '{{body}}'
  RETURNS (embedding ARRAY<FLOAT>)
  ASYNC UNORDERED CAPACITY 8 TIMEOUT 10s BATCH 4 WITHIN 20ms
  STORE BUDGET {budget} TOKENS;
SINK vectors TO PARQUET 'out/vectors';
"""


def test_an_embedding_token_budget_is_never_overspent_and_reruns_embed_each_input_once(spark, tmp_path, capfd):
    """An embedding's tokens are its inputs' and are known before it is sent (the service counts
    them as dslc does), so no run spends a token over the budget, batched requests included."""
    rows = _tickets(tmp_path)
    service = OpenAIService(models=("emb-test",))
    with serve_in_thread(service) as running:
        flow = tmp_path / "pipeline.flow"
        flow.write_text(EMBEDDING_FLOW.format(base=running.base_url, partitions=PARTITIONS,
                                              budget=EMBEDDING_BUDGET))
        spent: list[int] = []
        for _ in range(10):
            before = running.stats["total_tokens"]
            try:
                run_flow(flow)
            except SystemExit as exc:
                assert exc.code == 3
                assert f"BUDGET {EMBEDDING_BUDGET} TOKENS of 'vectors' (line 4) is spent:" in capfd.readouterr().err
                spent.append(running.stats["total_tokens"] - before)
                continue
            spent.append(running.stats["total_tokens"] - before)
            break
        else:
            pytest.fail(f"the job did not complete in 10 runs: {spent}")
        stats = running.stats
    embedded = Counter(stats["embedded"])
    assert set(embedded) == {r["body"] for r in rows} and set(embedded.values()) == {1}, embedded   # each paid once
    assert len(spent) >= 3 and stats["total_tokens"] > 2 * EMBEDDING_BUDGET     # the budget stopped runs
    assert all(0 < s <= EMBEDDING_BUDGET for s in spent), spent                    # never over it
    out = spark.read.parquet(str(tmp_path / "out/vectors")).collect()
    assert sorted(r["id"] for r in out) == sorted(r["id"] for r in rows)
    assert all(len(r["embedding"]) > 0 for r in out)
