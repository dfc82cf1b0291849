"""Refused credentials and a service never answered (core/refusals.py's `RefusalGuard`) as an
attempt policy: told of every attempt's outcome, it stops the run when they are due; until a
first answer its gate admits elements one share at a time."""
from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from dslc.runtime.limits.budget import BudgetSpent
from dslc.runtime.policies.base import AttemptPolicy, Element


class RefusalWatch(AttemptPolicy):
    def __init__(self, guard: Any) -> None:
        self.guard = guard     # a core.refusals.RefusalGuard

    def admit(self, row: Any) -> Awaitable[None] | None:
        return self.guard.admit() if self.guard.gated else None

    def before(self, element: Element) -> Awaitable[None] | None:
        if element.readmit:
            self.guard.check()
        return None

    def failed(self, element: Element, exc: BaseException, error_class: str) -> str | None:
        if isinstance(exc, BudgetSpent):
            self.guard.not_sent()
        else:
            self.guard.failed_call(error_class, exc)    # raises the run's stop when it is due
        return None

    def answered(self, element: Element) -> None:
        self.guard.succeeded_call()

    def timed_out(self, row: Any, rounds: int) -> Awaitable[None] | None:
        self.guard.timed_out()
        return None

    def at_end(self) -> None:
        self.guard.at_end()
