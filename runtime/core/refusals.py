"""A run whose calls cannot be answered stops, instead of dead-lettering every row and ending
with exit 0: refused credentials, and a service that never answered.

Per ENRICH and task, for the kinds of call that reach a service over the network (HTTP, MODEL,
EMBEDDING), the guard counts what the calls got back:

- **refused credentials** (401 or 403, calls/errors.py): when the task's first `share` calls
  were refused and none was answered with a result or a miss, or when JUDGED calls in a row
  were refused, the task fails with `CredentialsRefused`: the job stops (exit 2), naming the
  operator, its line and the headers or URL parameters that carry a `${NAME}` secret (as
  written: the value never shows). The elements refused before are not dead-lettered: the
  failed task commits nothing.
- **a service that never answered** (no connection could be made): after `share` such calls
  with no answer of any kind, the task fails with `ServiceUnreachable` (exit 1). Not under ON
  OUTAGE PAUSE | FAIL, whose breaker (limits/outage.py) decides outages itself.

A task whose input ends with fewer calls than its share judges what it has: every call refused
(or none connected) and none answered stops it the same way (`at_end`).

Until the operator has had an answer other than a refusal, at most `share` calls are out or
refused at once (`admit`), so a wrong token costs `share` calls per task, not CAPACITY or every
row with its retries; the first answer opens the gate for the rest of the task. `share` is
JUDGED divided among the tasks that run at once (runtime/spark/chains.py), at least MIN_SHARE:
on a local run the job as a whole sends at most JUDGED such calls.

Everything here runs on the worker's event loop (one task's operator): no locks.
"""
from __future__ import annotations

import asyncio
import math
import re

from dslc.runtime.calls import errors
from dslc.runtime.calls.url import redact_url
from dslc.runtime.config import EmbeddingCall, Enrich, HttpCall, ModelCall
from dslc.runtime.secrets import names_in, scrub

JUDGED = 10         # calls of an operator judged before the run stops (the job's)
MIN_SHARE = 3       # ... and at least this many per task


class CredentialsRefused(BaseException):
    """The service refused the operator's credentials: the run stops (exit 2). A BaseException
    on purpose: no ON ERROR policy may make it a dead letter or a NULL."""


class ServiceUnreachable(BaseException):
    """No call of the operator could connect to its service: the run stops (exit 1)."""


RUN_STOPS = (CredentialsRefused, ServiceUnreachable)


def share_of(tasks: int) -> int:
    """The calls each of `tasks` tasks running at once may judge."""
    return max(MIN_SHARE, math.ceil(JUDGED / max(1, tasks)))


