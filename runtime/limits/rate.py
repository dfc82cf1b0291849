"""RATE n PER SECOND: an async token bucket, so a task never calls faster than its share.

Tokens refill continuously at `rate` per second up to `burst`. A caller that finds no token
takes one on credit (the balance goes negative) and sleeps until its token would have arrived,
which serves waiters in FIFO order without a lock (the bucket lives on one event loop).
"""
from __future__ import annotations

import asyncio
import time

from dslc.runtime.config import Rate
from dslc.runtime.limits import waits


class TokenBucket:
    """Async token bucket with `rate` tokens per second and at most `burst` saved up."""

    def __init__(self, rate: float, burst: float = 1.0) -> None:
        if rate <= 0:
            raise ValueError("rate must be > 0")
        self.rate = rate
        self.burst = max(1.0, burst)
        self._tokens = self.burst
        self._stamp = time.monotonic()
        self.waited_seconds = 0.0

    def _refill(self, now: float) -> None:
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    def reserve(self) -> float:
        """Take one token now; returns how many seconds the caller must wait before using it."""
        self._refill(time.monotonic())
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    async def acquire(self) -> None:
        """Wait until one token is available and take it."""
        wait = self.reserve()
        if wait > 0:
            self.waited_seconds += wait
            waits.add(wait)         # the element's: not its call's latency
            await asyncio.sleep(wait)


def bucket_for(rate: Rate) -> TokenBucket:
    """The bucket of one task for a RATE clause (burst of one token: no initial spike)."""
    return TokenBucket(rate.task_rate, burst=1.0)
