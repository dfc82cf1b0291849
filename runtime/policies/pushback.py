"""What a failed attempt says about the service: 429 and 5xx answers counted for the diagnosis
(`pushed_back`, `answered_429`, and `elements_5xx` once per element: one key's 500s are not an
overload), and an overloaded service's Retry-After kept on the element for RETRY and ADAPTIVE."""
from __future__ import annotations

from dslc.runtime.calls.base import CallError
from dslc.runtime.metrics import OperatorMetrics
from dslc.runtime.policies.base import AttemptPolicy, Element


class PushBack(AttemptPolicy):
    def __init__(self, metrics: OperatorMetrics) -> None:
        self.metrics = metrics

    def failed(self, element: Element, exc: BaseException, error_class: str) -> str | None:
        if not isinstance(exc, CallError):
            element.asked = 0.0
            return None
        status = exc.status
        if status is not None and (status == 429 or status >= 500):
            counters = self.metrics.counters
            counters["pushed_back"] += 1
            if status == 429:
                counters["answered_429"] += 1
            elif not element.met_5xx:
                element.met_5xx = True
                counters["elements_5xx"] += 1
        element.asked = (exc.retry_after_s or 0.0) if exc.overload else 0.0
        return None
