"""The call tasks of one ENRICH operator: at most CAPACITY, taking the elements handed to them one
after another (loop thread only).

An element costs no asyncio task of its own: a call that answers without waiting (a lookup
served from memory) costs no task switch, the next element follows in the same loop step. Only
an element about to wait (for its call, or for RATE or ADAPTIVE admission) wakes other tasks
(`hand_on`), so a burst of calls that all wait still starts in one loop step. Idle tasks park on
a future until elements are handed over again.
"""
from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Coroutine
from typing import Any

from dslc.runtime.core.async_queue import ElementEntry

Runner = Callable[[Any, asyncio.Task[None]], Coroutine[Any, Any, None]]


class CallPool:
    """`run(entry, task)` runs an element that has only entered the queue; `carry(waiting, task)`
    carries on a call the operator started itself and that waits. With `gathers` (BATCH) every
    element waits for its batch, and all must join it in the loop round they came: one task each."""

    def __init__(self, capacity: int, gathers: bool, run: Runner, carry: Runner) -> None:
        self.capacity = capacity
        self.gathers = gathers
        self._run = run
        self._carry = carry
        self.inbox: collections.deque[Any] = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake_scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._idle: list[asyncio.Future[bool]] = []
        self._waking = 0   # call tasks woken or started that have not yet looked at the inbox

    @property
    def busy(self) -> bool:
        """Call tasks are alive, or elements wait to be taken."""
        return bool(self._tasks or self.inbox)

    def hand(self, element: ElementEntry | Any, loop: asyncio.AbstractEventLoop) -> None:
        """Hand an element to the call tasks: a burst costs one wake-up, not one each."""
        self.inbox.append(element)
        if not self._wake_scheduled:
            self._wake_scheduled = True
            self._loop = loop
            loop.call_soon(self._wake_pool)

    def _wake_pool(self) -> None:
        """Elements were handed over: make sure a call task will look at the inbox. One is
        enough, it wakes more when its call has to wait (`hand_on`)."""
        self._wake_scheduled = False   # cleared before looking: a later hand reschedules
        if self.gathers:
            self.hand_on()
        elif self.inbox and not self._waking:
            self._wake(1)

    def _wake(self, wanted: int) -> None:
        """Wake up to `wanted` parked call tasks, starting new ones while the pool has room."""
        idle, tasks, loop = self._idle, self._tasks, self._loop
        assert loop is not None
        while wanted and idle:
            wake = idle.pop()
            if not wake.done():
                wake.set_result(True)
                self._waking += 1
                wanted -= 1
        while wanted and len(tasks) < self.capacity:
            tasks.add(loop.create_task(self._call_task()))
            self._waking += 1
            wanted -= 1

    def hand_on(self) -> None:
        """The running call task is about to wait: wake other call tasks for the elements left
        in the inbox."""
        wanted = len(self.inbox) - self._waking
        if wanted > 0:
            self._wake(wanted)

    async def _call_task(self) -> None:
        """One task of the pool: run the inbox's elements one after another, park when it is empty."""
        loop = self._loop
        assert loop is not None
        task = asyncio.current_task()
        assert task is not None
        inbox, idle, run, carry = self.inbox, self._idle, self._run, self._carry
        self._waking -= 1
        try:
            while True:
                while inbox:
                    item = inbox.popleft()
                    if type(item) is ElementEntry:
                        await run(item, task)
                    else:                  # started on the loop by the operator
                        await carry(item, task)
                wake = loop.create_future()
                idle.append(wake)
                await wake
                self._waking -= 1
        finally:
            self._tasks.discard(task)

    async def cancel_all(self) -> None:
        """End every call task (cancelling calls in flight) and wait for them."""
        self.inbox.clear()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2)
        self._tasks.clear()
        self._idle.clear()
        self._waking = 0
