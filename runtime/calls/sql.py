"""ENRICH WITH SQL db 'SELECT ...': a read-only query of PostgreSQL per element, or per batch.

The client is asyncpg: PostgreSQL's protocol on asyncio in C, prepared statements kept per
connection, binary parameters (when it was chosen: 2,708 point lookups per second against 1,394
for psycopg 3's async API and its pool, 1.94x, on this project's 2-core machine; docs/databases.md).
Its pools live per Python worker
(`pools.py`), at most as many connections as queries can be in flight.

An element's answer is the query's rows: none is a miss, one a result, several one output row
each. With BATCH one query answers the batch's distinct keys (`column = ANY($1)`); its rows are
grouped back by their `__dslc_key` column. Errors: a lost connection is `DatabaseUnavailable`
(retried by RETRY, counted by ON OUTAGE), a serialization failure or a deadlock is
`RetryableDatabaseError` (retried), any other database error `DatabaseError`, the element's own at
once (never retried: the same query would fail the same way). Every message is scrubbed of the
URL's secrets.
"""
from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from dslc.runtime.config import Enrich, SqlCall
from dslc.runtime.core.operator import Row
from dslc.runtime.secrets import Secrets, mask_url, scrub

from . import pools
from .base import CallError, EnrichCall, UnsendableRequest, check_result_types, hashable_key

BATCH_KEY = "__dslc_key"
#: SQLSTATEs worth another attempt: serialization failure, deadlock.
RETRYABLE_STATES = ("40001", "40P01")


class DatabaseUnavailable(CallError, ConnectionError):
    """The database could not be reached, or the connection was lost: RETRY and ON OUTAGE apply."""


class RetryableDatabaseError(CallError):
    """A serialization failure or deadlock: the same query may well succeed again."""


class DatabaseError(UnsendableRequest):
    """Any other database error: the element's own, at once (retrying would fail the same way)."""


class SqlEnrichCall(EnrichCall):
    """One read-only query per element (or per batch) on the worker's pool for this database."""

    def __init__(self, config: Enrich) -> None:
        assert isinstance(config.call, SqlCall)
        self.config = config
        self.call: SqlCall = config.call
        self.secrets = config.secrets or Secrets()
        self.columns = self.call.params
        slots = config.capacity if config.batch is None else -(-config.capacity // config.batch.size)
        # no more connections than queries can be in flight, and at most OPTIONS (pool = n)
        self.size = max(1, min(self.call.pool, slots))

    def cache_key(self, row: Row) -> Hashable | None:
        return hashable_key(tuple(map(row.get, self.columns)))

    def request_columns(self) -> tuple[str, ...] | None:
        return self.columns

    async def _pool(self):
        return await pools.pool_for(self.secrets.fill(self.call.url), self.size, self.config.timeout_s,
                                    self.call.database)

    async def __call__(self, row: Row) -> Any:
        records = await self._fetch(self.call.query, *(row.get(c) for c in self.columns))
        if not records:
            return None
        results = [dict(record) for record in records]
        return check_result_types(results[0] if len(results) == 1 else results, self.result_check)

    async def call_batch(self, rows: list[Row]) -> list[Any]:
        """One query for the batch's distinct keys; each row's answer is the rows of its key
        (none: a miss). A null key matches nothing, as `= NULL` does in one query per row."""
        assert self.call.batch_query is not None and self.call.batch_key is not None
        key = self.call.batch_key
        wanted = [row.get(key) for row in rows]
        keys = list(dict.fromkeys(k for k in wanted if k is not None))
        grouped: dict[Any, list[dict[str, Any]]] = {}
        if keys:
            records = await self._fetch(self.call.batch_query, keys)
            names = [name for name in records[0].keys() if name != BATCH_KEY] if records else []
            for record in records:   # one dict per record, of the RETURNS columns only
                grouped.setdefault(record[BATCH_KEY], []).append({name: record[name] for name in names})
        answers: list[Any] = []
        for k in wanted:   # a null key is never in `grouped`: a miss
            found_rows = grouped.get(k)
            answers.append(None if not found_rows else found_rows[0] if len(found_rows) == 1 else found_rows)
        return answers

    async def _fetch(self, query: str, *args: Any) -> list[Any]:
        import asyncpg

        pool = await self._pool()
        try:
            return await pool.fetch(query, *args, timeout=self.config.timeout_s)
        except (asyncpg.PostgresConnectionError, asyncpg.InterfaceError, ConnectionError, OSError) as exc:
            raise DatabaseUnavailable(self._say(f"database {self.call.database} unavailable", exc)) from None
        except asyncpg.PostgresError as exc:
            state = getattr(exc, "sqlstate", None)
            kind = RetryableDatabaseError if state in RETRYABLE_STATES else DatabaseError
            raise kind(self._say(f"database {self.call.database} error {state}", exc)) from None
        except (TypeError, ValueError, OverflowError) as exc:   # a value the parameter's type refuses
            raise DatabaseError(self._say(f"database {self.call.database}: a parameter cannot be sent", exc)) from None

    def _say(self, what: str, exc: BaseException) -> str:
        return scrub(f"{what}: {type(exc).__name__}: {exc}", self.secrets)

    def describe(self) -> str:
        """The call as a recording's request line names it: the database and its masked URL."""
        return f"SQL {self.call.database} {mask_url(self.call.url)}"

    async def aclose_clients(self) -> None:
        await pools.close_pool(self.secrets.fill(self.call.url))
