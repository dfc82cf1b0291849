"""BUDGET n TOKENS: the most tokens one MODEL or EMBEDDING operator spends in one run, job-wide.

A model's bill is known only from its answer (`usage`), but a budget must stop a request before
it is sent. So each request first reserves its estimated tokens (the prompt's, counted as
limits/tokens.py counts them, plus the completion tokens answers have been taking) on the run's
counter in the answer store, which every task and executor shares; a request whose reservation
takes the counter above the budget is not sent (`BudgetSpent`: the element is left unanswered,
the run stops with exit code 3 as for BUDGET n CALLS) and gives its reservation back. When the
answer comes, its `usage.total_tokens` replaces the estimate (the counter is corrected by the
difference, before the element goes on); a request the service refused (an HTTP error status)
gives its reservation back, since nothing was charged; one whose fate is unknown (a TIMEOUT,
an answer without usage) keeps its estimate.

What this guarantees: every request is admitted only while the tokens answered so far plus the
estimates of the requests in flight, its own included, fit within the budget. So the tokens a
run spends exceed the budget by at most the sum of (actual - estimate) over the requests in
flight when the last one was admitted: the estimate errors of at most CAPACITY requests per
task. Once one request of a task does not fit, that task sends no more.
"""
from __future__ import annotations

from dslc.runtime.config import Enrich
from dslc.runtime.limits.budget import BudgetSpent
from dslc.runtime.limits.store_counter import StoreCounter


def token_budget(config: Enrich) -> TokenBudget | None:
    """The operator's TOKENS budget (None without one: BUDGET n CALLS is the answer store's)."""
    budget = config.budget
    if budget is None or budget.unit != "TOKENS" or config.store is None:
        return None
    return TokenBudget(config.name, budget.amount, config.store.location, config.store.run)


class TokenBudget:
    """One operator instance's view of the run's token counter (loop thread only)."""

    def __init__(self, operator: str, amount: int, location: str, run: str) -> None:
        self.operator = operator
        self.amount = amount
        self.location = location
        self.counter = f"budget-tokens:{operator}:{run}"
        self.spent = False
        self._counter = StoreCounter(location, self.counter)

    async def reserve(self, tokens: int) -> None:
        """Take `tokens` before a request is sent, else BudgetSpent (and nothing is taken)."""
        if not self.spent:
            if await self._counter.spend(tokens) <= self.amount:
                return
            self.spent = True
            await self._counter.spend(-tokens)
        raise BudgetSpent(f"BUDGET {self.amount} TOKENS of '{self.operator}' is spent")

    async def settle(self, reserved: int, actual: int | None) -> None:
        """The answer's usage replaces the reservation (None: not reported, the estimate stays)."""
        if actual is not None and actual != reserved:
            await self._counter.spend(actual - reserved)

    async def refund(self, reserved: int) -> None:
        """A request the service refused cost nothing."""
        await self._counter.spend(-reserved)
