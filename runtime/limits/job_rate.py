"""RATE n PER SECOND for the whole job, held by the answer store (a pipeline with ANSWERS/STORE).

Without a store, each task gets a static share of the rate (`rate.bucket_for`), so a skewed
partition crawls while the quota sits idle. Here every task takes call slots from one schedule
kept in the store: the next free slot advances by 1/rate per call, atomically (SQLite: a write
transaction; Redis: a Lua script on the server's clock), and a caller sleeps until its slot. So
the calls of the whole job are spaced 1/rate apart whichever tasks make them (GCRA with a burst
of one). Slots taken by calls in one loop step are taken in one request.

Accuracy: slots are exact in the store; a call starts after its slot by its store round trip
and the loop's scheduling delay (well under a millisecond with SQLite, one network round trip
with Redis), so any one second sees at most rate + 1 calls plus the calls of slots taken late,
and a slot taken by an element whose TIMEOUT ran out is lost (the job then runs slightly under
the rate).
"""
from __future__ import annotations

import asyncio

from dslc.runtime.limits import waits
from dslc.runtime.store.open_stores import store_for
from dslc.runtime.store.per_step import PerStep


class JobRate:
    """The job-wide bucket of one operator: `acquire()` as `rate.TokenBucket`'s."""

    def __init__(self, location: str, name: str, per_second: float) -> None:
        self.location = location
        self.name = f"rate:{name}"
        self.per_second = per_second
        self.waited_seconds = 0.0
        self._slots: PerStep[int, float] = PerStep(self._reserve)

    async def _reserve(self, asks: list[int]) -> list[float]:
        store = await store_for(self.location)
        first = await store.reserve(self.name, self.per_second, len(asks))
        return [first + i / self.per_second for i in range(len(asks))]

    async def acquire(self) -> None:
        """Wait for this call's slot of the job's rate."""
        wait = await self._slots(1)
        if wait > 0:
            self.waited_seconds += wait
            waits.add(wait)         # the element's: not its call's latency
            await asyncio.sleep(wait)
