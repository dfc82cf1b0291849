"""DATABASE statements and what names them: `ENRICH ... WITH SQL db '...'`, `SOURCE ... FROM
DATABASE db TABLE|QUERY`, `BROADCAST ... FROM DATABASE db ...` and `SINK ... TO DATABASE db TABLE`.

A DATABASE is named once (`DATABASE crm AT 'postgresql://app:${CRM_PASSWORD}@host:5432/crm'`);
its URL is kept as written, `${NAME}` secrets and all, in every call and table configuration
that uses it, and filled only where a connection is made (docs/databases.md).
"""
from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dslc.compiler.diagnostics import Diagnostic, did_you_mean, error
from dslc.compiler.frontend import ast
from dslc.compiler.frontend.lexical import unescape_string
from dslc.compiler.plan import logical as plan
from dslc.compiler.plan import options as option_reader
from dslc.compiler.plan.service_calls import ServiceChecks
from dslc.compiler.plan.sql_lookup import compile_lookup
from dslc.compiler.source import SourceFile, Span
from dslc.runtime.config import DatabaseTable, SqlCall

if TYPE_CHECKING:
    from dslc.compiler.plan.planner import _Planner as Planner

SCHEMES = ("postgresql", "postgres")
SQL_OPTIONS = ("pool",)


@dataclass(frozen=True, slots=True)
class Database:
    """A checked DATABASE statement."""

    name: str
    url: str
    line: int
    span: Span


def define(stmt: ast.Database, source: SourceFile, known: dict[str, Database], problems: list[Diagnostic]) -> None:
    """Check one DATABASE statement and add it to `known` (by lower-case name)."""
    key = stmt.name.value.lower()
    if key in known:
        first = source.line_col(known[key].span.start)[0]
        problems.append(error("E0202", stmt.name.span, name=stmt.name.value,
                              hint=f"first defined on line {first}; pick another name"))
        return
    ServiceChecks(source, problems).secrets(stmt.url)
    why = url_problem(stmt.url.value)
    if why:
        problems.append(error("E0330", stmt.url.span, why=why,
                              hint="write 'postgresql://user:${PASSWORD}@host:5432/dbname'"))
    # kept even when wrong (reported above), so that its users are not reported again
    known[key] = Database(stmt.name.value, stmt.url.value, source.line_col(stmt.span.start)[0], stmt.span)


def url_problem(url: str) -> str | None:
    """What is wrong with a database URL (None: nothing); secrets count as present values (a
    number, so that a port may be one too: '...@127.0.0.1:${PORT}/db')."""
    parts = urllib.parse.urlsplit(re.sub(r"\$\{[^{}]*\}", "0", url))
    if url[:len(parts.scheme)] not in SCHEMES:     # as written: the job's drivers take it in lower case
        return f"it starts with '{url[:len(parts.scheme)] or url[:12]}', not postgresql://"
    if not parts.hostname:
        return "it names no host"
    try:
        _ = parts.port
    except ValueError:
        return "its port is not a number"
    if not parts.path.strip("/"):
        return "it names no database (…/dbname at its end)"
    return None


def lookup(name: ast.Name, known: dict[str, Database], problems: list[Diagnostic]) -> Database | None:
    """The DATABASE `name` names; an unknown one is reported."""
    found = known.get(name.value.lower())
    if found is None:
        hint = did_you_mean(name.value, [d.name for d in known.values()]) or \
            f"declare it first: DATABASE {name.value} AT 'postgresql://user:${{PASSWORD}}@host:5432/db'"
        problems.append(error("E0201", name.span, kind="database", name=name.value, hint=hint))
    return found


