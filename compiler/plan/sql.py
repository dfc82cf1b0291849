"""Spark SQL analysis with sqlglot: which relations a query reads, unknown tables and columns
(with their exact position in the file), and the query's output schema."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope
from sqlglot.schema import MappingSchema
from sqlglot.tokens import Token, TokenType

from dslc.compiler.frontend import ast
from dslc.compiler.diagnostics import Diagnostic, did_you_mean, error
from dslc.compiler.plan.logical import Field, Schema
from dslc.compiler.source import Span
from dslc.compiler.plan.sqltypes import UNKNOWN

Schemas = Mapping[str, Schema | None]   # relation name (lower case) → schema, None if unknown

_SPARK = Dialect.get_or_raise("spark")
_WINDOW_TYPE = "STRUCT<start: TIMESTAMP, end: TIMESTAMP>"

# sqlglot reports a half-written expression by its class name; say it in SQL words instead.
_MISSING = re.compile(r"Required keyword: '(\w+)' missing for <class '[\w.]+\.(\w+)'>")
_SQL_WORDS = {"Where": "WHERE clause", "Having": "HAVING clause", "Group": "GROUP BY clause",
              "Order": "ORDER BY clause", "EQ": "'='", "NEQ": "'<>'", "GT": "'>'", "LT": "'<'",
              "GTE": "'>='", "LTE": "'<='", "And": "AND", "Or": "OR", "Add": "'+'", "Sub": "'-'",
              "Mul": "'*'", "Div": "'/'", "Like": "LIKE", "In": "IN", "Not": "NOT"}


@dataclass(frozen=True)
class QueryInfo:
    """What a query reads and produces."""

    reads: tuple[str, ...]
    schema: Schema | None
    aggregates: bool


def _span_of(node: exp.Expression, sql: ast.Sql) -> Span:
    meta = node.meta if node.meta.get("start") is not None else {}
    if not meta:
        identifier = node.find(exp.Identifier)
        meta = identifier.meta if identifier is not None else {}
    if meta.get("start") is None:
        return sql.span.sub(0, 1)
    return sql.span.sub(meta["start"], meta["end"] - meta["start"] + 1)


def parse_sql(sql: ast.Sql, problems: list[Diagnostic], *, condition: bool = False) -> exp.Expression | None:
    """Parse a query (or a WHERE condition) with sqlglot's Spark dialect."""
    try:
        if condition:
            return sqlglot.parse_one(sql.text, dialect="spark", into=exp.Condition)
        statements = _SPARK.parser().parse(_window_calls_as_names(_SPARK.tokenize(sql.text)), sql.text)
    except ParseError as exc:
        for item in exc.errors[:3]:
            offset = _offset(sql.text, item.get("line") or 1, item.get("col") or 1)
            highlight = len(item.get("highlight") or " ")
            start = max(0, offset - highlight)
            problems.append(error("E0206", sql.span.sub(start, highlight),
                                  detail=_readable(item.get("description", str(exc)).split(". Line")[0])))
        return None
    except SqlglotError as exc:
        problems.append(error("E0206", sql.span.sub(0, 1), detail=str(exc)))
        return None
    if len(statements) != 1 or statements[0] is None:
        problems.append(error("E0206", sql.span.sub(0, 1), detail="expected exactly one query"))
        return None
    return statements[0]


def _window_calls_as_names(tokens: list[Token]) -> list[Token]:
    """`window(` is Spark's time-window function, never the WINDOW clause (`WINDOW w AS (...)`).

    sqlglot reads WINDOW as the clause keyword and fails on `GROUP BY window(ts, '1 minute')`;
    retyping the token keeps every position, so error carets stay right.
    """
    for token, following in zip(tokens, tokens[1:]):
        if token.token_type == TokenType.WINDOW and following.token_type == TokenType.L_PAREN:
            token.token_type = TokenType.VAR
    return tokens


def _readable(detail: str) -> str:
    """sqlglot's description of a parse error, with class names turned into SQL words."""
    if detail.startswith("Expecting "):
        return f"expected '{detail[len('Expecting '):]}'"
    match = _MISSING.search(detail)
    if match is None:
        return detail
    what = _SQL_WORDS.get(match.group(2), match.group(2).upper())
    return f"incomplete {what}: something is missing after it"


def _offset(text: str, line: int, col: int) -> int:
    lines = text.split("\n")
    return sum(len(l) + 1 for l in lines[: line - 1]) + col


def relations(tree: exp.Expression) -> list[exp.Table]:
    """The tables a query reads by name (its own CTEs are not relations of the pipeline)."""
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    return [t for t in tree.find_all(exp.Table) if t.name and t.name.lower() not in ctes]


def analyze_query(sql: ast.Sql, tree: exp.Expression, schemas: Schemas,
                  problems: list[Diagnostic]) -> QueryInfo | None:
    """Check a parsed SELECT against the known relations; infer its output schema."""
    reads: list[str] = []
    failed = False
    for table in relations(tree):
        name = table.name.lower()
        if name not in schemas:
            problems.append(error("E0201", _span_of(table.this, sql), hint=did_you_mean(table.name, schemas),
                                  kind="source or stream", name=table.name))
            failed = True
        elif name not in reads:
            reads.append(name)
    if failed:
        return None
    if any(schemas[r] is None for r in reads):
        return QueryInfo(tuple(reads), None, _aggregates(tree))
    if not reads:
        problems.append(error("E0206", sql.span.sub(0, 1), detail="a query must read a source or stream"))
        return None
    if not _check_columns(tree, sql, schemas, problems):
        return None
    return QueryInfo(tuple(reads), _output_schema(tree, schemas, sql, problems), _aggregates(tree))


