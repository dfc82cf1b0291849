"""A model that changed under an operator: the answered `model` or `system_fingerprint` of a fresh
answer differs from the one the answer store holds for the same operator (#46 item 2).

Providers move an alias (`gpt-4.1-mini`) to a new snapshot, or change a snapshot's backend (its
fingerprint), without a word; answers stored earlier then came from another model than the ones
paid for now. With STORE, each MODEL or EMBEDDING operator keeps the identity of the model that
last answered it beside its answers (an entry of its own in the store), and the first fresh
answer of a task compares its own with it: a difference is counted once in the operator's
metrics (`model_change`), which the run prints as a warning and the report shows.
"""
from __future__ import annotations

import asyncio
from typing import Any

from dslc.runtime.config import EmbeddingCall, Enrich, ModelCall
from dslc.runtime.metrics import OperatorMetrics
from dslc.runtime.schema.provenance import NOTE
from dslc.runtime.store.base import AnswerStore

#: the store's "operator" under which an operator's model identity is kept (not a STREAM name)
IDENTITY = "{operator}#model"
_KEY = "answered"


def watched(config: Enrich) -> bool:
    """Whether this operator's answers name a model to watch (MODEL or EMBEDDING with STORE)."""
    return config.store is not None and isinstance(config.call, (ModelCall, EmbeddingCall))


def identity(value: Any) -> tuple[str | None, str | None] | None:
    """(model, system_fingerprint) a fresh answer's note names, or None (no note, no model)."""
    item = value[0] if isinstance(value, list) and value else value
    said = item.get(NOTE) if isinstance(item, dict) else None
    if not isinstance(said, dict) or said.get("model") is None:
        return None
    return said.get("model"), said.get("system_fingerprint")


def shown(ident: tuple[str | None, str | None]) -> str:
    model, fingerprint = ident
    return f"{model}" + (f" ({fingerprint})" if fingerprint else "")


class ModelWatch:
    """Compares one operator instance's fresh answers with the identity stored for the operator."""

    def __init__(self, config: Enrich, metrics: OperatorMetrics) -> None:
        self.name = IDENTITY.format(operator=config.name)
        self.metrics = metrics
        self.known: tuple[str | None, str | None] | None = None
        self._checking: asyncio.Future[None] | None = None

    async def seen(self, store: AnswerStore, value: Any) -> None:
        """A fresh answer arrived: compare its model with the stored one (first answer of this
        instance, and whenever it differs from the last one seen here), keep the newer."""
        ident = identity(value)
        if ident is None or ident == self.known:
            return
        if self._checking is not None and not self._checking.done():
            await asyncio.shield(self._checking)     # one look-up at a time per instance
            if ident == self.known:
                return
        self._checking = asyncio.ensure_future(self._compare(store, ident))
        await asyncio.shield(self._checking)

    async def _compare(self, store: AnswerStore, ident: tuple[str | None, str | None]) -> None:
        found = (await store.get_many(self.name, [_KEY], None)).get(_KEY)
        before = tuple(found.value) if found is not None and isinstance(found.value, list) else None
        if before is not None and before != ident and self.metrics.model_change is None:
            self.metrics.model_change = f"{shown(before)} -> {shown(ident)}"
        self.known = ident
        if before != ident:
            await store.put_many(self.name, [(_KEY, list(ident))], None)
