"""The hooks an attempt policy may have, and the state of one element they share.

`core/resolution.ElementResolver` keeps, for each hook, the policies that define it (in the
order they are given) and calls them around every attempt of an element:

- `admit(row)` once, before the first attempt and outside TIMEOUT (waiting for quota is not the
  call); `before(element)` before each attempt the resolver sends itself. Either returns an
  awaitable to wait for, or None (nothing to wait for, which costs no coroutine);
- `failed(element, exc, error_class)` after an attempt that raised: `AGAIN` (try again),
  `UNANSWERED` (the element is left unanswered), `EXPIRES` (its TIMEOUT outcome decides now,
  for the reason in `element.why`), or None (no say: the next policy decides, and
  with none the ON ERROR policy does);
- `missed(element)` after an attempt with no result: `AGAIN` or None (ON MISS decides);
- `answered(element)` after an attempt the service answered (a result or a miss);
- `released(element)` after every attempt, however it ended;
- `timed_out(row, rounds)` when the element's TIMEOUT ran out: an awaitable to wait for before
  the element is resolved again from its first attempt, or None;
- `expired(epoch)` when the TIMEOUT cut a call the operator carried (ADAPTIVE's push-back);
- `at_end()` once at the end of the task's input, which it may stop by raising.

A policy overrides only the hooks it needs (`hooks` finds them), so an ENRICH without RETRY,
RATE or ON OUTAGE pays for none of theirs.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

AGAIN = "again"             # `failed`/`missed`: send the element's call again
UNANSWERED = "unanswered"   # `failed`: the element is left unanswered (BUDGET spent)
EXPIRES = "expires"         # `failed`: the element's TIMEOUT cannot be kept (`Element.why` says why)


class Element:
    """One element's attempts as the policies see them (made once per element that calls)."""

    __slots__ = ("row", "attempts", "began", "asked", "held", "met_5xx", "rejoin", "readmit", "epoch", "why")

    def __init__(self, row: Any, attempts: list[int], began: float = 0.0) -> None:
        self.row = row
        self.attempts = attempts   # [calls made]: shared with the operator, which reads it on TIMEOUT
        self.began = began         # time.monotonic() when its TIMEOUT began (about: its first attempt)
        self.asked = 0.0           # the last answer's Retry-After: wait at least this long
        self.held = 0              # extra tries while a failure may be the service's (ON OUTAGE)
        self.met_5xx = False       # a 5xx answer was met (counted once per element)
        self.rejoin: Awaitable[None] | None = None   # held by ON OUTAGE: what to wait for first
        self.readmit = False       # this attempt is admitted again (a retry, or back from a hold)
        self.epoch = 0             # ADAPTIVE: the limit's epoch when the attempt was sent
        self.why = ""              # EXPIRES: why the TIMEOUT outcome decides before the TIMEOUT


class AttemptPolicy:
    """A policy around an element's attempts; every hook is optional (see the module)."""

    def admit(self, row: Any) -> Awaitable[None] | None:
        return None

    def before(self, element: Element) -> Awaitable[None] | None:
        return None

    def failed(self, element: Element, exc: BaseException, error_class: str) -> str | None:
        return None

    def missed(self, element: Element) -> str | None:
        return None

    def answered(self, element: Element) -> None:
        return None

    def released(self, element: Element) -> None:
        return None

    def timed_out(self, row: Any, rounds: int) -> Awaitable[None] | None:
        return None

    def expired(self, epoch: int) -> None:
        return None

    def at_end(self) -> None:
        return None


def hooks(policies: Sequence[AttemptPolicy], name: str) -> tuple[Callable[..., Any], ...]:
    """The bound `name` hooks of the policies that define one, in order."""
    default = getattr(AttemptPolicy, name)
    return tuple(getattr(p, name) for p in policies if getattr(type(p), name) is not default)
