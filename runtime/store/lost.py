"""An answer store lost during a run is an outage of the store, never the rows' errors.

A Redis server that goes away mid-run (killed, restarted, its network cut) used to make each
row's store lookup fail, and the row's ON ERROR made it a dead letter: hundreds of rows, keys
already paid for among them, and exit 0. Now every store operation of a running ENRICH goes
through `through`: a failure of the store is retried, reconnecting, for up to WAIT_S; a store
that comes back with its data goes on as if nothing happened, and one that does not come back,
or comes back empty (its answers lost, so the run would pay for them again without saying so),
fails the task with `StoreLost`: the job stops with one line naming the store (exit 1), and
the rows it had not answered are not written anywhere, so a rerun answers them.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from dslc.runtime.secrets import mask_url, scrub

from .base import AnswerStore, StoreError

T = TypeVar("T")

#: How long a lost store is waited for before the run stops (seconds).
WAIT_S = 15.0
#: First and longest pause between attempts to reach it again.
PAUSE_S = (0.1, 2.0)


class StoreLost(BaseException):
    """The answer store went away during the run: the task fails and the run stops (exit 1). A
    BaseException on purpose: no ON ERROR policy may make it a dead letter or a NULL."""


def _failures() -> tuple[type[BaseException], ...]:
    """What a store that cannot be reached raises (Redis's own errors when its client is there)."""
    try:
        from redis.exceptions import RedisError
    except ImportError:
        return (StoreError, OSError)
    return (StoreError, OSError, RedisError)


async def through(store_of: Callable[[], Awaitable[AnswerStore]], location: str,
                  operation: Callable[[AnswerStore], Awaitable[T]]) -> T:
    """`operation` on the store, waiting for a lost store to come back (see the module)."""
    failures = _failures()
    pause, deadline = PAUSE_S[0], None
    while True:
        try:
            store = await store_of()
            result = await operation(store)
            intact = deadline is None or await store.intact()
        except failures as exc:
            now = time.monotonic()
            deadline = now + WAIT_S if deadline is None else deadline
            if now >= deadline:
                raise StoreLost(f"the answer store {mask_url(location)} was lost during the run and did not come "
                                f"back within {WAIT_S:g} s ({scrub(f'{type(exc).__name__}: {exc}')}); the rows not "
                                "answered yet were not written: start the store again and run the same command "
                                "(every answer stored before is paid for once)") from None
            await asyncio.sleep(pause)
            pause = min(pause * 2, PAUSE_S[1])
            continue
        if not intact:
            raise StoreLost(f"the answer store {mask_url(location)} came back empty during the run: the answers "
                            "stored before are lost, and calling their keys again would pay for them twice "
                            "without saying so; the run stops here (run it again to pay for them anew)")
        return result
