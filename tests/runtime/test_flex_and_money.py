"""TIER FLEX and money inside the operator, against the local OpenAI-compatible service: every
flex request says `service_tier: "flex"` and a "resource unavailable" 429 is sent again (RETRY
not spent on it) until answered; PRICE makes `cost_usd` the service's usage at that price; BUDGET
n USD stops the run within one request of its amount and the next run continues without paying
twice; a PRICE per call counts an HTTP operator's calls."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web
from runtime_support import run_operator as run

from dslc.runtime.config import Budget, Column, Enrich, HttpCall, ModelCall, Outcome, Price, Store
from dslc.runtime.limits import tokens
from dslc.runtime.limits.money import NANO, budget_counter
from dslc.runtime.store.open_stores import make_store
from dslc.testing.openai_service import OpenAIService, keyword_labeller, serve_in_thread

_names = iter(range(10**9))
LABELS = keyword_labeller({"category": [("invoice", "billing"), ("", "other")], "urgency": [("down", 5), ("", 2)]})
PRICE = Price(input_per_million=2.0, output_per_million=8.0)


@pytest.fixture(autouse=True)
def four_characters_a_token(monkeypatch):
    """dslc's estimate as the test service counts (tiktoken, when installed, counts otherwise)."""
    monkeypatch.setattr(tokens, "_encoder", None)
    monkeypatch.setattr(tokens, "_encoder_looked_up", True)


def model(base_url: str, **kw: Any) -> Enrich:
    kw.setdefault("name", f"labelled{next(_names)}")
    return Enrich(line=3, call=ModelCall("gpt-test", base_url, "Subject: {subject}", "You label tickets."),
                  returns=(Column("category", "STRING"), Column("urgency", "INT")), key_columns=("subject",),
                  timeout_s=20.0, **kw)


def _cost(stats: dict, price: Price = PRICE) -> float:
    return price.cost(0, stats["prompt_tokens"], stats["completion_tokens"])


def test_flex_requests_carry_the_tier_and_unavailable_ones_are_sent_again():
    rows = [{"subject": f"invoice {i}"} for i in range(20)]
    with serve_in_thread(OpenAIService(labeller=LABELS, flex_unavailable=0.25)) as running:
        op, out = run(model(running.base_url, tier="FLEX", capacity=4), rows)
        stats = running.stats
        tiers = running.service.stats["tiers"]
    assert sorted(r["subject"] for r in out.rows) == sorted(r["subject"] for r in rows)
    assert all(r["category"] == "billing" for r in out.rows)
    assert stats["flex_requests"] == 20 + stats["flex_unavailable"] and stats["flex_unavailable"] >= 5
    assert tiers == ["flex"] * 20                          # every answered request asked for flex
    m = op.metrics()
    assert m["throttled"] == stats["flex_unavailable"] and m["retries"] == 0 and m["errors"] == 0


def test_a_flex_request_refused_for_another_reason_is_the_elements_error():
    # a server whose slots are all busy answers 429 `rate_limit_exceeded`: RETRY and ON ERROR decide, as on STANDARD
    with serve_in_thread(OpenAIService(labeller=LABELS, max_concurrent=0)) as running:
        op, out = run(model(running.base_url, tier="FLEX", on_error=Outcome.NULL), [{"subject": "x"}])
        assert running.stats["rejected"] == 1 and out.rows[0]["category"] is None
        assert op.metrics()["errors"] == 1


def test_price_makes_the_cost_of_what_the_service_billed():
    rows = [{"subject": f"the site is down {i} " + "x" * i} for i in range(15)]
    with serve_in_thread(OpenAIService(labeller=LABELS)) as running:
        op, _ = run(model(running.base_url, price=PRICE), rows)
        stats = running.stats
    assert op.metrics()["cost_usd"] == pytest.approx(_cost(stats), rel=1e-9) and _cost(stats) > 0


def test_a_usd_budget_stops_within_one_request_and_the_next_run_continues(tmp_path):
    location = str(tmp_path / "answers.db")
    rows = [{"subject": f"ticket {i} " + "y" * (i % 5)} for i in range(30)]
    with serve_in_thread(OpenAIService(labeller=LABELS)) as running:
        first = model(running.base_url, price=PRICE, capacity=1, store=Store(location, run="r1"),
                      budget=Budget(0.001, "USD"))
        op, out = run(first, rows)
        stats = running.stats
        billed = _cost(stats)
        one = billed / stats["chat_calls"] * 2          # a request's cost, with room: prompts differ a little
        assert 0 < len(out.rows) < 30 and op.metrics()["unanswered"] == 30 - len(out.rows)
        assert billed <= 0.001 + one
        assert abs(_counter(location, first) - billed * NANO) <= stats["chat_calls"]     # nano-dollars rounded up
        second = model(running.base_url, name=first.name, price=PRICE, capacity=1, store=Store(location, run="r2"),
                       budget=Budget(1, "USD"))
        _, rest = run(second, rows)
        assert len(rest.rows) == 30 and running.stats["chat_calls"] == 30    # nothing paid twice


def _counter(location: str, config: Enrich) -> int:
    async def read() -> int:
        store = make_store(location)
        await store.open()
        try:
            return await store.spend(budget_counter(config.name, config.store.run), 0)
        finally:
            await store.close()
    return asyncio.run(read())


def test_a_price_per_call_counts_an_http_operators_calls(serve_app):
    async def answer(request):
        return web.json_response({"tier": "gold"})

    app = web.Application()
    app.router.add_get("/c/{id}", answer)
    server = serve_app(app)
    config = Enrich(name=f"looked{next(_names)}", line=1, call=HttpCall(f"http://127.0.0.1:{server.port}/c/{{id}}"),
                    returns=(Column("tier", "STRING"),), key_columns=("id",), price=Price(per_call=0.25))
    op, out = run(config, [{"id": str(i)} for i in range(6)])
    assert len(out.rows) == 6 and op.metrics()["cost_usd"] == pytest.approx(1.5)
