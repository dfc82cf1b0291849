"""asyncpg connection pools, one per Python worker, database URL and event loop.

Every ENRICH WITH SQL of every task a worker runs shares its database's pool, as HTTP calls share
their sessions (calls/sessions.py), so connections are opened once per worker, not per task. A
pool opens connections only as queries need them (min_size 0) and holds at most `size`: the most
queries an operator can have in flight, capped by OPTIONS (pool = n). Each connection runs its
statements in read-only transactions (`default_transaction_read_only`) with TIMEOUT as the
server's `statement_timeout`, so neither a lookup that writes nor one that runs away can get
past the database itself. All coroutines here run on the worker's event loop.
"""
from __future__ import annotations

import asyncio
import os
from typing import Any

_pools: dict[tuple[int, int, str], tuple[Any, int]] = {}


async def pool_for(url: str, size: int, timeout_s: float, database: str) -> Any:
    """The worker's pool for `url` on the running loop, created on first use (callers that come
    while it is being made wait for the same one); an operator that may have more queries in
    flight than it holds gets a larger one (the old one closes when its queries are done)."""
    loop = asyncio.get_running_loop()
    key = (os.getpid(), id(loop), url)
    held = _pools.get(key)
    if held is not None and held[1] >= size:
        pool = await asyncio.shield(held[0])
        if not pool.is_closing():
            return pool
    making = loop.create_task(_create(url, size, timeout_s, database))
    _pools[key] = (making, size)
    try:
        pool = await asyncio.shield(making)
    except BaseException:
        if _pools.get(key, (None,))[0] is making:
            del _pools[key]
        raise
    if held is not None and held[0].done() and not held[0].cancelled() and held[0].exception() is None:
        loop.create_task(held[0].result().close())
    return pool


async def _create(url: str, size: int, timeout_s: float, database: str) -> Any:
    import asyncpg

    settings = {"default_transaction_read_only": "on", "application_name": f"dslc {database}",
                "statement_timeout": str(max(1, int(timeout_s * 1000)))}
    return await asyncpg.create_pool(url, min_size=0, max_size=size, server_settings=settings,
                                     max_inactive_connection_lifetime=60.0, reset=_nothing_to_reset)


async def _nothing_to_reset(connection: Any) -> None:
    """A released connection needs no reset query: its statements are single read-only SELECTs
    (no SET, cursor, LISTEN or advisory lock to undo), and asyncpg itself still rolls back an
    open transaction. Its default ran `SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *;
    RESET ALL` on every release: a second round trip per query, which made one query per row
    cost two (Flink's JDBC lookup sends one on a kept connection)."""


async def close_pool(url: str) -> None:
    """Close this worker's pool for `url` on the running loop (after an operator failed)."""
    key = (os.getpid(), id(asyncio.get_running_loop()), url)
    held = _pools.pop(key, None)
    if held is not None and held[0].done() and not held[0].cancelled() and held[0].exception() is None:
        held[0].result().terminate()