def sql_call(planner: Planner, stmt: ast.Enrich, upstream: plan.PlanNode | None,
             returns: tuple[plan.Column, ...], checked) -> tuple[SqlCall | None, tuple[str, ...]]:
    """The checked call of a WITH SQL clause (None when it cannot be built) and its key columns
    (the placeholders' columns: what names an element, and what a recording keys it by)."""
    call = stmt.call
    assert isinstance(call, ast.SqlCall)
    database = lookup(call.database, planner.databases, planner.problems)
    pool = _pool(call.options, planner.problems)
    for column in stmt.returns:
        if column.path is not None:
            planner.add(error("E0325", column.path.span, clause="PATH",
                              what="a call that answers JSON (HTTP): a query's columns are found by name",
                              hint=f"name the column in the select list: ... AS {column.name.value}"))
    if upstream is None:
        return None, ()
    types = {f.name.lower(): f.type for f in upstream.schema}
    found, problems = compile_lookup(call.query.value, types, tuple(c.name for c in returns),
                                     checked.batch is not None)
    for problem in problems:
        if problem.offset < 0:      # a RETURNS column the query does not give
            column = next(c for c in stmt.returns if c.name.value.lower() in problem.message.lower())
            span = column.name.span
        else:
            span = literal_span(planner.source, call.query, problem.offset, problem.length)
        planner.add(Diagnostic(problem.code, problem.message, span, problem.hint))
    if found is None or database is None or pool is None or url_problem(database.url):
        return None, ()     # a wrong URL is reported at its DATABASE statement (define, above)
    columns = {f.name.lower(): f.name for f in upstream.schema}
    params = tuple(columns[p.lower()] for p in found.params)
    key = columns[found.batch_key.lower()] if found.batch_key else None
    built = SqlCall(database.name, database.url, found.query, params, found.batch_query, key, pool)
    return built, params or ((upstream.schema[0].name,) if upstream.schema else ())


def _pool(clause: ast.Opt | None, problems: list[Diagnostic]) -> int | None:
    """OPTIONS (pool = n) of a SQL call: at most n connections per Python worker (default 10)."""
    if clause is None:
        return 10
    pool = 10
    for key, value in option_reader.key_values(clause, problems):
        if key.lower() != "pool":
            problems.append(error("E0305", clause.span, kind="SQL call option", name=key,
                                  hint=did_you_mean(key, SQL_OPTIONS) or "a SQL call takes OPTIONS (pool = n)"))
            return None
        if not value.isdigit() or int(value) < 1:
            problems.append(error("E0302", clause.span, option="pool", rule="a whole number >= 1", text=value))
            return None
        pool = int(value)
    return pool


def literal_span(source: SourceFile, literal: ast.Str, offset: int, length: int) -> Span:
    """The span in the file of characters [offset, offset + length) of a string literal's value
    (escapes and adjacent literals accounted for); the whole literal when it cannot be mapped."""
    positions = value_positions(source.text[literal.span.start:literal.span.end])
    if not positions or offset >= len(positions):
        return literal.span
    start = literal.span.start + positions[offset]
    last = literal.span.start + positions[min(offset + max(length, 1), len(positions)) - 1]
    return Span(start, max(last + 1, start + 1))


