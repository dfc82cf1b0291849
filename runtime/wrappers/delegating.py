"""A call adapter that wraps another (BATCH's gathering, recording, replay) is still an
`EnrichCall`, so the operator and the element resolver need not know it is there: what it does
not change, it hands to the adapter it wraps."""
from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from dslc.runtime.calls.base import EnrichCall
from dslc.runtime.core.operator import Row


class DelegatingCall(EnrichCall):
    """An adapter around `inner`: the user's `timeout(row)`, open/close, the CACHE key and the
    clients are `inner`'s; a subclass overrides what it changes."""

    def __init__(self, inner: EnrichCall) -> None:
        self.inner = inner

    @property
    def timeout_handler(self) -> Any:  # type: ignore[override]
        return self.inner.timeout_handler

    @property
    def counts_own_calls(self) -> bool:  # type: ignore[override]
        return self.inner.counts_own_calls

    @property
    def gathers(self) -> bool:  # type: ignore[override]
        return self.inner.gathers

    @property
    def rate_bucket(self) -> Any:  # type: ignore[override]
        return self.inner.rate_bucket

    @property
    def prefetch(self) -> Any:  # type: ignore[override]
        return self.inner.prefetch

    @property
    def known_answer(self) -> Any:  # type: ignore[override]
        return self.inner.known_answer

    @property
    def lookup(self) -> Any:  # type: ignore[override]
        return self.inner.lookup

    def end_of_input(self) -> None:
        self.inner.end_of_input()

    def bind_metrics(self, metrics: Any) -> None:
        self.metrics = metrics
        self.inner.bind_metrics(metrics)

    def open(self) -> None:
        self.inner.open()

    def close(self) -> None:
        self.inner.close()

    def cache_key(self, row: Row) -> Hashable | None:
        return self.inner.cache_key(row)

    def request_key(self, row: Row) -> str | None:
        return self.inner.request_key(row)

    def request_columns(self) -> tuple[str, ...] | None:
        return self.inner.request_columns()

    async def aclose_clients(self) -> None:
        await self.inner.aclose_clients()

    def batch_item(self, answer: Any) -> Any:
        return self.inner.batch_item(answer)
