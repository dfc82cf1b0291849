"""An answer whose service reports no token usage, or zero tokens (#48 item 9): its tokens are
estimated from the request, so BUDGET n TOKENS, TOKENS PER MINUTE and the figures are never
charged nothing, and the run warns once per operator.

The OpenAI-compatible test service always reports usage, so a small service speaking the same
/v1/chat/completions protocol answers without it here: the fault cannot be produced otherwise."""
from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp import web
from runtime_support import run_operator as run
from runtime_support import serving

from dslc.runtime.config import Column, Enrich, ModelCall
from dslc.runtime.metrics import merge, usage_estimated_warnings

USAGES = {"none": None, "zero": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
          "real": {"prompt_tokens": 40, "completion_tokens": 6, "total_tokens": 46}}


async def _chat(request: web.Request) -> web.Response:
    body = await request.json()
    subject = body["messages"][-1]["content"].split(": ", 1)[1]
    answer: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-test",
                              "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                  "role": "assistant", "content": json.dumps({"category": "billing"})}}]}
    if USAGES[subject] is not None:
        answer["usage"] = USAGES[subject]
    return web.json_response(answer)


@pytest.fixture
def service():
    with serving("/v1/chat/completions", _chat) as base_url:
        yield base_url


def _config(base_url: str) -> Enrich:
    return Enrich(name="labelled", line=4, returns=(Column("category", "STRING"),), key_columns=("id",),
                  timeout_s=10.0, capacity=1, call=ModelCall("gpt-test", base_url, "Subject: {subject}"))


def test_missing_or_zero_usage_is_estimated_from_the_request_and_warned_once(service) -> None:
    op, out = run(_config(service), [{"id": "a", "subject": "none"}, {"id": "b", "subject": "zero"}])
    metrics = op.metrics()
    assert len(out.rows) == 2
    assert metrics["usage_estimated"] == 2
    assert metrics["prompt_tokens"] > 0 and metrics["total_tokens"] > metrics["prompt_tokens"]   # a completion assumed
    two_tasks = {"labelled": merge(metrics, metrics)}
    [warning] = usage_estimated_warnings(two_tasks)
    assert "'labelled'" in warning and "for 4 answer(s)" in warning


def test_reported_usage_is_trusted_and_no_warning_is_given(service) -> None:
    op, _ = run(_config(service), [{"id": "c", "subject": "real"}])
    metrics = op.metrics()
    assert metrics["total_tokens"] == 46 and "usage_estimated" not in metrics
    assert usage_estimated_warnings({"labelled": metrics}) == []
