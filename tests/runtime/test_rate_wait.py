"""Waiting for TOKENS PER MINUTE is not call latency (#48 item 3): a gateway answering at once,
held back by the operator's own token budget, shows a latency of its answers, the wait reported
apart as `rate_wait_seconds`, and a diagnosis of `rate` (it said `input`, with a p50 of 99.7 s
for a gateway answering in under a second)."""
from __future__ import annotations

import time

from runtime_support import run_operator as run

from dslc.runtime.config import Column, Enrich, Mode, ModelCall, Rate
from dslc.runtime.diagnosis import diagnose
from dslc.runtime.metrics import format_table, summary
from dslc.testing.openai_service import OpenAIService, keyword_labeller, serve_in_thread

ELEMENTS = 24      # enough to judge a run's timing (diagnosis.MIN_ELEMENTS)


def test_waiting_for_tokens_per_minute_is_reported_apart_and_diagnosed_as_rate() -> None:
    service = OpenAIService(labeller=keyword_labeller({"category": [("", "billing")]}))
    with serve_in_thread(service) as running:
        # 6000 tokens a minute: 100 a second with 200 saved up; each request takes ~30, so the
        # task waits seconds for tokens while the service answers each request at once
        config = Enrich(name="labelled", line=4, returns=(Column("category", "STRING"),), key_columns=("id",),
                        timeout_s=60.0, capacity=8, mode=Mode.UNORDERED,
                        rate=Rate(6000, per="MINUTE", tokens_per_minute=6000),
                        call=ModelCall("gpt-test", running.base_url, "Subject: {subject}"))
        started = time.monotonic()
        op, out = run(config, [{"id": f"t{i}", "subject": f"ticket number {i}"} for i in range(ELEMENTS)])
        task_seconds = time.monotonic() - started
        assert running.stats["chat_calls"] == ELEMENTS
    assert len(out.rows) == ELEMENTS
    m = summary({**op.metrics(), "task_seconds": task_seconds})
    assert m["rate_wait_seconds"] > m["latency_seconds"]              # the wait dominates, reported apart
    assert m["p50_ms"] / 1000 < m["rate_wait_seconds"] / ELEMENTS      # the latency is the answers', not the wait's
    assert "rate_wait_seconds" in format_table({"labelled": m}).splitlines()[1]     # shown beside p50/p99
    line = diagnose("labelled", m)
    assert line["cause"] == "rate", line
    assert line["figures"]["rate_wait_share"] >= 0.5
    assert "TOKENS PER MINUTE" in line["line"]
