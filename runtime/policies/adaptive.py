"""CAPACITY n ADAPTIVE as admission: each attempt holds a slot of the adaptive limit only while
its request is out (not while it sleeps before a retry); push-back (429/503, a TIMEOUT) lowers the
limit, told against the epoch the attempt was sent in, and an answer raises it."""
from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from dslc.runtime.calls.base import CallError
from dslc.runtime.limits.adaptive import AdaptiveLimit
from dslc.runtime.policies.base import AttemptPolicy, Element


class AdaptiveAdmission(AttemptPolicy):
    def __init__(self, limit: AdaptiveLimit) -> None:
        self.limit = limit

    def admit(self, row: Any) -> Awaitable[None] | None:
        return self.limit.acquire()

    def before(self, element: Element) -> Awaitable[None] | None:
        if element.readmit:
            return self._acquire(element)
        element.epoch = self.limit.epoch
        return None

    async def _acquire(self, element: Element) -> None:
        await self.limit.acquire()
        element.epoch = self.limit.epoch

    def failed(self, element: Element, exc: BaseException, error_class: str) -> str | None:
        if isinstance(exc, CallError) and exc.overload:
            self.limit.overloaded(element.epoch)
            self.limit.pause(element.asked)
        return None

    def answered(self, element: Element) -> None:
        self.limit.succeeded()

    def released(self, element: Element) -> None:
        self.limit.release()

    def expired(self, epoch: int) -> None:
        self.limit.overloaded(epoch)
