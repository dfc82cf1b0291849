"""`dslc check --db` (the REPL's `:db on`, `dslc lsp --db`): every query, source and sink of a
DATABASE checked against the live database, after the fast check passed.

- ENRICH ... WITH SQL: the query as it is sent is prepared by the database (nothing runs): an
  unknown table or column is reported at its place inside the query string, with the database's
  own hint or a did-you-mean; each RETURNS column must take the type of the query's column.
- SOURCE and BROADCAST ... FROM DATABASE: the table exists (or the QUERY prepares) and each SCHEMA
  column is one of its columns, of a type that converts.
- SINK ... TO DATABASE: a table that exists takes every column of the stream (a missing one is
  created when the job starts), and with UPSERT its KEY is a unique key of the table.

Secrets come from the environment or `--secrets FILE`; a database that cannot be reached is
reported at its DATABASE statement.
"""
from __future__ import annotations

import re
from collections.abc import Iterator

from dslc.compiler.diagnostics import Diagnostic, did_you_mean
from dslc.compiler.frontend import ast
from dslc.compiler.frontend.parser import parse
from dslc.compiler.plan import live_database
from dslc.compiler.plan import logical as plan
from dslc.compiler.plan.databases import literal_span
from dslc.compiler.plan.sql_lookup import holes
from dslc.compiler.source import SourceFile, Span

# Spark type of a database column -> the RETURNS / SCHEMA types that take its values whole
_INTEGERS = ("SMALLINT", "INT", "BIGINT")
_TAKEN_BY = {
    "SMALLINT": {"SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL"},
    "INT": {"INT", "BIGINT", "DOUBLE", "DECIMAL"}, "BIGINT": {"BIGINT", "DOUBLE", "DECIMAL"},
    "FLOAT": {"FLOAT", "DOUBLE"}, "DOUBLE": {"DOUBLE"}, "DECIMAL": {"DECIMAL", "DOUBLE"},
    "STRING": {"STRING"}, "BOOLEAN": {"BOOLEAN"}, "DATE": {"DATE", "TIMESTAMP", "TIMESTAMP_NTZ"},
    "TIMESTAMP": {"TIMESTAMP", "TIMESTAMP_NTZ"}, "BINARY": {"BINARY"},
}


def _base(type_text: str) -> str:
    return type_text.split("(")[0].upper()


def takes(declared: str, live: str | None) -> bool:
    """Whether a column declared `declared` (RETURNS, SCHEMA) takes the database's values of
    Spark type `live` without loss (None: a type with no Spark type)."""
    if live is None:
        return False
    if declared.upper() == live.upper():
        return True
    return _base(declared) in _TAKEN_BY.get(_base(live), set())


def check(source: SourceFile, p: plan.Plan) -> list[Diagnostic]:
    """Every problem the live databases find with the checked plan `p` of `source`."""
    if not p.databases:
        return []
    program = parse(source)
    statements = {stmt.name.value.lower(): stmt for stmt in program.statements
                  if isinstance(stmt, (ast.Source, ast.Broadcast, ast.Enrich))}
    sinks = [stmt for stmt in program.statements if isinstance(stmt, ast.Sink)]
    checker = _Checker(source, p, program)
    if not checker.reachable():
        return checker.problems
    for node in p.nodes:
        stmt = statements.get(node.name.lower())
        if isinstance(node, plan.Enrich) and isinstance(node.call, plan.SqlCall) and isinstance(stmt, ast.Enrich):
            checker.lookup(node, stmt)
        elif isinstance(node, plan.BroadcastState) and isinstance(stmt, ast.Broadcast) and stmt.database:
            checker.relation(p.node(node.source), stmt.database, stmt.schema)
        elif isinstance(node, plan.Source) and node.database is not None and isinstance(stmt, ast.Source):
            checker.relation(node, stmt.connector, next((o for o in stmt.options if o.key == "schema"), None))
    for sink, stmt in zip(p.sinks, _matching(p.sinks, sinks)):
        if sink.database is not None and stmt is not None:
            checker.sink(sink, stmt)
    return checker.problems


def _matching(sinks: tuple[plan.Sink, ...], statements: list[ast.Sink]) -> Iterator[ast.Sink | None]:
    """The statement of each plan sink (by its span)."""
    by_span = {stmt.span: stmt for stmt in statements}
    for sink in sinks:
        yield by_span.get(sink.span)


