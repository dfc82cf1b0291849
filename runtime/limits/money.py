"""Money: what an operator's calls cost at its PRICE, and BUDGET n USD.

PRICE is what a call of the operator's own TIER costs. FLEX and BATCH cost half of STANDARD (the
providers' published discount), so the other tiers' prices follow from it: the online calls of
a TIER BATCH operator (lines its batch could not answer, sent online with ON BATCH FAILURE
ONLINE) are billed at STANDARD, twice its PRICE.

BUDGET n USD works as BUDGET n TOKENS does (limits/token_budget.py): before a request is sent its
estimated cost (its prompt's tokens and the completion answers have been taking, at the price
of the tier that answers it) is reserved on the run's counter in the answer store, in
nano-dollars so that every task adds whole numbers; a request that would pass the budget is not
sent (`BudgetSpent`); the answer's `usage` corrects the reservation, a refused request gives it
back. A PRICE per call on an HTTP or PYTHON call makes BUDGET n USD the number of calls it buys
(`call_budget`), held by the answer store as BUDGET n CALLS is.
"""
from __future__ import annotations

import math

from dslc.runtime.config import EmbeddingCall, Enrich, ModelCall, Price
from dslc.runtime.limits.budget import BudgetSpent
from dslc.runtime.limits.store_counter import StoreCounter
from dslc.runtime.secrets import mask_url

DISCOUNT = 0.5                 # FLEX and BATCH against STANDARD
NANO = 1_000_000_000           # the budget counter's unit: a nano-dollar


def amount_text(amount: float) -> str:
    """A BUDGET's amount as written (2000000, 2.5)."""
    return str(int(amount)) if float(amount).is_integer() else str(amount)


def tier_factor(priced: str, billed: str) -> float:
    """What a call billed at tier `billed` costs against the PRICE given for tier `priced`."""
    standard = 1.0 if priced == "STANDARD" else 1.0 / DISCOUNT
    return standard * (1.0 if billed == "STANDARD" else DISCOUNT)


def online_tier(config: Enrich) -> str:
    """The tier an operator's online requests are answered in (a TIER BATCH operator's: STANDARD)."""
    return "STANDARD" if config.tier == "BATCH" else config.tier


def price_at(config: Enrich, tier: str) -> Price | None:
    """The operator's PRICE at another tier (None: no PRICE)."""
    price = config.price
    if price is None:
        return None
    factor = tier_factor(config.tier, tier)
    return Price(per_call=price.per_call * factor, input_per_million=price.input_per_million * factor,
                 output_per_million=price.output_per_million * factor)


def tokens_priced(config: Enrich) -> bool:
    """True when the operator's calls report what they cost (MODEL and EMBEDDING count their own
    money from each answer; other kinds cost PRICE per call)."""
    return isinstance(config.call, (ModelCall, EmbeddingCall))


def calls_cost(config: Enrich, calls: int) -> float | None:
    """USD of `calls` calls of an HTTP or PYTHON operator at its PRICE per call (None: no PRICE)."""
    price = price_at(config, online_tier(config))
    return None if price is None else calls * price.per_call


def call_budget(config: Enrich) -> int | None:
    """The calls an operator may make in one run when the answer store counts them: BUDGET n
    CALLS, or BUDGET n USD at a PRICE per call of an HTTP or PYTHON call (None: not counted so)."""
    budget = config.budget
    if budget is None:
        return None
    if budget.unit == "CALLS":
        return int(budget.amount)
    price = price_at(config, online_tier(config))
    if budget.unit == "USD" and price is not None and not tokens_priced(config) and price.per_call:
        return max(0, math.floor(budget.amount / price.per_call + 1e-9))
    return None


def money_budget(config: Enrich) -> MoneyBudget | None:
    """The USD budget of a MODEL or EMBEDDING operator (None without BUDGET n USD)."""
    budget = config.budget
    price = price_at(config, online_tier(config))
    if budget is None or budget.unit != "USD" or config.store is None or price is None or not tokens_priced(config):
        return None
    return MoneyBudget(config.name, budget.amount, price, config.store.location, config.store.run)


def budget_counter(operator: str, run: str) -> str:
    """The answer store's counter of an operator's BUDGET n USD in one run (nano-dollars)."""
    return f"budget-usd:{operator}:{run}"


class MoneyBudget:
    """One operator instance's view of the run's money counter (loop thread only)."""

    def __init__(self, operator: str, amount: float, price: Price, location: str, run: str) -> None:
        self.operator = operator
        self.amount = amount
        self.limit = round(amount * NANO)
        self.price = price
        self.location = location
        self.counter = budget_counter(operator, run)
        self.spent = False
        self._counter = StoreCounter(location, self.counter)

    def nano(self, prompt_tokens: int, completion_tokens: int) -> int:
        """A request's cost in nano-dollars."""
        return math.ceil(self.price.cost(1, prompt_tokens, completion_tokens) * NANO)

    async def reserve(self, prompt_tokens: int, completion_tokens: int) -> int:
        """Take a request's estimated cost before it is sent (what was taken), else BudgetSpent."""
        reserved = self.nano(prompt_tokens, completion_tokens)
        if not self.spent:
            if await self._counter.spend(reserved) <= self.limit:
                return reserved
            self.spent = True
            await self._counter.spend(-reserved)
        raise BudgetSpent(f"BUDGET {amount_text(self.amount)} USD of '{self.operator}' is spent")

    async def settle(self, reserved: int, prompt_tokens: int | None, completion_tokens: int | None) -> None:
        """The answer's usage replaces the reservation (no usage: the estimate stays spent)."""
        if prompt_tokens is None and completion_tokens is None:
            return
        actual = self.nano(prompt_tokens or 0, completion_tokens or 0)
        if actual != reserved:
            await self._counter.spend(actual - reserved)

    async def refund(self, reserved: int) -> None:
        """A request the service refused cost nothing."""
        await self._counter.spend(-reserved)


def budget_message(config: Enrich, unanswered: int, scope: str = "") -> str:
    """What the run says when a BUDGET stops it."""
    budget = config.budget
    assert budget is not None
    rows = f"{unanswered} row{'s' if unanswered != 1 else ''}{scope}"
    return (f"BUDGET {amount_text(budget.amount)} {budget.unit} of '{config.name}' (line {config.line}) is spent: {rows} "
            f"still unanswered; every answer received is in the answer store {mask_url(config.store.location) if config.store else ''}: "
            "run the same command again to continue (it pays for nothing twice)")