def _aggregates(tree: exp.Expression) -> bool:
    if tree.find(exp.Group) or tree.find(exp.AggFunc) or tree.find(exp.Window):
        return True
    return any(f.name.lower() in ("window", "session_window") for f in tree.find_all(exp.Anonymous))


def _source_columns(scope: Scope, alias: str, schemas: Schemas) -> set[str] | None:
    source = scope.sources.get(alias)
    if isinstance(source, exp.Table):
        schema = schemas.get(source.name.lower())
        return None if schema is None else {f.name.lower() for f in schema}
    if isinstance(source, Scope) and isinstance(source.expression, exp.Select):
        if any(isinstance(s, exp.Star) or s.is_star for s in source.expression.selects):
            return None
        return {n.lower() for n in source.expression.named_selects}
    return None


def _check_columns(tree: exp.Expression, sql: ast.Sql, schemas: Schemas, problems: list[Diagnostic]) -> bool:
    """Report every column that no relation in scope has; True when all resolve."""
    ok = True
    lambda_vars = {i.name.lower() for lam in tree.find_all(exp.Lambda) for i in lam.expressions}
    for scope in traverse_scope(tree):
        visible: dict[str, set[str] | None] = {}
        walk: Scope | None = scope
        while walk is not None:
            for alias in walk.sources:
                visible.setdefault(alias.lower(), _source_columns(walk, alias, schemas))
            walk = walk.parent
        every = set().union(*[c for c in visible.values() if c is not None]) if visible else set()
        unknown_source = any(c is None for c in visible.values())
        # Names given with AS (GROUP BY / ORDER BY / HAVING may use them); a bare column
        # `SELECT amout` names itself and must not vouch for itself.
        aliases = {s.alias.lower() for s in scope.expression.selects if isinstance(s, exp.Alias)} \
            if isinstance(scope.expression, exp.Select) else set()
        for column in scope.columns:
            name = column.name.lower()
            qualifier = column.table.lower()
            if name in lambda_vars or isinstance(column.this, exp.Star):
                continue
            if qualifier:
                if qualifier in visible:
                    cols = visible[qualifier]
                    if cols is None or name in cols:
                        continue
                    where, pool = f"'{column.table}'", cols
                elif qualifier in every or unknown_source:
                    continue    # struct field access: `w.start`
                else:
                    problems.append(error("E0201", _span_of(column.args["table"], sql), kind="table or alias",
                                          name=column.table, hint=_name_hint(column.table, visible)))
                    ok = False
                    continue
            else:
                if name in every or name in aliases or unknown_source:
                    continue
                where, pool = _where(visible), every | aliases
            problems.append(error("E0204", _span_of(column.this, sql), hint=did_you_mean(column.name, pool),
                                  column=column.name, where=where))
            ok = False
    return ok


def _name_hint(name: str, known: Mapping[str, object]) -> str | None:
    """Did-you-mean, or else the names that are in scope (an AS alias hides the relation's name)."""
    return did_you_mean(name, known) or ("in scope here: " + ", ".join(f"'{n}'" for n in sorted(known))
                                         if known else None)


def _where(visible: Mapping[str, object]) -> str:
    names = sorted(visible)
    return f"'{names[0]}'" if len(names) == 1 else "any of " + ", ".join(f"'{n}'" for n in names)


def _output_schema(tree: exp.Expression, schemas: Schemas, sql: ast.Sql,
                   problems: list[Diagnostic]) -> Schema | None:
    read = {table.name.lower() for table in relations(tree)}     # not every relation: compile time stays linear
    mapping = {name: {f.name: (f.type if f.type != UNKNOWN else "STRING") for f in schema}
               for name in sorted(read) if (schema := schemas.get(name)) is not None}
    try:
        schema = MappingSchema(mapping, dialect="spark")
        typed = annotate_types(qualify(tree.copy(), schema=schema, dialect="spark",
                                       validate_qualify_columns=False, quote_identifiers=False),
                               schema=schema, dialect="spark")
    except SqlglotError as exc:
        problems.append(error("E0206", sql.span.sub(0, 1), detail=str(exc).split("\n")[0]))
        return None
    fields: list[Field] = []
    for projection in typed.selects:
        name = projection.alias_or_name
        inner = projection.unalias() if isinstance(projection, exp.Alias) else projection
        if isinstance(inner, exp.Anonymous) and inner.name.lower() in ("window", "session_window"):
            type_text = _WINDOW_TYPE
        elif projection.type is None or projection.type.is_type(exp.DataType.Type.UNKNOWN):
            type_text = UNKNOWN
        else:
            type_text = projection.type.sql(dialect="spark")
        fields.append(Field(name, type_text))
    return tuple(fields)


def analyze_condition(sql: ast.Sql, sides: Mapping[str, Schema], problems: list[Diagnostic]) -> bool:
    """Check a MATCH predicate whose columns come from `sides` (alias → schema)."""
    tree = parse_sql(sql, problems, condition=True)
    if tree is None:
        return False
    every = {f.name.lower() for schema in sides.values() for f in schema}
    ok = True
    for column in tree.find_all(exp.Column):
        qualifier, name = column.table.lower(), column.name.lower()
        if qualifier and qualifier not in sides:
            problems.append(error("E0201", _span_of(column.args["table"], sql), kind="table or alias",
                                  name=column.table, hint=_name_hint(column.table, sides)))
            ok = False
            continue
        pool = {f.name.lower() for f in sides[qualifier]} if qualifier else every
        if name not in pool:
            where = f"'{column.table}'" if qualifier else _where(sides)
            problems.append(error("E0204", _span_of(column.this, sql), hint=did_you_mean(column.name, pool),
                                  column=column.name, where=where))
            ok = False
    return ok
