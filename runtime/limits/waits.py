"""The time one element spends waiting to be let through (RATE's tokens, TOKENS PER MINUTE, a
limit the service stated) rather than in its call, so that its latency is the call's alone and the
wait is reported apart (`rate_wait_seconds`; the diagnosis's `rate`).

A token wait happens inside a MODEL call, after the element was admitted: counted as latency it
made a gateway answering in under a second look like a 100 s one, and the run look limited by its
input. The element's call task holds the element's `Waits` in a context variable while it runs it
(core/element_calls.py); the limiters add what they waited to it.
"""
from __future__ import annotations

from contextvars import ContextVar


class Waits:
    """Seconds one element waited for admission, over its attempts."""

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds = 0.0


_CURRENT: ContextVar[Waits | None] = ContextVar("dslc_element_waits", default=None)


def enter(waits: Waits) -> None:
    """The element whose call runs from here on (in this task) is `waits`'s."""
    _CURRENT.set(waits)


def current() -> Waits | None:
    """The running element's waits (None outside an element's call: a batch's flush)."""
    return _CURRENT.get()


def add(seconds: float, waits: Waits | None = None) -> None:
    """Note `seconds` of waiting for the running element (or for `waits`, taken earlier)."""
    waits = waits if waits is not None else _CURRENT.get()
    if waits is not None and seconds > 0:
        waits.seconds += seconds
