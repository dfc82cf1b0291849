"""Talking to a DATABASE from the job's driver, with asyncpg on a private event loop: the check
that each database can be reached before Spark starts, and short administrative work (create a
table, commit a micro-batch). Messages name the DATABASE and never carry its password."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from dslc.runtime.secrets import Secrets, scrub

from .url import shown


class DatabaseProblem(RuntimeError):
    """A DATABASE cannot be used: the message names it, says why, and carries no secret."""


def run(url: str, work: Callable[[Any], Awaitable[Any]], *, name: str = "", secrets: Secrets | None = None,
        timeout_s: float = 30.0) -> Any:
    """`work(connection)` on a new connection to `url` (closed after), from synchronous code."""
    import asyncpg

    async def main() -> Any:
        connection = await asyncpg.connect(url, timeout=timeout_s)
        try:
            return await work(connection)
        finally:
            await connection.close()

    try:
        return _run(main())
    except (OSError, asyncio.TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        what = f"DATABASE {name} ({shown(url)})" if name else shown(url)
        raise DatabaseProblem(scrub(f"{what}: {_reason(exc)}", secrets)) from None


def _run(work: Awaitable[Any]) -> Any:
    """`asyncio.run(work)`, on a thread of its own when this thread already runs an event loop
    (an editor's server, a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="dslc-database") as pool:
        return pool.submit(asyncio.run, work).result()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError) or "Connect call failed" in str(exc):
        return f"cannot be reached: connection refused ({exc})"
    if isinstance(exc, asyncio.TimeoutError):
        return "cannot be reached: the connection timed out"
    return f"{type(exc).__name__}: {exc}"


def reach(databases: dict[str, str], secrets: Secrets) -> None:
    """Connect once to each DATABASE (name -> URL as written) before anything runs: one that
    cannot be reached, or refuses the credentials, stops the job naming it (exit code 2)."""
    import sys
    import threading

    for name, written in databases.items():
        try:
            run(secrets.fill(written), lambda connection: connection.fetchval("SELECT 1"), name=name,
                secrets=secrets, timeout_s=10.0)
        except DatabaseProblem as exc:
            if threading.current_thread() is not threading.main_thread():
                raise
            print(f"dslc: error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