def value_positions(raw: str) -> list[int]:
    """For each character of a (possibly joined, escaped) literal's value, its offset in `raw`."""
    positions: list[int] = []
    for match in re.finditer(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", raw, re.S):
        i, end = match.start() + 1, match.end() - 1
        while i < end:
            if raw[i] == "\\":
                escape = re.match(r"\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3}|.)", raw[i:end], re.S)
                width = len(escape.group(0)) if escape else 1
                positions += [i] * len(unescape_string("'" + raw[i:i + width] + "'"))
                i += width
            else:
                positions.append(i)
                i += 1
    return positions


def source_table(planner: Planner, stmt: ast.Source, schema: plan.Schema) -> DatabaseTable | None | bool:
    """The database relation of a SOURCE ... FROM DATABASE (None for other connectors; False when
    it is wrong, reported). PARTITION BY col (n) belongs to a database source only."""
    split = next((o for o in stmt.options if o.key == "partition_column"), None)
    connector = stmt.connector
    if connector.database is None:
        if split is not None:
            planner.add(error("E0304", split.span, first="PARTITION BY col (n)",
                              second=f"a {connector.kind.value.upper()} source",
                              hint="it splits a database table's read into ranges"))
            return False
        return None
    ok = True
    database = lookup(connector.database, planner.databases, planner.problems)
    column, partitions = None, 1
    if split is not None:
        name, count = split.args
        partitions = int(count.text) if count.text.isdigit() and int(count.text) >= 1 else 0
        if not partitions:
            planner.add(error("E0302", count.span, option="PARTITION BY col (n)", rule="a whole number >= 1",
                              text=count.text))
            ok = False
        found = next((f for f in schema if f.name.lower() == name.value.lower()), None)
        if found is None:
            planner.add(error("E0204", name.span, column=name.value, where=f"'{stmt.name.value}'",
                              hint=did_you_mean(name.value, [f.name for f in schema])))
            ok = False
        elif not _rangeable(found.type):
            planner.add(error("E0312", name.span, column=name.value, where="PARTITION BY",
                              what=f"a number, a DATE or a TIMESTAMP (it is {found.type})"))
            ok = False
        column = found.name if found else None
    if database is None or not ok:
        return False
    text = connector.arg.value if connector.arg else ""
    is_query = connector.relation is not None and connector.relation.value == "QUERY"
    return DatabaseTable(database.name, database.url, table=None if is_query else text,
                         query=text if is_query else None, partition_column=column,
                         partitions=partitions or 1)


def live_schema(planner: Planner, connector: ast.Connector, what: str) -> plan.Schema | None:
    """The columns of a database table or query that has no SCHEMA clause, read from the database
    now (compile time: every statement after it is checked against them); None when it cannot
    tell them (reported, with SCHEMA (...) as the way out)."""
    from dslc.compiler.plan import live_database

    database = lookup(connector.database, planner.databases, planner.problems) if connector.database else None
    if database is None or connector.arg is None:
        return None
    is_query = connector.relation is not None and connector.relation.value == "QUERY"
    relation = {"query": connector.arg.value} if is_query else {"table": connector.arg.value}
    hint = "write its columns: SCHEMA (col TYPE, ...), or make the database reachable (secrets from the " \
           "environment or --secrets FILE)"
    try:
        found = live_database.columns(database.name, database.url, **relation)
    except live_database.Unavailable as exc:
        planner.add(error("E0337", connector.span, what=what, database=database.name, why=str(exc), hint=hint))
        return None
    unmapped = [c for c in found if c.spark_type is None]
    for column in unmapped:
        planner.add(error("E0337", connector.span, what=what, database=database.name,
                          why=f"its column {column.name} is {column.pg_type}, which has no Spark type",
                          hint=f"read it through a QUERY that casts it: SELECT ..., {column.name}::text AS "
                               f"{column.name} FROM ..., or write SCHEMA (...)"))
    if unmapped:
        return None
    return tuple(plan.Column(c.name, c.spark_type or "") for c in found)


def _rangeable(type_text: str) -> bool:
    return type_text.split("(")[0] in ("INT", "BIGINT", "SMALLINT", "TINYINT", "DOUBLE", "FLOAT", "DECIMAL",
                                       "DATE", "TIMESTAMP", "TIMESTAMP_NTZ")


def sink_table(planner: Planner, stmt: ast.Sink, upstream: plan.PlanNode | None, mode: str,
               key: ast.Opt | None) -> DatabaseTable | None:
    """The table of a SINK ... TO DATABASE (None for other sinks): KEY columns of the stream,
    UPSERT only with KEY and only into a database."""
    connector = stmt.connector
    mode_span = next((o.span for o in stmt.options if o.key == "mode"), connector.span)
    if connector.database is None:
        if key is not None:
            planner.add(error("E0304", key.span, first="KEY (...)", second=f"a {connector.kind.value.upper()} sink",
                              hint="a KEY names the primary key of a database table"))
        if mode == "UPSERT":
            planner.add(error("E0304", mode_span, first="MODE UPSERT", second=f"a {connector.kind.value.upper()} sink",
                              hint="UPSERT writes into a database table: SINK ... TO DATABASE db TABLE 't' KEY (...)"))
        return None
    if connector.relation is not None and connector.relation.value == "QUERY":
        planner.add(error("E0304", connector.relation.span, first="QUERY", second="a SINK",
                          hint="a sink writes a table: TO DATABASE db TABLE 'schema.table'"))
    if mode == "COMPLETE":
        planner.add(error("E0304", mode_span, first="MODE COMPLETE", second="a DATABASE sink",
                          hint="write an aggregation's rows with KEY (...) MODE UPSERT"))
    columns: tuple[str, ...] = ()
    if key is not None and upstream is not None:
        names = {f.name.lower(): f.name for f in upstream.schema}
        for column in key.args:
            if column.value.lower() not in names:
                planner.add(error("E0204", column.span, column=column.value, where=f"'{upstream.name}'",
                                  hint=did_you_mean(column.value, list(names.values()))))
        columns = tuple(names[c.value.lower()] for c in key.args if c.value.lower() in names)
    if mode == "UPSERT" and key is None:
        planner.add(error("E0310", mode_span, connector="MODE UPSERT", role="SINK", what="KEY (col, ...)",
                          hint="name the table's primary key: ... KEY (order_id) MODE UPSERT"))
    database = lookup(connector.database, planner.databases, planner.problems)
    if database is None or connector.arg is None:
        return None
    return DatabaseTable(database.name, database.url, table=connector.arg.value, key=columns)
