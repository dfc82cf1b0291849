"""BUDGET n TOKENS inside the operator, against the local OpenAI-compatible service (which
reports `usage` and counts what it answers) and a real answer store (SQLite file, Redis):
the run's counter ends equal to the tokens the service billed (reservations corrected by usage,
refused requests given back), an EMBEDDING budget is never exceeded when its estimate is exact,
and runs that stop on the budget are continued by the next without paying an input twice."""
from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from runtime_support import run_operator as run

from dslc.runtime.config import Batch, Budget, Column, EmbeddingCall, Enrich, ModelCall, Retry, Store
from dslc.runtime.limits import tokens
from dslc.runtime.store.open_stores import make_store
from dslc.testing.openai_service import OpenAIService, count_tokens, keyword_labeller, serve_in_thread

_names = iter(range(10**9))


@pytest.fixture(autouse=True)
def four_characters_a_token(monkeypatch):
    """dslc's estimate as the test service counts (tiktoken, when installed, counts otherwise)."""
    monkeypatch.setattr(tokens, "_encoder", None)
    monkeypatch.setattr(tokens, "_encoder_looked_up", True)


def counter(location: str, config: Enrich) -> int:
    """The run's token counter in the store."""
    async def read() -> int:
        store = make_store(location)
        await store.open()
        try:
            return await store.spend(f"budget-tokens:{config.name}:{config.store.run}", 0)
        finally:
            await store.close()
    return asyncio.run(read())


def model(base_url: str, location: str, budget: int, run_id: str = "run1", **kw: Any) -> Enrich:
    kw.setdefault("name", f"labelled{next(_names)}")
    return Enrich(line=3, call=ModelCall("gpt-test", base_url, "Subject: {subject}", "You label tickets."),
                  returns=(Column("category", "STRING"), Column("urgency", "INT")), key_columns=("subject",),
                  timeout_s=10.0, store=Store(location, run=run_id), budget=Budget(budget, "TOKENS"), **kw)


def test_the_counter_ends_at_what_the_service_billed_even_with_refused_requests(location):
    subjects = [{"subject": f"invoice number {i} " + "x" * (i * 7)} for i in range(12)]
    labels = keyword_labeller({"category": [("invoice", "billing")], "urgency": [("", 2)]})
    # one slot: most of the 4 requests in flight are refused (429) and retried; nothing is billed for them
    with serve_in_thread(OpenAIService(labeller=labels, max_concurrent=1, latency_s=0.03)) as running:
        config = model(running.base_url, location, 100_000, capacity=4, retry=Retry(20, 0.005))
        op, out = run(config, subjects)
        stats = running.stats
    assert len(out.rows) == 12 and stats["chat_calls"] == 12 and stats["rejected"] > 0
    assert counter(location, config) == stats["total_tokens"] == op.metrics()["total_tokens"]


def test_an_embedding_budget_holds_exactly_and_runs_continue_paying_each_input_once(location):
    texts = [f"document {i} " + "words " * (i % 7) for i in range(30)]
    rows = [{"title": t} for t in texts]
    budget = 80
    name = f"vectors{next(_names)}"
    with serve_in_thread(OpenAIService()) as running:
        spent, left = [], []
        for attempt in range(1, 10):
            config = Enrich(name=name, line=9, call=EmbeddingCall("emb-test", running.base_url, "{title}"),
                            returns=(Column("embedding", "ARRAY<FLOAT>"),), key_columns=("title",),
                            capacity=8, batch=Batch(4), timeout_s=10.0,
                            store=Store(location, run=f"run{attempt}"), budget=Budget(budget, "TOKENS"))
            before = running.stats
            op, out = run(config, rows)
            after = running.stats
            spent.append(after["total_tokens"] - before["total_tokens"])
            # a batch the budget stopped was not sent, and is not counted as a call
            assert op.metrics()["calls"] == after["embedding_calls"] - before["embedding_calls"]
            assert op.metrics()["elements_called"] == after["embedding_inputs"] - before["embedding_inputs"]
            left.append(op.metrics()["unanswered"])
            assert len(out.rows) + left[-1] == 30
            if not left[-1]:
                break
        stats = running.stats
    # an embedding's tokens are its input's, estimated exactly: the budget is never exceeded
    assert all(s <= budget for s in spent) and len(spent) >= 3, spent
    assert stats["total_tokens"] == sum(count_tokens(t) for t in texts)      # each input paid once
    assert stats["embedding_inputs"] == 30


def test_a_model_budget_stops_within_the_in_flight_estimate_errors(location):
    subjects = [{"subject": f"ticket {i} " + "word " * (i % 9)} for i in range(40)]
    budget, capacity = 300, 4
    with serve_in_thread(OpenAIService()) as running:
        config = model(running.base_url, location, budget, capacity=capacity)
        op, out = run(config, subjects)
        stats = running.stats
    unanswered = op.metrics()["unanswered"]
    assert op.metrics()["calls"] == stats["chat_calls"]              # the requests not sent are not calls
    assert unanswered > 0 and len(out.rows) + unanswered == 40
    prompts = Counter(stats["prompts"])
    assert set(prompts.values()) == {1}
    # the prompt is estimated exactly; a request's error is at most its completion tokens
    slack = capacity * max(1, -(-stats["completion_tokens"] // stats["chat_calls"]) + 8)
    assert budget - 2 * slack <= stats["total_tokens"] <= budget + slack, (stats["total_tokens"], slack)
    assert counter(location, config) == stats["total_tokens"]      # the refused reservation was given back
