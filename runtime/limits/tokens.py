"""TOKENS PER MINUTE, and the limits a model service states in its answers.

A model service limits requests and tokens per minute. RATE's request bucket (limits/rate.py)
holds the first; `TokenLimiter` holds the second for one task: before a request is sent its
tokens are estimated (the prompt's, from its length or with `tiktoken` when it is installed and
has its encoding at hand, plus the completion tokens answers have been taking) and taken from a
bucket that refills at the task's share of the limit and holds two seconds of it (services hold
a minute; two seconds let a task use a service's burst without a spike of its own); the answer's `usage` then corrects the
estimate, and a 429 gives the tokens back (the service charged nothing).

What the service says is honoured for every request of the task, not only the one it answered:
`Retry-After` (or `retry-after-ms`) on a 429, and `x-ratelimit-remaining-requests|tokens` of 0,
hold every request until `x-ratelimit-reset-*` has passed; a remaining token count below the
bucket's lowers it, so a service shared with others is not overrun.

Per task for now: the job-wide limiter arrives with the answer store (RATE with ANSWERS).
"""
from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Mapping
from typing import Any

from dslc.runtime.limits import rate_headers, waits
from dslc.runtime.limits.retry_after import retry_after_s

_MESSAGE_OVERHEAD = 4       # tokens a chat message costs beyond its text (role, separators)
_FIRST_COMPLETION_GUESS = 16
#: How long a task holds when a service says no request is left without saying when that changes
#: (LiteLLM's per-key headers carry no reset): the minute its limits are counted over.
UNSAID_RESET_S = 60.0


def _tiktoken_encoder():
    """cl100k_base when tiktoken is installed and its encoding file is at hand (no network)."""
    try:
        import tiktoken

        return tiktoken.get_encoding("cl100k_base")
    except Exception:  # noqa: BLE001 - not installed, or it would have to download its file
        return None


_encoder = None
_encoder_looked_up = False


def text_tokens(text: str) -> int:
    """Tokens of a text: tiktoken's count when available, else 4 characters a token."""
    global _encoder, _encoder_looked_up
    if not _encoder_looked_up:
        _encoder, _encoder_looked_up = _tiktoken_encoder(), True
    if _encoder is not None:
        return len(_encoder.encode(text, disallowed_special=()))
    return max(1, math.ceil(len(text) / 4))


def message_tokens(texts: list[str]) -> int:
    """Prompt tokens of chat messages with these texts."""
    return sum(text_tokens(t) + _MESSAGE_OVERHEAD for t in texts)


_TYPICAL = {"string": "x" * 8, "integer": 12, "number": 0.5, "boolean": True}


def _typical(schema: dict) -> Any:
    kind = schema.get("type")
    kind = next((k for k in kind if k != "null"), None) if isinstance(kind, list) else kind
    if kind == "object":
        return {name: _typical(prop) for name, prop in schema.get("properties", {}).items()}
    if kind == "array":
        return [_typical(schema.get("items", {}))] * 2
    return _TYPICAL.get(kind, "x" * 8)


