"""The private PostgreSQL of the tests (dslc.testing.postgres): password authentication, and a
log of what it executed that the database tests count queries with."""
from __future__ import annotations

import asyncio

import asyncpg
import pytest


def test_it_executes_and_logs_statements_without_their_parameters(postgres):
    postgres.execute("CREATE TABLE IF NOT EXISTS fixture_t (k TEXT PRIMARY KEY, v INT)")
    postgres.mark()
    postgres.execute("INSERT INTO fixture_t VALUES ($1, $2) ON CONFLICT DO NOTHING", "it's;k", 1)
    assert postgres.query("SELECT v FROM fixture_t WHERE k = $1", "it's;k") == [{"v": 1}]
    logged = postgres.statements()
    assert "SELECT v FROM fixture_t WHERE k = $1" in logged
    assert not any("it's;k" in text for text in logged)     # parameters never reach the log
    assert "it's;k" not in postgres.log_text()


def test_a_wrong_password_is_refused(postgres):
    async def connect() -> None:
        connection = await asyncpg.connect(postgres.url(password="wrong"))
        await connection.close()

    with pytest.raises(asyncpg.InvalidPasswordError):
        asyncio.run(connect())


def test_pg_stat_statements_counts_calls(postgres):
    postgres.execute("SELECT pg_stat_statements_reset()", user="postgres")
    for _ in range(3):
        postgres.query("SELECT 1 AS fixture_one")
    calls = postgres.query("SELECT sum(calls)::int AS n FROM pg_stat_statements WHERE query LIKE '%fixture_one%'",
                           user="postgres")
    assert calls == [{"n": 3}]
