"""RATE as admission (Beam's Throttler): a token before an element's first attempt and before
each retry. An element whose answer the call has without calling (STORE's `lookup`) takes none."""
from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from dslc.runtime.limits.job_rate import JobRate
from dslc.runtime.limits.rate import TokenBucket
from dslc.runtime.policies.base import AttemptPolicy, Element


class RateAdmission(AttemptPolicy):
    """Takes a RATE token per call sent, from `bucket` (this task's share, or the job's RATE)."""

    def __init__(self, bucket: TokenBucket | JobRate, lookup: Any = None) -> None:
        self.bucket = bucket
        self.lookup = lookup    # async (row) -> bool: the answer is had without a call

    def admit(self, row: Any) -> Awaitable[None] | None:
        if self.lookup is None or row is None:
            return self.bucket.acquire()
        return self._unless_known(row)

    async def _unless_known(self, row: Any) -> None:
        if not await self.lookup(row):
            await self.bucket.acquire()

    def before(self, element: Element) -> Awaitable[None] | None:
        return self.bucket.acquire() if element.readmit else None
