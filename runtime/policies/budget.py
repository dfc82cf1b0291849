"""BUDGET: an attempt refused because the operator's budget is spent (`BudgetSpent`, raised by
the store's call budget or the token budget) leaves its element unanswered; in STREAMING a task
that left rows unanswered fails at the end of its input, so its micro-batch does not commit
without them (a rerun replays it and finds the answers received in the store)."""
from __future__ import annotations

from dslc.runtime.config import Enrich
from dslc.runtime.limits.budget import BudgetSpent
from dslc.runtime.limits.money import budget_message
from dslc.runtime.metrics import OperatorMetrics
from dslc.runtime.policies.base import UNANSWERED, AttemptPolicy, Element


class BudgetWatch(AttemptPolicy):
    def __init__(self, config: Enrich, metrics: OperatorMetrics) -> None:
        self.config = config
        self.metrics = metrics

    def failed(self, element: Element, exc: BaseException, error_class: str) -> str | None:
        if isinstance(exc, BudgetSpent):
            self.metrics.add("unanswered")
            return UNANSWERED
        return None

    def at_end(self) -> None:
        budget = self.config.budget
        unanswered = self.metrics.counters["unanswered"]
        if budget is not None and budget.stop_task and unanswered:
            raise BudgetSpent(budget_message(self.config, unanswered, " of this task"))
