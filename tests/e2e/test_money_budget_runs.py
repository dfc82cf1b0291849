"""BUDGET n USD on an online MODEL call (TIER STANDARD in BATCH, TIER FLEX in STREAMING), end to
end on Spark (local[2], 4 partitions) against the local OpenAI-compatible service, which reports
`usage`: each run stops with exit code 3 having spent, at the PRICE and the usage the service
billed, at most the budget plus the requests in flight at the last admission; the reruns complete
the job and every prompt is paid once over all runs. (TIER BATCH's budget: test_provider_batches.)"""
from __future__ import annotations

from collections import Counter

import pytest
from jobs import run_flow
from ticket_rows import LABELS
from ticket_rows import write_tickets as _tickets

from dslc.testing.openai_service import OpenAIService, serve_in_thread

pytestmark = pytest.mark.spark

CAPACITY = 3
BUDGET = 0.002
IN_PRICE, OUT_PRICE = 2.00, 8.00        # per million tokens

FLOW = """PIPELINE money_{name} MODE {mode};
SOURCE tickets FROM JSON 'in/' SCHEMA (id STRING, subject STRING, body STRING);
STREAM spread = SELECT /*+ REPARTITION(4) */ * FROM tickets;
STREAM labelled = ENRICH spread
  WITH MODEL 'gpt-test' AT '{base}'
    SYSTEM 'You label support tickets: a category and an urgency from 1 to 5.'
    PROMPT 'Subject: {{subject}}\\nBody: {{body}}'
  RETURNS (category STRING, urgency INT, summary STRING)
  ASYNC UNORDERED CAPACITY {capacity} TIMEOUT 10s {tier}
  PRICE {in_price} PER MILLION INPUT TOKENS, {out_price} PER MILLION OUTPUT TOKENS
  STORE BUDGET {budget} USD;
SINK labelled TO JSON 'out/labelled';
"""


def _usd(prompt_tokens: int, completion_tokens: int) -> float:
    return (prompt_tokens * IN_PRICE + completion_tokens * OUT_PRICE) / 1e6


@pytest.mark.parametrize(("mode", "tier"), [("BATCH", ""), ("STREAMING", "TIER FLEX")])
def test_a_usd_budget_stops_each_run_and_reruns_complete_it_paying_each_prompt_once(
        spark, tmp_path, capfd, mode, tier):
    rows = _tickets(tmp_path)
    header = mode if mode == "BATCH" else "STREAMING CHECKPOINT 'chk' TRIGGER AVAILABLE NOW"
    flow = tmp_path / "pipeline.flow"
    with serve_in_thread(OpenAIService(models=("gpt-test",), labeller=LABELS)) as running:
        flow.write_text(FLOW.format(name=mode.lower(), mode=header, base=running.base_url, capacity=CAPACITY,
                                    tier=tier, in_price=IN_PRICE, out_price=OUT_PRICE, budget=BUDGET))
        spent: list[float] = []
        stops = 0
        for _ in range(10):
            before = running.stats["prompt_tokens"], running.stats["completion_tokens"]
            try:
                run_flow(flow)
            except SystemExit as exc:               # the job stops with exit code 3, in both modes
                assert exc.code == 3
                assert f"BUDGET {BUDGET} USD of 'labelled'" in capfd.readouterr().err
                stops += 1
                spent.append(_usd(running.stats["prompt_tokens"] - before[0],
                                  running.stats["completion_tokens"] - before[1]))
            else:
                spent.append(_usd(running.stats["prompt_tokens"] - before[0],
                                  running.stats["completion_tokens"] - before[1]))
                break
        else:
            pytest.fail(f"the job did not complete in 10 runs: {spent}")
        stats = running.stats
    paid = Counter(stats["prompts"])
    assert len(paid) == 24 and set(paid.values()) == {1}, paid      # each distinct prompt paid once overall
    assert set(stats["tiers"]) == ({"flex"} if tier else {"default"})
    whole = _usd(stats["prompt_tokens"], stats["completion_tokens"])
    assert stops >= 2 and whole > 2 * BUDGET and sum(spent) == pytest.approx(whole)
    # over by at most what was in flight at the last admission: CAPACITY requests of each of the
    # 2 running tasks, each at most twice the mean request
    in_flight = 2 * CAPACITY * 2 * whole / stats["chat_calls"]
    assert all(0 < s <= BUDGET + in_flight for s in spent), (spent, in_flight)
    out = [r.asDict() for r in spark.read.json(str(tmp_path / "out/labelled")).collect()]
    assert sorted(r["id"] for r in out) == sorted(r["id"] for r in rows)              # each row once