def assumed_completion(returns: tuple) -> int:
    """Completion tokens of one answer when nothing better is known (`dslc explain --estimate`
    without a recording, a provider batch's budget): the RETURNS object as JSON with 8-character
    strings, two-digit numbers and two-item lists."""
    from dslc.runtime.schema.json_schema import returns_schema

    try:
        return text_tokens(json.dumps(_typical(returns_schema(returns))))
    except Exception:  # noqa: BLE001 - a RETURNS with no JSON form is refused by the checker
        return text_tokens(json.dumps({c.name: "x" * 8 for c in returns}))


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds a 429 asks to wait: `retry-after-ms` (OpenAI's, precise), else `Retry-After`."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    return retry_after_s(headers.get("Retry-After"))


class TokenLimiter:
    """One task's token budget (`per_second`, None: no TOKENS PER MINUTE) and the pauses the
    service asks for; on one event loop, no lock needed."""

    def __init__(self, per_second: float | None, burst_s: float = 2.0) -> None:
        self.rate = per_second
        self.capacity = max(1.0, (per_second or 0.0) * burst_s)
        self.level = self.capacity
        self._stamp = time.monotonic()
        self.not_before = 0.0
        self.completion_mean = float(_FIRST_COMPLETION_GUESS)
        self.waited_seconds = 0.0
        self.requests_left: float | None = None     # what the service said is left, less what was sent since
        self.requests_reset_at = 0.0
        self.in_flight = 0

    def estimate(self, prompt_tokens: int, completes: bool = True) -> int:
        """A request's tokens before it is sent: its prompt and the completion answers take."""
        return prompt_tokens + (math.ceil(self.completion_mean) if completes else 0)

    def _refill(self, now: float) -> None:
        if self.rate is not None:
            self.level = min(self.capacity, self.level + (now - self._stamp) * self.rate)
        self._stamp = now

    async def acquire(self, tokens: int) -> float:
        """Wait for any pause the service asked for and for a request the service said is left,
        then take `tokens` (on credit: the balance may go negative, and the caller sleeps until
        its tokens would have arrived). The request is in flight until `done()`. Returns the
        seconds waited, also noted as the element's wait (limits/waits.py: not its latency)."""
        started = time.monotonic()
        element = waits.current()
        while True:
            now = time.monotonic()
            if now < self.not_before:
                await asyncio.sleep(self.not_before - now)
                continue
            if self._no_request_left(now):
                continue
            self.in_flight += 1
            if self.requests_left is not None:
                self.requests_left -= 1
            if self.rate is None:
                break
            self._refill(now)
            self.level -= tokens
            if self.level < 0:
                try:
                    await asyncio.sleep(-self.level / self.rate)
                except BaseException:       # cancelled: never sent
                    self.done()
                    raise
            break
        waited = time.monotonic() - started
        self.waited_seconds += waited
        waits.add(waited, element)
        return waited

    def _no_request_left(self, now: float) -> bool:
        """True (and a pause until the service's reset) when no request it said is left remains;
        after the reset nothing is known until the next answer says."""
        if self.requests_left is None or self.requests_left >= 1:
            return False
        reset_at = self.requests_reset_at if self.requests_reset_at > now else now + UNSAID_RESET_S
        self.not_before = max(self.not_before, reset_at)
        self.requests_left = None
        return True

    def done(self) -> None:
        """A request acquired is answered or failed (sent or not)."""
        self.in_flight = max(0, self.in_flight - 1)

    def settle(self, estimate: int, prompt_tokens: int | None, completion_tokens: int | None) -> None:
        """The answer's usage corrects the estimate (more spent: less left; less: given back)."""
        if completion_tokens is not None:
            self.completion_mean += (completion_tokens - self.completion_mean) * 0.2
        if prompt_tokens is None and completion_tokens is None:
            return
        actual = (prompt_tokens or 0) + (completion_tokens or 0)
        self._refill(time.monotonic())
        self.level -= actual - estimate

    def refund(self, estimate: int) -> None:
        """A request the service refused (429) cost nothing."""
        self._refill(time.monotonic())
        self.level = min(self.capacity, self.level + estimate)

    def pause(self, seconds: float) -> None:
        """Send nothing more for `seconds` (Retry-After, a spent limit)."""
        if seconds > 0:
            self.not_before = max(self.not_before, time.monotonic() + seconds)

    def observe(self, headers: Mapping[str, str]) -> None:
        """What the service says of its limits in an answer's rate-limit headers, in any of the
        common spellings (limits/rate_headers.py): the requests left, less those still in flight,
        are all this task sends until the reset; tokens left below the bucket's lower it."""
        left = rate_headers.read(headers)
        now = time.monotonic()
        requests = left.get("requests")
        if requests is not None:
            others = max(0, self.in_flight - 1)      # sent before this answer, perhaps not counted yet
            self.requests_left = requests.remaining - others
            self.requests_reset_at = now + requests.reset_s if requests.reset_s is not None else 0.0
            self._no_request_left(now)      # none left: every request of the task holds from now
        tokens = left.get("tokens")
        if tokens is None:
            return
        if tokens.remaining <= 0:
            self.pause(tokens.reset_s if tokens.reset_s is not None else UNSAID_RESET_S)
        elif self.rate is not None and tokens.remaining < self.level:
            self._refill(now)
            self.level = min(self.level, tokens.remaining)
