"""ON OUTAGE PAUSE | FAIL as a hold: an attempt that failed the way a service that is down fails
is told to the breaker (limits/outage.py), and the element waits and tries again from its first
attempt instead of its RETRY or ON ERROR going on, while the failure may be the service's; a
TIMEOUT may be the service's too. Any answer ends the streak. A call held so is no error: it is
counted as `outage_held`, by which the diagnosis names the outage."""
from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from dslc.runtime.limits.outage import OutageBreaker, is_outage_error
from dslc.runtime.metrics import OperatorMetrics
from dslc.runtime.policies.base import AGAIN, AttemptPolicy, Element


class OutageHold(AttemptPolicy):
    def __init__(self, breaker: OutageBreaker, retries: int, timeout_s: float, metrics: OperatorMetrics) -> None:
        self.breaker = breaker
        self.metrics = metrics
        self.retries = retries
        self.timeout_s = timeout_s
        self._holding: dict[int, int] = {}     # id(row) -> breaker.answered when it began to hold

    def admit(self, row: Any) -> Awaitable[None] | None:
        return self.breaker.admit() if self.breaker.open else None

    def before(self, element: Element) -> Awaitable[None] | None:
        rejoin = element.rejoin
        if rejoin is None:
            return None
        element.rejoin = None
        element.readmit = True    # then RATE and ADAPTIVE admit it as a first attempt
        return rejoin

    def failed(self, element: Element, exc: BaseException, error_class: str) -> str | None:
        if not is_outage_error(exc):
            self.breaker.succeeded()     # the service answered, with an error of the element
            return None
        rejoin = self._hold(element, exc)
        if rejoin is None:
            return None
        element.held += 1
        element.rejoin = rejoin
        self.metrics.add("outage_held")
        return AGAIN

    def _hold(self, element: Element, exc: BaseException) -> Awaitable[None] | None:
        """Tell the breaker, and say whether the element tries again: what to wait for first
        (its attempts reset; the wait raises OutageStop when the breaker fails the task), or None
        (RETRY goes on, or the failure is the element's and ON ERROR decides)."""
        breaker, attempts = self.breaker, element.attempts
        breaker.failed(exc)
        mark = self._holding.setdefault(id(element.row), breaker.answered)
        if not breaker.open:
            if attempts[0] <= self.retries:
                return None             # RETRY goes on as usual
            if breaker.answered_since(mark):
                self._holding.pop(id(element.row), None)
                return None             # others are answered: this element's failure
            attempts[0] = 0
            return breaker.settle(element.held)
        attempts[0] = 0
        return breaker.admit()

    def answered(self, element: Element) -> None:
        self.breaker.succeeded()
        self._holding.pop(id(element.row), None)

    def timed_out(self, row: Any, rounds: int) -> Awaitable[None] | None:
        """A TIMEOUT may be the service's: hold the element (to be resolved again under a
        TIMEOUT of its own) up to the breaker's threshold of rounds while it is not open."""
        breaker = self.breaker
        holding = self._holding.pop(id(row), None)
        if holding is None and not breaker.open:      # a call timed out (not a hold)
            breaker.failed(f"timed out after {self.timeout_s:g}s")
        if breaker.open or (rounds < breaker.config.threshold
                            and not breaker.answered_since(holding if holding is not None else breaker.answered)):
            self.metrics.add("outage_held")
            return breaker.admit() if breaker.open else breaker.settle(rounds)
        return None
