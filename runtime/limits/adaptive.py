"""CAPACITY n ADAPTIVE: the limit of one task's requests in flight moves between 1 and n (AIMD).

As TCP's congestion window: it starts small and doubles per round of answers (slow start)
until the service first pushes back; from then on it grows by one per round of answers
(additive increase) and shrinks to BACKOFF_FACTOR of itself (multiplicative decrease) when a call
gets HTTP 429 or 503 or times out. One push-back per round counts: the calls that were already
in flight when the limit shrank answer for the old limit, so their 429s do not shrink it again
(`epoch`).

The limit counts *requests*, as the service does: an element takes a slot for each attempt and
gives it back when the answer arrives, so an element sleeping before a retry (BACKOFF,
Retry-After) leaves its slot to another. A Retry-After on a 429/503 also pauses every new attempt
of the task until then (`pause`): the service said when to come back, and asking again sooner
only earns more 429s. Loop thread only.
"""
from __future__ import annotations

import asyncio
from collections import deque

# the saw-tooth runs between BACKOFF_FACTOR and 1 of the service's share: 0.8 keeps the mean
# near the share while 429s stay a few percent (bench section 9: 0.7 gave 77% of L / latency and
# 1.7% 429s, 0.8 gave 80% and 2.4%)
BACKOFF_FACTOR = 0.8
START = 2.0


class AdaptiveLimit:
    """The current limit of requests in flight of one operator instance, and the slots taken."""

    __slots__ = ("maximum", "value", "epoch", "slow_start", "lowest", "in_flight", "resume_at", "_waiters")

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        self.value = min(float(maximum), START)
        self.epoch = 0            # bumped at each decrease
        self.slow_start = True
        self.lowest = self.value
        self.in_flight = 0        # slots taken (acquire .. release)
        self.resume_at = 0.0      # loop time before which no attempt starts (Retry-After)
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def limit(self) -> int:
        """Requests that may be in flight now (at least 1)."""
        return max(1, int(self.value))

    # ------------------------------------------------------------------ the AIMD steps

    def succeeded(self) -> None:
        """A call answered: grow (by one per answer in slow start, by one per round after)."""
        step = 1.0 if self.slow_start else 1.0 / self.value
        self.value = min(float(self.maximum), self.value + step)
        self._wake()

    def overloaded(self, epoch: int) -> None:
        """A call that started in `epoch` got 429/503 or timed out: shrink, once per round."""
        if epoch != self.epoch:
            return
        self.slow_start = False
        self.value = max(1.0, self.value * BACKOFF_FACTOR)
        self.lowest = min(self.lowest, self.value)
        self.epoch += 1

    def pause(self, seconds: float) -> None:
        """The service asked to come back in `seconds` (Retry-After): no new attempt before then."""
        if seconds > 0:
            self.resume_at = max(self.resume_at, asyncio.get_running_loop().time() + seconds)

    # ------------------------------------------------------------------ slots

    async def acquire(self) -> None:
        """Take a slot for one attempt: wait while the limit is reached or a Retry-After runs."""
        loop = asyncio.get_running_loop()
        while True:
            wait = self.resume_at - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            if self.in_flight < self.limit:
                self.in_flight += 1
                return
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._wake()             # woken, then cancelled: pass the wake-up on
                else:
                    try:
                        self._waiters.remove(waiter)
                    except ValueError:
                        pass
                raise

    def release(self) -> None:
        """Give the slot of a finished attempt back."""
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        """Wake as many waiters as there are free slots (each one checks again)."""
        free = self.limit - self.in_flight
        waiters = self._waiters
        while free > 0 and waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                free -= 1
