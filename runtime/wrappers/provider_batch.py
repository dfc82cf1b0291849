"""TIER BATCH in the job's pass over the rows: the provider's batch has answered before the pass
(runtime/batches/), so a row whose answer is in the answer store finds it there (STORE, outside
this wrapper) and sends nothing. A row that gets here had no answer from the batch:

- its line failed in this run: with ON BATCH FAILURE ONLINE it is sent online now (the inner
  call, at the STANDARD price); otherwise the element gets the batch's error (`BatchLineFailed`,
  not retried: the batch has sent it twice already) and ON ERROR decides;
- it was never in a batch: a BUDGET kept it out (`BudgetSpent`: the row is left unanswered, the
  run stops with exit code 3 and the next run sends it), or it could not make a request (a null
  placeholder: the inner call's own error, before anything is sent).
"""
from __future__ import annotations

import json
from typing import Any

from dslc.runtime.calls.base import CallError, EnrichCall
from dslc.runtime.calls.errors import ANSWER, REQUEST
from dslc.runtime.config import Enrich
from dslc.runtime.core.operator import Row
from dslc.runtime.limits.budget import BudgetSpent
from dslc.runtime.limits.money import amount_text
from dslc.runtime.store.base import AnswerStore
from dslc.runtime.store.ledger import FAILED, ONLINE, LineRecord, custom_id
from dslc.runtime.store.open_stores import store_for
from dslc.runtime.store.per_step import PerStep, unique
from dslc.runtime.wrappers.delegating import DelegatingCall


class BatchLineFailed(CallError):
    """The provider's batch could not answer the element's request (twice): its error, not retried
    in this pass (calls/errors.py): `answer` when what it answered did not fit RETURNS (`raw`),
    else `request`, as the same request gets the same failure until the next run sends it."""

    def __init__(self, message: str, raw: str | None = None) -> None:
        super().__init__(message, raw=raw, error_class=ANSWER if raw is not None else REQUEST)


def wrap(call: EnrichCall, config: Enrich) -> EnrichCall:
    """The call of a TIER BATCH operator's pass (any other call as it is)."""
    return ProviderBatchCall(call, config) if config.tier == "BATCH" and config.store is not None else call


class ProviderBatchCall(DelegatingCall):
    """What a row without a stored answer gets in a TIER BATCH operator's pass (loop thread only)."""

    def __init__(self, inner: EnrichCall, config: Enrich) -> None:
        super().__init__(inner)
        assert config.store is not None
        self.config = config
        self.run = config.store.run
        self._store: AnswerStore | None = None
        self._lines: PerStep[str, LineRecord | None] = PerStep(self._lines_many)

    async def _lines_many(self, ids: list[str]) -> list[LineRecord | None]:
        if self._store is None:
            self._store = await store_for(self.config.store.location)
        found = await self._store.lines(self.config.name, unique(ids))
        return [found.get(i) for i in ids]

    async def __call__(self, row: Row) -> Any:
        key = self.inner.request_key(row)
        if key is None:
            return await self.inner(row)        # a null placeholder: the call's own error, nothing sent
        line = await self._lines(custom_id(key))
        if line is not None and line.run == self.run:
            if line.state == ONLINE:
                return await self.inner(row)
            if line.state == FAILED:
                message, raw = _error(line.error)
                raise BatchLineFailed(message, raw=raw)
        if self.config.budget is not None:
            budget = self.config.budget
            raise BudgetSpent(f"BUDGET {amount_text(budget.amount)} {budget.unit} of '{self.config.name}' is spent: "
                              "its provider batch did not take this request")
        raise BatchLineFailed("no answer from the provider's batch for this request (run the job again to send it)")


def _error(text: str | None) -> tuple[str, str | None]:
    """A failed line's error as the runner wrote it (batches/runner.py): its message and raw answer."""
    try:
        error = json.loads(text or "")
        return str(error.get("message")), error.get("raw")
    except (ValueError, AttributeError):
        return text or "the provider's batch could not answer this request", None
