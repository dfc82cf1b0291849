"""The TIMEOUTs of one ENRICH operator's calls: one timer for all, cancelling the call task of an
element whose TIMEOUT ran out (loop thread only).

Every element of an operator has the same TIMEOUT, so deadlines armed as calls start are already
in order, and one timer for the earliest serves them all: this costs far less per element than
an `asyncio.timeout()` each. TIMEOUT covers the whole retry loop; waiting for the first RATE
token comes before it.
"""
from __future__ import annotations

import asyncio
import collections


class Deadline:
    """When one element's TIMEOUT runs out, the call task running it, and whether its call is
    over (`done`) or was cut by the TIMEOUT (`expired`)."""

    __slots__ = ("at", "task", "done", "expired")

    def __init__(self, at: float, task: asyncio.Task[None]) -> None:
        self.at = at
        self.task = task
        self.done = False
        self.expired = False


class Deadlines:
    """The deadlines of the calls in flight, in the order of `at`, and the one timer."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._pending: collections.deque[Deadline] = collections.deque()
        self._reaper: asyncio.TimerHandle | None = None

    def arm(self, task: asyncio.Task[None], at: float) -> Deadline:
        """Watch the TIMEOUT, running out at loop time `at`, of the element call task `task` is
        running now (armed in the order of `at`)."""
        deadline = Deadline(at, task)
        pending = self._pending
        while pending and pending[0].done:   # keep the queue as short as the calls in flight
            pending.popleft()
        pending.append(deadline)
        if self._reaper is None:
            self._reaper = self._loop.call_at(at, self._reap)
        return deadline

    def _reap(self) -> None:
        """Cancel every call whose TIMEOUT ran out; wake up again at the next deadline."""
        now = self._loop.time()
        pending = self._pending
        while pending and (pending[0].done or pending[0].at <= now):
            deadline = pending.popleft()
            if not deadline.done:
                deadline.expired = True
                deadline.task.cancel()
        self._reaper = self._loop.call_at(pending[0].at, self._reap) if pending else None

    def clear(self) -> None:
        """Forget every deadline and stop the timer (the calls are being cancelled)."""
        self._pending.clear()
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
