"""What MODEL and EMBEDDING share: one request to an OpenAI-compatible API, its limits and its
tokens.

`OpenAICompatibleCall.post(path, body, prompt_tokens)` takes the request's estimated tokens from
the task's `TokenLimiter` (limits/tokens.py), sends the JSON body on the operator's session
(calls/sessions.py, as HTTP does), and returns the JSON answer. Every answer's `usage` is counted
in the operator's metrics (`prompt_tokens`, `completion_tokens`, `total_tokens`) before the
answer is judged, since a refused or truncated answer is paid as well; a 429 is counted as
`throttled`, gives its tokens back and holds the task's requests for its Retry-After.

With PRICE each answer's cost is added to the operator's `cost_usd` (limits/money.py), and
BUDGET n USD reserves a request's estimated cost before it is sent. TIER FLEX: when flex has
no capacity (a 429 `resource_unavailable`, not charged) the request is sent again after a pause
growing from its Retry-After to 30 s, for as long as the element's TIMEOUT lets it.
"""
from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Hashable, Mapping
from typing import Any

import yarl

from dslc.runtime.config import Enrich
from dslc.runtime.core.operator import Row
from dslc.runtime.limits.money import money_budget, online_tier, price_at
from dslc.runtime.limits.token_budget import token_budget
from dslc.runtime.limits.tokens import TokenLimiter, retry_after
from dslc.runtime.secrets import Secrets

from . import error_body, sessions
from .base import CallError, EnrichCall, UnsendableRequest, answer_error, hashable_key, to_json
from .prompt import UnfillableText, fill
from .url import placeholders, redact_url

_JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}
RESOURCE_UNAVAILABLE = "resource_unavailable"     # flex's 429: no capacity now, nothing charged
FLEX_PAUSE_S = (0.5, 30.0)                        # first and longest pause before a flex request is sent again


class FlexUnavailable(CallError):
    """Flex had no capacity for the request (429 `resource_unavailable`): sent again later."""