class _Checker:
    def __init__(self, source: SourceFile, p: plan.Plan, program: ast.Program) -> None:
        self.source, self.plan = source, p
        self.problems: list[Diagnostic] = []
        self.urls = dict(p.databases)
        self.spans = {stmt.name.value.lower(): stmt.span for stmt in program.statements
                      if isinstance(stmt, ast.Database)}

    def add(self, span: Span, message: str, hint: str | None = None) -> None:
        self.problems.append(Diagnostic("E0336", message, span, hint))

    def reachable(self) -> bool:
        """Each DATABASE answers (reported at its statement when not)."""
        for name, url in self.urls.items():
            try:
                live_database.tables(name, url)
            except live_database.Unavailable as exc:
                self.add(self.spans.get(name.lower(), Span(0, 1)), f"DATABASE {name} cannot be checked: {exc}",
                         "start it, or give its secrets (environment or --secrets FILE); dslc check without "
                         "--db checks everything else")
        return not self.problems

    def _columns(self, database: str, **relation) -> tuple[live_database.LiveColumn, ...] | str:
        try:
            return live_database.columns(database, self.urls[database], **relation)
        except live_database.NoSuchRelation as exc:
            return str(exc)

    # ---- ENRICH ... WITH SQL
    def lookup(self, node: plan.Enrich, stmt: ast.Enrich) -> None:
        call, literal = node.call, stmt.call.query
        assert isinstance(call, plan.SqlCall) and isinstance(stmt.call, ast.SqlCall)
        try:
            live_database.columns(call.database, self.urls[call.database], query=call.query)
        except live_database.NoSuchRelation:
            self._query_error(call, literal)
            return
        answer = self._columns(call.database, query=call.query)
        if isinstance(answer, str):
            return
        by_name = {c.name.lower(): c for c in answer}
        for column in stmt.returns:
            found = by_name.get(column.name.value.lower())
            declared = next((r.type for r in node.returns if r.name.lower() == column.name.value.lower()), None)
            if found is None or declared is None or takes(declared, found.spark_type):
                continue
            wanted = found.spark_type or "a type with no Spark type"
            self.add(column.type.span, f"RETURNS column '{column.name.value}' is {declared}, but the query's "
                                       f"{found.name} is {found.pg_type} ({wanted})",
                     f"declare it {found.spark_type}" if found.spark_type else f"cast it in the query: {found.name}::text")

    def _query_error(self, call: plan.SqlCall, literal: ast.Str) -> None:
        """The database's own error of a query, at its place in the query string."""
        import asyncpg

        from dslc.runtime.databases import driver

        filled, secrets = live_database.filled_url(self.urls[call.database])

        async def prepare(connection):
            try:
                await connection.prepare(call.query)
            except asyncpg.PostgresError as exc:
                return exc
            return None

        exc = driver.run(filled, prepare, name=call.database, secrets=secrets, timeout_s=live_database.CONNECT_TIMEOUT_S)
        if exc is None:
            return
        position = int(getattr(exc, "position", None) or 0)
        offset = _user_offset(literal.value, call, position - 1) if position else 0
        word = re.match(r"[A-Za-z_][A-Za-z0-9_.]*", literal.value[offset:]) if position else None
        span = literal_span(self.source, literal, offset, len(word.group(0)) if word else 1) if position else literal.span
        self.add(span, f"DATABASE {call.database}: {exc.args[0] if exc.args else exc}",
                 self._hint(call, exc, word.group(0) if word else None))

    def _hint(self, call: plan.SqlCall, exc, word: str | None) -> str | None:
        if getattr(exc, "hint", None):
            return exc.hint
        if word is None:
            return None
        if type(exc).__name__ == "UndefinedTableError":
            return did_you_mean(word, live_database.tables(call.database, self.urls[call.database]))
        if type(exc).__name__ == "UndefinedColumnError":
            names: list[str] = []
            for table in re.findall(r"\bFROM\s+([A-Za-z_][A-Za-z0-9_.]*)|\bJOIN\s+([A-Za-z_][A-Za-z0-9_.]*)",
                                    call.query, re.I):
                answer = self._columns(call.database, table=table[0] or table[1])
                names += [c.name for c in answer] if not isinstance(answer, str) else []
            return did_you_mean(word.split(".")[-1], names)
        return None

    # ---- SOURCE and BROADCAST ... FROM DATABASE
    def relation(self, node: plan.Source, connector: ast.Connector, schema: ast.Opt | None) -> None:
        table = node.database
        assert table is not None and connector.arg is not None
        relation = {"table": table.table} if table.table else {"query": table.query}
        answer = self._columns(table.database, **relation)
        if isinstance(answer, str):
            hint = did_you_mean(table.table, live_database.tables(table.database, self.urls[table.database])) \
                if table.table else None
            self.add(connector.arg.span, f"DATABASE {table.database}: {answer}", hint)
            return
        if schema is None:
            return
        by_name = {c.name.lower(): c for c in answer}
        for column in schema.args:
            assert isinstance(column, ast.ColumnDef)
            found = by_name.get(column.name.value.lower())
            if found is None:
                self.add(column.name.span, f"'{connector.arg.value}' has no column '{column.name.value}'",
                         did_you_mean(column.name.value, [c.name for c in answer])
                         or "its columns: " + ", ".join(c.name for c in answer))
            elif not takes(column.type.text, found.spark_type):
                self.add(column.type.span, f"SCHEMA column '{column.name.value}' is {column.type.text}, but "
                                           f"'{connector.arg.value}' has it as {found.pg_type}",
                         f"declare it {found.spark_type}" if found.spark_type else "read it through a QUERY that casts it")

    # ---- SINK ... TO DATABASE
    def sink(self, sink: plan.Sink, stmt: ast.Sink) -> None:
        from dslc.runtime.databases.tables import incompatible

        table = sink.database
        assert table is not None and table.table is not None
        answer = self._columns(table.database, table=table.table)
        at = stmt.connector.arg.span if stmt.connector.arg else stmt.span
        if isinstance(answer, str):
            return          # created from the stream's schema when the job starts
        existing = {c.name.lower(): re.sub(r"\(.*?\)", "", c.pg_type).strip() for c in answer}
        columns = [(f.name, f.type.lower()) for f in self.plan.node(sink.input).schema]
        problems = incompatible(existing, columns)
        if problems:
            self.add(at, f"table {table.table} does not fit SINK {sink.input}: " + "; ".join(problems),
                     "ALTER the table, or select and CAST the stream's columns to its types before the SINK")
        if sink.mode == "UPSERT" and table.key and not self._unique(table.database, table.table, table.key):
            self.add(at, f"KEY ({', '.join(table.key)}) is not a unique key of table {table.table}: UPSERT's "
                         "ON CONFLICT needs one", f"ALTER TABLE {table.table} ADD PRIMARY KEY "
                                                  f"({', '.join(table.key)})")

    def _unique(self, database: str, table: str, key: tuple[str, ...]) -> bool:
        from dslc.runtime.databases import driver

        filled, secrets = live_database.filled_url(self.urls[database])
        wanted = sorted(k.lower() for k in key)

        async def keys(connection):
            rows = await connection.fetch(
                "SELECT array_agg(lower(a.attname::text)) AS cols FROM pg_index i JOIN pg_attribute a "
                "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                "WHERE i.indrelid = to_regclass($1) AND i.indisunique GROUP BY i.indexrelid", table)
            return [sorted(r["cols"]) for r in rows]

        return wanted in driver.run(filled, keys, name=database, secrets=secrets,
                                    timeout_s=live_database.CONNECT_TIMEOUT_S)


def _user_offset(query: str, call: plan.SqlCall, sent: int) -> int:
    """The offset in the user's query text of character `sent` of the query as sent (each
    `{col}` was replaced by `($n::type)`)."""
    delta = 0
    params = {c.lower() for c in call.params}
    for column, at in holes(query):
        if column.lower() not in params:
            continue
        found = re.match(r"\(\$\d+::[^)]*\)", call.query[at + delta:])
        replaced = len(found.group(0)) if found else len(column) + 2
        if sent < at + delta:
            break
        if sent < at + delta + replaced:
            return at
        delta += replaced - (len(column) + 2)
    return max(0, min(sent - delta, len(query) - 1))