class RefusalGuard:
    """The guard of one operator in one task (see the module's docstring)."""

    def __init__(self, config: Enrich, share: int) -> None:
        self.config = config
        self.share = share
        self.judges_unreachable = config.outage is None     # ON OUTAGE: the breaker decides
        self.refused = 0            # calls answered 401 / 403
        self.streak = 0             # ... in a row, since the last call answered otherwise
        self.unconnected = 0        # calls that could not connect
        self.succeeded = False      # some call was answered with a result or a miss
        self.answered = False       # some call was answered at all, other than by a refusal
        self.out = 0                # calls let through the gate, not back yet
        self.last_error: BaseException | None = None
        self.stop: BaseException | None = None
        self._opened: asyncio.Event | None = None
        self.on_open = None         # called once when the gate opens (the operator goes back to its fast path)

    def check(self) -> None:
        """Before a retry: raise the run's stop if it was decided meanwhile."""
        if self.stop is not None:
            raise self.stop

    @property
    def gated(self) -> bool:
        """True until the first answer that is not a refusal."""
        return not self.answered

    # ---- the gate
    async def admit(self) -> None:
        """Return when this element's call may go out: while nothing but refusals (or failed
        connections) came back, only while fewer than `share` calls are out or refused."""
        while not self.answered:
            if self.stop is not None:
                raise self.stop
            if self.out + self.refused + self.unconnected < self.share:
                self.out += 1
                return
            if self._opened is None:
                self._opened = asyncio.Event()
            await self._opened.wait()

    def _back(self) -> None:
        if self.out:
            self.out -= 1
        if self._opened is not None:     # a slot freed, or the gate opened, or the run stops
            self._opened.set()
            self._opened = None

    # ---- outcomes of calls
    def succeeded_call(self) -> None:
        """A call was answered with a result or a miss."""
        self.streak = 0
        if not self.succeeded:
            self.succeeded = True
            self._answer()

    def failed_call(self, error_class: str, exc: BaseException) -> None:
        """A call failed with `exc`, an error of `error_class`; raises the run's stop when it is due
        (or already decided)."""
        if self.stop is not None:
            raise self.stop
        if error_class == errors.CREDENTIALS:
            self.refused += 1
            self.streak += 1
            self.last_error = exc
            if (not self.succeeded and self.refused >= self.share) or self.streak >= JUDGED:
                self._stop(self.credentials())
        elif error_class == errors.UNREACHABLE:
            self.unconnected += 1
            self.last_error = exc
            if self.judges_unreachable and not self.answered and not self.refused \
                    and self.unconnected >= self.share:
                self._stop(self.unreachable())
        else:
            self.streak = 0
            self._answer()      # the service answered (with an error of the element, or busy)
        self._back()

    def timed_out(self) -> None:
        """An element's TIMEOUT ran out: its call is no longer out (a slow answer proves nothing)."""
        self._back()

    def not_sent(self) -> None:
        """An admitted element sent nothing (its BUDGET was spent): its place at the gate is free."""
        self._back()

    def _answer(self) -> None:
        if not self.answered:
            self.answered = True
            self._back()
            if self.on_open is not None:
                self.on_open()

    def _stop(self, stop: BaseException) -> None:
        self.stop = stop
        self._back()
        raise stop

    def at_end(self) -> None:
        """The task's input has ended: raise the run's stop if every call it judged was refused
        (or none could connect) and none was answered."""
        if self.stop is not None:
            raise self.stop
        if self.refused and not self.succeeded:
            raise self.credentials()
        if self.unconnected and self.judges_unreachable and not self.answered and not self.refused:
            raise self.unreachable()

    # ---- messages
    def _last(self) -> str:
        """The last refusal or failed connection, as the error messages show it (secrets masked,
        the request as written)."""
        exc = self.last_error
        if exc is None:
            return ""
        text = f"{type(exc).__name__}: {getattr(exc, 'general', None) or exc}"
        return scrub(text, self.config.secrets)[:300]

    def credentials(self) -> CredentialsRefused:
        cfg = self.config
        calls = f"{self.refused} calls were" if self.refused != 1 else "1 call was"
        why = f"{calls} refused in a row" if self.succeeded else f"{calls} refused and none was answered"
        return CredentialsRefused(
            f"ENRICH '{cfg.name}' (line {cfg.line}): the service refused the credentials: {why} "
            f"({self._last()}); the request sends {credentials_in(cfg)}: check the secret's value "
            "(the environment or --secrets FILE); nothing was dead-lettered for these rows")

    def unreachable(self) -> ServiceUnreachable:
        cfg = self.config
        return ServiceUnreachable(
            f"ENRICH '{cfg.name}' (line {cfg.line}): the service never answered: {self.unconnected} "
            f"call{'s' if self.unconnected != 1 else ''} could not connect ({self._last()}); is it running at {service_url(cfg)}? "
            "Nothing was dead-lettered for these rows")


def credentials_in(config: Enrich) -> str:
    """What carries the call's credentials, secrets as written (`${NAME}`): the headers and URL
    query parameters that hold a secret, else 'no ${NAME} secret'."""
    call = config.call
    shown = [f"header '{name}: {value}'" for name, value in getattr(call, "headers", ()) if names_in(value)]
    url = getattr(call, "url", None) or getattr(call, "base_url", "")
    shown += [f"URL parameter '{part}'" for part in re.split(r"[?&]", url.partition("?")[2]) if names_in(part)]
    if names_in(url.partition("?")[0]):
        shown.append("a secret in the URL's path")
    return ", ".join(shown) if shown else "no ${NAME} secret (no HEADERS with one, none in the URL)"


def service_url(config: Enrich) -> str:
    """The service's URL as an error may show it (no credentials, no query)."""
    call = config.call
    return redact_url(getattr(call, "url", None) or getattr(call, "base_url", ""))


def guard_for(config: Enrich) -> RefusalGuard | None:
    """The operator's guard, for the kinds of call that reach a service over the network."""
    if isinstance(config.call, (HttpCall, ModelCall, EmbeddingCall)):
        return RefusalGuard(config, config.judged_calls)
    return None
