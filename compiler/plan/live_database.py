"""The live database behind a DATABASE statement, asked at compile time.

Two users: a SOURCE or BROADCAST ... FROM DATABASE without a SCHEMA clause gets its columns from
the table or query itself (PostgreSQL's types mapped as Spark's JDBC reader maps them), and
`dslc check --db` compares every query, source and sink with what the database holds
(compiler/plan/database_check.py). The compiler connects only for these, with the secrets of the
environment or of the file `$DSLC_SECRETS_FILE` names (`--secrets`), a few seconds at most, and
keeps each answer for a minute: the editor checks on every edit.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from dslc.runtime import secrets as S

#: How long an answer (or a failure to get one) is kept, in seconds.
KEPT_S = 60.0
#: How long a connection may take before the database counts as unreachable.
CONNECT_TIMEOUT_S = 5.0

# PostgreSQL's type names (as format_type writes them, and as a prepared statement's columns
# name them) -> Spark's type, as Spark's JDBC reader (PostgresDialect) maps them
_SPARK = {
    "smallint": "SMALLINT", "int2": "SMALLINT", "integer": "INT", "int4": "INT", "bigint": "BIGINT",
    "int8": "BIGINT", "real": "FLOAT", "float4": "FLOAT", "double precision": "DOUBLE", "float8": "DOUBLE",
    "boolean": "BOOLEAN", "bool": "BOOLEAN", "date": "DATE", "bytea": "BINARY",
    "timestamp with time zone": "TIMESTAMP", "timestamptz": "TIMESTAMP",
    "timestamp without time zone": "TIMESTAMP", "timestamp": "TIMESTAMP",
    **{name: "STRING" for name in ("text", "character varying", "varchar", "character", "bpchar", "char",
                                   "name", "uuid", "json", "jsonb", "xml", "inet", "cidr", "macaddr", "citext")},
}


class Unavailable(Exception):
    """The database could not answer (not reachable, a secret not set, no such table); the
    message names the DATABASE and carries no secret."""


@dataclass(frozen=True, slots=True)
class LiveColumn:
    """A column as the database has it: its name, PostgreSQL type and Spark type (None: unmapped)."""

    name: str
    pg_type: str
    spark_type: str | None


def spark_type(pg_type: str) -> str | None:
    """Spark's type for a PostgreSQL type name (`numeric(10,2)`, `integer[]`, `_int4`, ...)."""
    text = pg_type.strip().lower()
    if text.endswith("[]") or (text.startswith("_") and text[1:] in _SPARK):
        element = spark_type(text[:-2] if text.endswith("[]") else text[1:])
        return f"ARRAY<{element}>" if element else None
    text = re.sub(r"\(\d+\)", "", text) if not text.startswith("numeric") else text
    found = re.fullmatch(r"numeric\((\d+),(\d+)\)", text.replace(" ", ""))
    if found:
        precision, scale = int(found.group(1)), int(found.group(2))
        return f"DECIMAL({min(precision, 38)},{min(scale, 38)})"
    if text in ("numeric", "decimal"):
        return "DECIMAL(38,18)"     # no declared precision: Spark's reader reads DECIMAL(38,18)
    return _SPARK.get(text)


_answers: dict[tuple[str, str | None, str | None], tuple[float, Any]] = {}


def filled_url(url: str) -> tuple[str, S.Secrets]:
    """The URL with its `${NAME}` secrets filled from the environment or the secrets file."""
    try:
        secrets = S.read(S.names_in(url))
    except S.MissingSecret as exc:
        raise Unavailable(str(exc)) from None
    return secrets.fill(url), secrets


def columns(name: str, url: str, *, table: str | None = None, query: str | None = None) -> tuple[LiveColumn, ...]:
    """The columns of a table (None when it does not exist: Unavailable) or of a query's answer."""
    return _asked(name, url, table, query, lambda c: _columns(c, table, query))


def tables(name: str, url: str) -> tuple[str, ...]:
    """The tables and views a user of the database can see (for did-you-mean hints)."""
    return _asked(name, url, "*", None, _tables)


class NoSuchRelation(Unavailable):
    """The database has no such table or view."""


def _asked(name: str, url: str, table: str | None, query: str | None, work) -> Any:
    """`work(connection)`'s answer, kept KEPT_S per (URL, table, query); failures are kept too."""
    from dslc.runtime.databases import driver

    key = (url, table, query)
    kept = _answers.get(key)
    if kept is not None and time.monotonic() - kept[0] < KEPT_S:
        if isinstance(kept[1], Unavailable):
            raise kept[1]
        return kept[1]
    filled, secrets = filled_url(url)
    try:
        answer: Any = driver.run(filled, work, name=name, secrets=secrets, timeout_s=CONNECT_TIMEOUT_S)
    except NoSuchRelation as exc:
        answer = exc
    except driver.DatabaseProblem as exc:
        answer = Unavailable(str(exc))
    _answers[key] = (time.monotonic(), answer)
    if isinstance(answer, Unavailable):
        raise answer
    return answer


async def _columns(connection: Any, table: str | None, query: str | None) -> tuple[LiveColumn, ...]:
    if table is not None:
        relation = await connection.fetchval("SELECT to_regclass($1)::oid", table)
        if relation is None:
            raise NoSuchRelation(f"there is no table {table}")
        rows = await connection.fetch(
            "SELECT attname AS name, format_type(atttypid, atttypmod) AS type FROM pg_attribute "
            "WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped ORDER BY attnum", relation)
        return tuple(LiveColumn(r["name"], r["type"], spark_type(r["type"])) for r in rows)
    assert query is not None
    import asyncpg

    try:
        prepared = await connection.prepare(query)
    except asyncpg.PostgresError as exc:     # the database's own words: unknown table, column, syntax
        raise NoSuchRelation(f"{type(exc).__name__}: {exc}") from None
    return tuple(LiveColumn(a.name, a.type.name, spark_type(a.type.name)) for a in prepared.get_attributes())


async def _tables(connection: Any) -> tuple[str, ...]:
    rows = await connection.fetch(
        "SELECT table_schema AS s, table_name AS t FROM information_schema.tables "
        "WHERE table_schema NOT IN ('pg_catalog', 'information_schema')")
    return tuple(sorted({r["t"] for r in rows} | {f"{r['s']}.{r['t']}" for r in rows}))


def forget() -> None:
    """Drop every kept answer (tests; the REPL's `:db on`)."""
    _answers.clear()
