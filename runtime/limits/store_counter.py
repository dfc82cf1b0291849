"""A job-wide counter kept in the answer store, spent from many elements at once: the amounts a
loop step spends go to the store in one round trip (PerStep), and each caller gets the running
total right after its own amount, as if it had spent alone. TOKENS and USD budgets count with it."""
from __future__ import annotations

from dslc.runtime.store.base import AnswerStore
from dslc.runtime.store.open_stores import store_for
from dslc.runtime.store.per_step import PerStep


class StoreCounter:
    """Counter `name` of the store at `location`, opened on the first spend."""

    def __init__(self, location: str, name: str) -> None:
        self.location = location
        self.name = name
        self._store: AnswerStore | None = None
        self._spends: PerStep[int, int] = PerStep(self._spend_many)

    async def spend(self, amount: int) -> int:
        """Add `amount` (negative: give it back); the counter's total right after it."""
        return await self._spends(amount)

    async def _spend_many(self, amounts: list[int]) -> list[int]:
        """One store round trip for the amounts of a loop step; the running total after each."""
        if self._store is None:
            self._store = await store_for(self.location)
        total = await self._store.spend(self.name, sum(amounts))
        out, running = [], total - sum(amounts)
        for amount in amounts:
            running += amount
            out.append(running)
        return out