class OpenAICompatibleCall(EnrichCall):
    """The request half of MODEL and EMBEDDING (a subclass builds bodies and reads answers)."""

    def __init__(self, config: Enrich) -> None:
        self.config = config
        self.base_url = config.call.base_url.rstrip("/")
        rate = config.rate
        self.tokens = TokenLimiter(rate.task_tokens_per_second if rate is not None else None)
        self.budget = token_budget(config)      # BUDGET n TOKENS: reserved before each request
        self.money = money_budget(config)       # BUDGET n USD: the same, in money
        self.price = price_at(config, online_tier(config))    # what an online answer costs
        self.flex = config.tier == "FLEX"
        # `${NAME}` secrets: filled here, on the executor, from the values the driver shipped;
        # never in an error message, a recording or a dead letter
        secrets = self.secrets = config.secrets or Secrets()
        self.headers = {**_JSON_HEADERS, **{name: secrets.fill(value) for name, value in config.call.headers}}
        self.base_url = secrets.fill(self.base_url)
        self.shown_url = redact_url(config.call.base_url.rstrip("/"))     # as written: ${NAME}, no user:password
        self._session = None

    def cache_key(self, row: Row) -> Hashable | None:
        key = self.config.call.call_key(row)
        return None if None in key.values() else hashable_key(tuple(key.values()))

    def request_columns(self) -> tuple[str, ...] | None:
        """The placeholders of the texts the call key fills (prompt and SYSTEM, or INPUT)."""
        call = self.config.call
        texts = [getattr(call, name, None) or "" for name in call.key_names]
        return tuple(dict.fromkeys(column for text in texts for column in placeholders(text)))

    def fill(self, template: str, row: Row) -> str:
        """A prompt or input filled from the row; a null placeholder is the element's error."""
        try:
            return fill(template, row)
        except UnfillableText as exc:
            raise UnsendableRequest(str(exc)) from None

    def _client(self):
        session = self._session
        if session is None or session.closed:
            # the CAs it trusts: the system's, or OPTIONS (ca_file = ...) / (verify = 'false') as HTTP's
            session = self._session = sessions.session_for(self.config.name, self.config.capacity, self.config.call)
        return session

    def count_usage(self, usage: Any) -> tuple[int | None, int | None]:
        """Add an answer's usage to the operator's token counts; (prompt, completion) tokens."""
        if not isinstance(usage, Mapping):
            return None, None
        prompt = _count(usage.get("prompt_tokens"))
        completion = _count(usage.get("completion_tokens"))
        total = _count(usage.get("total_tokens"))
        if total is None and (prompt is not None or completion is not None):
            total = (prompt or 0) + (completion or 0)
        metrics = self.metrics
        if metrics is not None:
            counters = metrics.counters
            counters["prompt_tokens"] += prompt or 0
            counters["completion_tokens"] += completion or 0
            counters["total_tokens"] += total or 0
        return prompt, completion

    async def post(self, path: str, body: dict[str, Any], prompt_tokens: int, completes: bool) -> dict[str, Any]:
        """POST `body` to `{AT}{path}` within the task's token budget; the JSON answer (a 2xx),
        else CallError (429 and 503 as overload, with the wait the service asked for). TIER FLEX:
        a request flex had no capacity for is sent again after a growing pause."""
        pause = 0.0
        while True:
            try:
                return await self._post_once(path, body, prompt_tokens, completes)
            except FlexUnavailable as exc:
                pause = min(FLEX_PAUSE_S[1], max(exc.retry_after_s or 0.0, FLEX_PAUSE_S[0], pause * 2))
                await asyncio.sleep(pause * random.uniform(0.8, 1.0))

    async def _reserve(self, estimate: int, prompt_tokens: int) -> int:
        """Take a request's tokens and money from the run's budgets before it is sent; the money
        reserved (BudgetSpent: nothing was taken)."""
        budget, money = self.budget, self.money
        if budget is not None:
            await budget.reserve(estimate)
        if money is None:
            return 0
        try:
            return await money.reserve(prompt_tokens, estimate - prompt_tokens)
        except BaseException:
            if budget is not None:
                await budget.refund(estimate)
            raise

    async def _post_once(self, path: str, body: dict[str, Any], prompt_tokens: int,
                         completes: bool) -> dict[str, Any]:
        limiter = self.tokens
        estimate = limiter.estimate(prompt_tokens, completes)
        waited = await limiter.acquire(estimate)
        if self.metrics is not None:        # reported apart from the call's latency (limits/waits.py)
            self.metrics.call_wait_seconds += waited
        try:
            return await self._send(path, body, prompt_tokens, completes, estimate)
        finally:
            limiter.done()

    async def _send(self, path: str, body: dict[str, Any], prompt_tokens: int, completes: bool,
                    estimate: int) -> dict[str, Any]:
        limiter = self.tokens
        budget, money = self.budget, self.money
        try:
            reserved = await self._reserve(estimate, prompt_tokens)
        except BaseException:
            limiter.refund(estimate)        # not sent
            raise
        url = self.base_url + path
        try:
            async with self._client().post(yarl.URL(url, encoded=True), data=to_json(body), headers=self.headers,
                                           allow_redirects=True) as response:
                status = response.status
                headers = response.headers
                limiter.observe(headers)
                if not 200 <= status < 300:
                    text = (await error_body.read(response)).decode("utf-8", "replace")
                    wait = retry_after(headers) if status in (429, 503) else None
                    unavailable = RESOURCE_UNAVAILABLE in text
                    kind = FlexUnavailable if self.flex and status == 429 and unavailable else CallError
                    # the secrets masked in the whole body before it is cut (the error's message shown)
                    message = error_body.shown(text, self.secrets)
                    raise kind(f"HTTP {status} from {self.shown_url}{path}: {message}", status, wait)
                raw = await sessions.read_body(response)
                _raise_error_object(raw, f"HTTP {status} from {self.shown_url}{path}", self.secrets)
        except CallError as exc:
            limiter.refund(estimate)            # nothing was answered, nothing charged
            if budget is not None:
                await budget.refund(estimate)
            if money is not None:
                await money.refund(reserved)
            if exc.status == 429:
                if self.metrics is not None:
                    self.metrics.add("throttled")
                limiter.pause(exc.retry_after_s or 0.0)
            raise
        try:
            answer = json.loads(raw)
        except ValueError as exc:
            limiter.settle(estimate, None, None)
            raise answer_error(f"response body is not JSON: {exc}") from None
        if not isinstance(answer, dict):
            raise answer_error(f"response body is JSON {type(answer).__name__}, expected an object")
        usage = answer.get("usage")
        if _unreported(usage, prompt_tokens):
            usage = self._estimated_usage(prompt_tokens, estimate, completes)
        prompt, completion = self.count_usage(usage)
        self.count_cost(prompt, completion)
        limiter.settle(estimate, prompt, completion if completes else 0)
        if budget is not None:
            await budget.settle(estimate, _total(usage))       # corrected before the element goes on
        if money is not None:
            await money.settle(reserved, prompt, completion)
        return answer

    def _estimated_usage(self, prompt_tokens: int, estimate: int, completes: bool) -> dict[str, int]:
        """The usage of an answer whose service reported none (or zero for a request with a
        prompt: a gateway that does not count): the request's prompt tokens and the completion
        the limiter assumed, counted in `usage_estimated` (the run warns once)."""
        if self.metrics is not None:
            self.metrics.usage_estimated += 1
        completion = max(0, estimate - prompt_tokens) if completes else 0
        return {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
                "total_tokens": prompt_tokens + completion}

    def count_cost(self, prompt: int | None, completion: int | None) -> None:
        """Add an answer's cost at the operator's online PRICE to its `cost_usd`."""
        metrics, price = self.metrics, self.price
        if metrics is not None and price is not None:
            metrics.cost_usd = (metrics.cost_usd or 0.0) + price.cost(1, prompt or 0, completion or 0)

    async def aclose_clients(self) -> None:
        self._session = None
        await sessions.close_session(self.config.name)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _unreported(usage: Any, prompt_tokens: int) -> bool:
    """True when an answer's usage cannot be trusted: none, or zero tokens for a request that
    had a prompt (trusting it would charge nothing to BUDGET n TOKENS)."""
    total = _total(usage)
    return total is None or (total == 0 and prompt_tokens > 0)


def _total(usage: Any) -> int | None:
    """The tokens an answer was billed: `usage.total_tokens`, else prompt + completion (None: no usage)."""
    if not isinstance(usage, Mapping):
        return None
    total = _count(usage.get("total_tokens"))
    if total is not None:
        return total
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    return None if prompt is None and completion is None else (prompt or 0) + (completion or 0)


def _raise_error_object(raw: bytes, where: str, secrets: Secrets) -> None:
    """A 2xx whose body is an error object (`{"error": {"message": ...}}`, as some gateways answer
    a failed upstream call) is the element's `answer` error saying the service's message, not
    "the answer has no choices"; nothing was answered, so nothing is charged."""
    if b'"error"' not in raw:
        return
    try:
        answer = json.loads(raw)
    except ValueError:
        return
    if isinstance(answer, dict) and answer.get("error") and not answer.get("choices") and not answer.get("data"):
        raise answer_error(f"{where} is an error: {error_body.shown(raw, secrets)}")
