"""RETRY as Beam's Repeater: counts an element's attempts, waits its backoff (at least what a
Retry-After asked) before each retry, and says whether an error or a miss calls again. A
Retry-After the element's TIMEOUT cannot wait out is not waited for: the element's TIMEOUT
outcome decides at once, naming it (#48 item 2), instead of a bare timeout when it runs out."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable

from dslc.runtime.calls import errors
from dslc.runtime.config import Enrich, Outcome
from dslc.runtime.metrics import OperatorMetrics
from dslc.runtime.policies.base import AGAIN, EXPIRES, AttemptPolicy, Element


class Repeater(AttemptPolicy):
    """Every ENRICH has one (without RETRY it allows no retry, and still counts attempts)."""

    def __init__(self, config: Enrich, metrics: OperatorMetrics) -> None:
        self.retry = config.retry
        self.retries = config.retry.attempts if config.retry else 0
        self.on_miss = config.on_miss is Outcome.RETRY
        self.metrics = metrics
        self.timeout_s = config.timeout_s

    def before(self, element: Element) -> Awaitable[None] | None:
        attempts = element.attempts
        attempts[0] += 1
        if attempts[0] == 1:
            return None
        self.metrics.add("retries")
        element.readmit = True
        assert self.retry is not None
        delay = max(self.retry.delay(attempts[0] - 1), element.asked)
        return asyncio.sleep(delay) if delay > 0 else None

    def failed(self, element: Element, exc: BaseException, error_class: str) -> str | None:
        if element.attempts[0] <= self.retries and error_class in errors.RETRIED:
            asked = element.asked
            if asked and asked >= self.timeout_s - (time.monotonic() - element.began):
                status = getattr(exc, "status", None)
                element.why = (f"{status or 'an answer'} with Retry-After {asked:g} s exceeds "
                               f"TIMEOUT {self.timeout_s:g}s")
                return EXPIRES
            return AGAIN
        return None

    def missed(self, element: Element) -> str | None:
        return AGAIN if self.on_miss and element.attempts[0] <= self.retries else None
