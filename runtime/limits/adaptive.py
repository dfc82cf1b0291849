"""CAPACITY n ADAPTIVE: the limit of one task's requests in flight moves between 1 and n (AIMD).

As TCP's congestion window: it starts small and doubles per round of answers (slow start)
until the service first pushes back, which halves it (back to the last round that answered
without push-back, TCP's ssthresh, instead of stepping down by BACKOFF_FACTOR round after round
of 429s); from then on it grows by one per round of answers (additive increase) and shrinks to
BACKOFF_FACTOR of itself (multiplicative decrease) when a call gets HTTP 429 or 503 or times out.

Near a level that got a 429 (`ceiling`), additive increase waits: the limit stays one below it
for PROBE_ROUNDS rounds of answers before it tries that level again. At a small limit (a service
that takes 4 requests at once, 2 tasks: each task between 2 and 3) one more request per round
is a 429 every round or two, most of the requests; with the wait it is one in PROBE_ROUNDS.

With BATCH n the limit counts elements but the service counts requests: a limit of 2n + 1
sends a third request of one element. So at or above n the limit is a whole number of batches
(`batch`), and one more request goes out only when the limit has grown by a whole batch. One push-back per round counts: the calls that were already
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
#: Rounds of answers spent one below a level that got a 429 before trying it again.
PROBE_ROUNDS = 20


class AdaptiveLimit:
    """The current limit of requests in flight of one operator instance, and the slots taken."""

    __slots__ = ("maximum", "batch", "value", "epoch", "slow_start", "lowest", "in_flight", "resume_at",
                 "ceiling", "waited", "_waiters")

    def __init__(self, maximum: int, batch: int = 1) -> None:
        self.maximum = maximum
        self.batch = max(1, batch)    # BATCH n: elements per request
        self.value = min(float(maximum), START)
        self.epoch = 0            # bumped at each decrease
        self.slow_start = True
        self.lowest = self.value
        self.in_flight = 0        # slots taken (acquire .. release)
        self.resume_at = 0.0      # loop time before which no attempt starts (Retry-After)
        self.ceiling = 0          # the limit that last got a push-back (0: none)
        self.waited = 0           # answers spent just below the ceiling
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def limit(self) -> int:
        """Elements whose requests may be in flight now (at least 1; with BATCH n, from n on, a
        multiple of n: whole requests)."""
        value = max(1, int(self.value))
        return value // self.batch * self.batch if value >= self.batch else value

    # ------------------------------------------------------------------ the AIMD steps

    def succeeded(self) -> None:
        """A call answered: grow (by one per answer in slow start, by one per round after; just
        below the ceiling, only after PROBE_ROUNDS rounds there)."""
        step = 1.0 if self.slow_start else 1.0 / self.value
        value = min(float(self.maximum), self.value + step)
        if self.ceiling and value >= self.ceiling:
            self.waited += 1
            if self.waited < PROBE_ROUNDS * self.limit:
                value = max(self.value, self.ceiling - 1e-6)     # stays one level below
            elif value >= self.ceiling + self.batch:
                self.ceiling = 0                                 # the level held: no ceiling now
        self.value = value
        self._wake()

    def overloaded(self, epoch: int) -> None:
        """A call that started in `epoch` got 429/503 or timed out: shrink, once per round."""
        if epoch != self.epoch:
            return
        factor = 0.5 if self.slow_start else BACKOFF_FACTOR
        self.slow_start = False
        self.ceiling, self.waited = self.limit, 0
        self.value = max(1.0, self.value * factor)
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
