"""A running job holds its answer store, so that `dslc store clear` refuses to empty it under the
run: a run whose store is cleared pays again, in the same run, for every answer it had stored.

The job's driver takes a hold on each store its chains use before any call (`hold`, from
spark/answers.py): a lease in the store's own lease table under an operator name no STREAM can
have (`OPERATOR`), renewed by a thread every RENEW_S while the job runs and released when it
ends. A driver killed without a word leaves a hold that lapses HOLD_S later. `holders` is what
`dslc store clear` asks before it deletes anything.
"""
from __future__ import annotations

import asyncio
import atexit
import os
import socket
import threading
import time
import uuid

from .base import AnswerStore
from .open_stores import make_store

#: The lease table's operator of the holds (a STREAM name cannot start with '~').
OPERATOR = "~run"
HOLD_S = 30.0       # a hold lapses this long after its job last renewed it
RENEW_S = 5.0       # how often the job renews it
#: This job: its machine, its process and a nonce (the lease's key and owner).
OWNER = f"{socket.gethostname()} pid {os.getpid()} ({uuid.uuid4().hex[:8]})"

_holds: dict[str, _Hold] = {}
_lock = threading.Lock()


class _Hold(threading.Thread):
    """Renews one store's hold until `stop`, then releases it."""

    def __init__(self, location: str) -> None:
        super().__init__(name=f"dslc-store-hold-{location}", daemon=True)
        self.location = location
        self.stopping = threading.Event()

    def run(self) -> None:
        asyncio.run(self._renew())

    async def _renew(self) -> None:
        store = make_store(self.location)
        try:
            await store.open()
            while not self.stopping.is_set():
                await asyncio.to_thread(self.stopping.wait, RENEW_S)
                await store.renew(OPERATOR, [OWNER], OWNER, HOLD_S)
            await store.release(OPERATOR, [OWNER], OWNER)
        except Exception:  # noqa: BLE001 - a store lost mid-run is the operators' to say (store/lost.py)
            pass
        finally:
            await store.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(10)


def hold(location: str) -> None:
    """Take this job's hold on the store (once per location) and keep it while the job runs."""
    with _lock:
        if location in _holds:
            return
        asyncio.run(_take(location))
        holding = _holds[location] = _Hold(location)
    holding.start()
    atexit.register(release, location)


async def _take(location: str) -> None:
    store = make_store(location)
    try:
        await store.open()
        await store.lease(OPERATOR, [OWNER], OWNER, HOLD_S)
    finally:
        await store.close()


def release(location: str) -> None:
    """Give the hold back (the job ends)."""
    with _lock:
        holding = _holds.pop(location, None)
    if holding is not None:
        holding.stop()


def release_all() -> None:
    """Give every hold of this process back (the job's main ends, however it ends)."""
    for location in list(_holds):
        release(location)


async def holders(store: AnswerStore) -> list[str]:
    """The jobs that hold the store now (their machine and process)."""
    return sorted(set(await store.held(OPERATOR, time.time())))
