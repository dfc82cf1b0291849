"""ON OUTAGE PAUSE d | FAIL: a circuit breaker per operator and task.

A service that is down answers every call the same way (connection refused or reset, a 5xx, a
timeout). Per element, that would dead-letter every row of the run and end with exit 0; the
breaker tells the outage apart: after `threshold` such failures in a row (no call answered in
between) the operator is in an outage. Then

- PAUSE: no element is sent and none is given up: one probe call goes out at growing intervals
  (0.5 s, 1 s, 2 s, ... at most 30 s) and the first one answered ends the outage, and every held
  element is sent again; an outage longer than `d` fails the task as FAIL does.
- FAIL: the task fails with `OutageStop`, naming the operator, its line and the last error.

Before the count is reached, an element whose last attempt failed that way is not given to ON
ERROR while the failure may still be the service's: it tries again (short, growing pauses) until
its call is answered, the breaker opens, or another element's call was answered since its own
first failure (then the failure is the element's, and ON ERROR decides as without ON OUTAGE).

Everything here runs on the worker's event loop (one task's operator): no locks.
"""
from __future__ import annotations

import asyncio
import time

from dslc.runtime.config import Outage

try:    # executors have aiohttp; a Python-only worker need not
    from aiohttp import ClientConnectionError, ServerTimeoutError
    _CONNECTION_ERRORS: tuple[type[BaseException], ...] = (ClientConnectionError, ServerTimeoutError,
                                                           ConnectionError, TimeoutError)
except ImportError:     # pragma: no cover
    _CONNECTION_ERRORS = (ConnectionError, TimeoutError)

FIRST_PROBE_S = 0.5
MAX_PROBE_S = 30.0


class OutageStop(BaseException):
    """The operator's service is down (ON OUTAGE FAIL, or PAUSE for longer than d): the task
    fails. A BaseException on purpose: no ON ERROR policy may make it a dead letter or a NULL."""


def is_outage_error(exc: BaseException) -> bool:
    """Connection refused or reset, a 5xx answer, or a timeout: what a service that is down gives."""
    status = getattr(exc, "status", None)
    if isinstance(status, int):
        return status >= 500
    return isinstance(exc, _CONNECTION_ERRORS)


class OutageBreaker:
    """The breaker of one operator in one task (see the module's docstring)."""

    def __init__(self, config: Outage, operator: str, line: int, clock=time.monotonic) -> None:
        self.config = config
        self.operator = operator
        self.line = line
        self.clock = clock
        self.failures = 0               # outage-kind failures in a row
        self.answered = 0               # calls answered so far (marks for `answered_since`)
        self.last_error = ""
        self.opened_at: float | None = None
        self.outages = 0                # times the breaker opened (a metric)
        self._probe_at = 0.0
        self._interval = FIRST_PROBE_S
        self._probing = False
        self._closed: asyncio.Event | None = None

    @property
    def open(self) -> bool:
        """True during an outage."""
        return self.opened_at is not None

    # ---- outcomes of calls
    def succeeded(self) -> None:
        """A call was answered (any answer, a miss or an error that is not the service's): the
        streak ends, and an outage too."""
        self.failures = 0
        self.answered += 1
        self._probing = False
        if self.opened_at is not None:
            self.opened_at = None
            self._interval = FIRST_PROBE_S
            if self._closed is not None:
                self._closed.set()
                self._closed = None

    def failed(self, exc: BaseException | str) -> None:
        """A call failed the way a service that is down fails."""
        self.failures += 1
        self.last_error = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
        if self._probing:               # the probe failed: wait longer before the next one
            self._probing = False
            self._interval = min(self._interval * 2, MAX_PROBE_S)
            self._probe_at = self.clock() + self._interval
        elif self.opened_at is None and self.failures >= self.config.threshold:
            self.opened_at = self.clock()
            self.outages += 1
            self._probe_at = self.opened_at + self._interval

    def answered_since(self, mark: int) -> bool:
        """True when some call was answered after `mark` (a value of `answered`)."""
        return self.answered > mark

    # ---- admission
    async def admit(self) -> None:
        """Return when this element may send its call: at once while the service is not in an
        outage; during one, when it is this element's turn to probe or the outage ended. Raises
        OutageStop for FAIL, or for PAUSE once the outage lasted longer than d."""
        while self.opened_at is not None:
            if self.config.action == "FAIL":
                raise self.stop()
            now = self.clock()
            if now - self.opened_at > self.config.pause_s:
                raise self.stop(f"paused {self.config.pause_s:g}s without an answer")
            if not self._probing and now >= self._probe_at:
                self._probing = True     # this element's call is the probe
                return
            if self._closed is None:
                self._closed = asyncio.Event()
            wait = (self._probe_at - now) if not self._probing else self.config.pause_s
            wait = max(0.01, min(wait, self.opened_at + self.config.pause_s - now + 0.01))
            try:
                await asyncio.wait_for(self._closed.wait(), wait)
            except TimeoutError:
                pass

    async def settle(self, tries: int) -> None:
        """Before the `tries`-th extra try of an element whose failure may be the service's: a
        short pause, growing (0.1 s, 0.2 s, ... at most 2 s), then `admit`."""
        await asyncio.sleep(min(0.1 * 2 ** min(tries, 5), 2.0))
        await self.admit()

    def stop(self, why: str | None = None) -> OutageStop:
        """The failure of the task: operator, line, the last error."""
        what = why or f"{self.config.threshold} calls in a row failed"
        return OutageStop(f"ENRICH '{self.operator}' (line {self.line}): the service is down (ON OUTAGE "
                          f"{self.config.action}): {what}; last error: {self.last_error}")


def breaker_for(config: Outage | None, operator: str, line: int) -> OutageBreaker | None:
    """The operator's breaker, or None for CONTINUE (the default)."""
    return OutageBreaker(config, operator, line) if config is not None else None
