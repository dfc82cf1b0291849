"""A gateway's rate-limit headers in the spellings gateways use (#48 item 8): LiteLLM's per-key
`x-ratelimit-api_key-remaining-requests` (and its other scopes), OpenAI's, and the IETF draft's
`ratelimit-remaining`. dslc holds its requests when the service says none is left instead of
sending requests bound to get a 429.

The gateway here counts requests in fixed windows and answers 429 past its limit, as LiteLLM
does with a key's rpm_limit; the OpenAI-compatible test service speaks OpenAI's spelling only."""
from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web
from runtime_support import run_operator as run
from runtime_support import serving

from dslc.runtime.config import Column, Enrich, ModelCall, Outcome
from dslc.runtime.limits import rate_headers
from dslc.runtime.limits.tokens import UNSAID_RESET_S, TokenLimiter

LIMIT, WINDOW_S = 3, 1.0


def litellm(remaining: int, reset_s: float) -> dict[str, str]:
    """A key's limit and a looser model limit (the tighter binds), the reset as a duration."""
    return {"x-ratelimit-api_key-limit-requests": str(LIMIT), "x-ratelimit-api_key-remaining-requests": str(remaining),
            "x-ratelimit-api_key-reset-requests": f"{reset_s:.3f}s",
            "x-ratelimit-model_per_key-remaining-requests": str(remaining + 100),
            "x-ratelimit-api_key-remaining-tokens": "90000"}


def ietf(remaining: int, reset_s: float) -> dict[str, str]:
    """The IETF draft's names, the reset in whole seconds from now."""
    return {"RateLimit-Limit": str(LIMIT), "RateLimit-Remaining": str(remaining),
            "RateLimit-Reset": str(math.ceil(reset_s))}


class Gateway:
    """LIMIT requests a window of WINDOW_S (from the window's first request); more get a 429."""

    def __init__(self, spelling: Callable[[int, float], dict[str, str]]) -> None:
        self.spelling = spelling
        self.start: float | None = None
        self.count = self.requests = self.refused = 0

    async def chat(self, request: web.Request) -> web.Response:
        await request.read()
        now = time.monotonic()
        if self.start is None or now - self.start >= WINDOW_S:
            self.start, self.count = now, 0
        self.count += 1
        self.requests += 1
        reset_s = self.start + WINDOW_S - now
        if self.count > LIMIT:
            self.refused += 1
            return web.json_response({"error": {"message": "Max requests per minute reached", "type": "None",
                                                "code": "429"}}, status=429,
                                     headers={"Retry-After": str(math.ceil(reset_s))})
        answer: dict[str, Any] = {
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-test",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": json.dumps({"category": "billing"})}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}}
        return web.json_response(answer, headers=self.spelling(LIMIT - self.count, reset_s))


@pytest.mark.parametrize("spelling", [litellm, ietf])
def test_the_gateways_remaining_requests_hold_dslc_before_a_429(spelling) -> None:
    gateway = Gateway(spelling)
    with serving("/v1/chat/completions", gateway.chat) as base_url:
        config = Enrich(name="labelled", line=4, returns=(Column("category", "STRING"),), key_columns=("id",),
                        timeout_s=30.0, capacity=2, on_error=Outcome.DEAD_LETTER,
                        call=ModelCall("gpt-test", base_url, "Subject: {subject}"))
        op, out = run(config, [{"id": f"t{i}", "subject": f"s{i}"} for i in range(3 * LIMIT)])
    assert len(out.rows) == 3 * LIMIT and out.dead_letters == []
    assert gateway.refused == 0 and gateway.requests == 3 * LIMIT
    assert op.metrics().get("throttled", 0) == 0


def test_the_tightest_scope_binds_and_its_reset_is_read_in_any_form() -> None:
    left = rate_headers.read(litellm(0, 0.25))
    assert left["requests"] == rate_headers.Left(0.0, 0.25) and left["tokens"].remaining == 90000
    assert rate_headers.read({"x-ratelimit-remaining-requests": "4", "x-ratelimit-reset-requests": "6m0s"}) == \
        {"requests": rate_headers.Left(4.0, 360.0)}
    assert rate_headers.read({"llm_provider-x-ratelimit-remaining-tokens": "7"})["tokens"].remaining == 7
    unix = rate_headers.read({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + 30)})
    assert 25 < unix["requests"].reset_s <= 30


def test_no_request_left_without_a_reset_holds_the_task_for_a_minute() -> None:
    """LiteLLM's per-key headers say what is left, not when it comes back."""
    limiter = TokenLimiter(per_second=None)
    limiter.observe({"x-ratelimit-api_key-remaining-requests": "0", "x-ratelimit-api_key-limit-requests": "5"})
    assert limiter.not_before - time.monotonic() > UNSAID_RESET_S - 5
