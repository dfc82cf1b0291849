"""CAPACITY n ADAPTIVE: the in-flight limit of one task moves between 1 and n (AIMD).

As TCP's congestion window: it starts small and doubles per round of answers (slow start)
until the service first pushes back; from then on it grows by one per round of answers
(additive increase) and shrinks to BACKOFF_FACTOR of itself (multiplicative decrease) when a call
gets HTTP 429 or 503 or times out. One push-back per round counts: the calls that were already
in flight when the limit shrank answer for the old limit, so their 429s do not shrink it again
(`epoch`). Loop thread only.
"""
from __future__ import annotations

BACKOFF_FACTOR = 0.7
START = 2.0


class AdaptiveLimit:
    """The current in-flight limit of one operator instance."""

    __slots__ = ("maximum", "value", "epoch", "slow_start", "lowest")

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        self.value = min(float(maximum), START)
        self.epoch = 0            # bumped at each decrease
        self.slow_start = True
        self.lowest = self.value

    @property
    def limit(self) -> int:
        """Elements that may be in flight now (at least 1)."""
        return max(1, int(self.value))

    def succeeded(self) -> None:
        """A call answered: grow (by one per answer in slow start, by one per round after)."""
        step = 1.0 if self.slow_start else 1.0 / self.value
        self.value = min(float(self.maximum), self.value + step)

    def overloaded(self, epoch: int) -> None:
        """A call that started in `epoch` got 429/503 or timed out: shrink, once per round."""
        if epoch != self.epoch:
            return
        self.slow_start = False
        self.value = max(1.0, self.value * BACKOFF_FACTOR)
        self.lowest = min(self.lowest, self.value)
        self.epoch += 1
