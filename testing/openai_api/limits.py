"""Requests and tokens per minute, limited as OpenAI limits them: each limit a bucket that refills
continuously; a request the buckets cannot pay is answered 429 with `Retry-After`,
`retry-after-ms` and the `x-ratelimit-*` headers, which every answer carries."""
from __future__ import annotations

import math
import time

from aiohttp import web


class Bucket:
    """A limit per minute that refills continuously and holds `burst_s` seconds of it."""

    def __init__(self, per_minute: float, burst_s: float) -> None:
        self.per_minute = per_minute
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * burst_s)
        self.level = self.capacity
        self.stamp = time.monotonic()

    def refill(self) -> None:
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait_for(self, amount: float) -> float:
        """Seconds until `amount` can be paid (0: now); an amount above the capacity waits for a full bucket."""
        missing = min(amount, self.capacity) - self.level
        return 0.0 if missing <= 0 else missing / self.rate

    def reset_s(self) -> float:
        """Seconds until the bucket is full again."""
        return (self.capacity - self.level) / self.rate


def duration(seconds: float) -> str:
    """A reset time as OpenAI writes it: `20ms`, `1.5s`, `6m0s`."""
    if seconds < 1:
        return f"{max(0, math.ceil(seconds * 1000))}ms"
    if seconds < 60:
        return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m{rest:.0f}s"


def limit_headers(requests: Bucket | None, tokens: Bucket | None) -> dict[str, str]:
    headers = {}
    for kind, bucket in (("requests", requests), ("tokens", tokens)):
        if bucket is not None:
            bucket.refill()
            headers[f"x-ratelimit-limit-{kind}"] = str(int(bucket.per_minute))
            headers[f"x-ratelimit-remaining-{kind}"] = str(max(0, int(bucket.level)))
            headers[f"x-ratelimit-reset-{kind}"] = duration(bucket.reset_s())
    return headers


def too_many(message: str, kind: str, headers: dict[str, str]) -> web.Response:
    """A 429 with OpenAI's error body (`rate_limit_exceeded`)."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": "rate_limit_exceeded"}}
    return web.json_response(body, status=429, headers=headers)
