"""ENRICH ... WITH SQL db 'SELECT ...': the query checked at compile time and made ready to send.

The query is PostgreSQL's dialect, parsed with sqlglot: one read-only SELECT (a write, DDL,
SELECT INTO, a row lock or several statements is an error). Each `{col}` placeholder becomes a
bind parameter `($n::type)` of the column's type, never text pasted into the query; RETURNS
columns must be among the query's output columns (unless it selects `*`). With BATCH the
comparison `column = {col}` becomes `column = ANY($1::type[])` over the batch's distinct keys and
the compared column is added to the select list as `__dslc_key`, by which the answer's rows are
matched back to their elements; a query that cannot be batched that way is an error saying why.

The query text sent is the user's own, edited only where a placeholder stands (sqlglot's
regenerated SQL would not always be the same query), so what the database runs is what the user
reads in `dslc explain`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import ParseError, TokenError

#: The column of a batched answer that carries the key its row answers.
BATCH_KEY = "__dslc_key"
_HOLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

# Spark SQL type (canonical spelling) -> the PostgreSQL type of its bind parameter.
_PG_TYPES = {"STRING": "text", "INT": "integer", "BIGINT": "bigint", "SMALLINT": "smallint",
             "TINYINT": "smallint", "DOUBLE": "double precision", "FLOAT": "real", "BOOLEAN": "boolean",
             "DATE": "date", "TIMESTAMP": "timestamptz", "TIMESTAMP_NTZ": "timestamp", "BINARY": "bytea"}

# Nodes that write, change the schema or lock rows: none may appear in a lookup.
_WRITES = (exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Create, exp.Drop, exp.Alter, exp.Command,
           exp.Lock, exp.Into, exp.TruncateTable)
# What keeps a query's answer from being split back by key when the batch shares one query.
_UNBATCHABLE = ((exp.Group, "GROUP BY"), (exp.Limit, "LIMIT"), (exp.Offset, "OFFSET"), (exp.Distinct, "DISTINCT"),
                (exp.Window, "a window function"), (exp.AggFunc, "an aggregate"), (exp.Having, "HAVING"))


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the query: what, where in the query text (offset, length), and a hint."""

    message: str
    offset: int
    length: int
    hint: str | None = None
    code: str = "E0331"


@dataclass(frozen=True, slots=True)
class Lookup:
    """A checked query: the text sent per element and, with BATCH, per batch."""

    query: str                       # `{col}` -> ($n::type)
    params: tuple[str, ...]          # the column of each $n, in order
    param_types: tuple[str, ...]     # PostgreSQL type of each $n
    outputs: tuple[str, ...] | None  # output column names (None: the query selects *)
    batch_query: str | None = None   # `column = ANY($1::type[])`, with the key selected as __dslc_key
    batch_key: str | None = None     # the input column whose distinct values a batch sends


def pg_type(spark_type: str) -> str | None:
    """The PostgreSQL type a value of this Spark type is bound as (None: it cannot be a parameter)."""
    base = spark_type.upper()
    if base.startswith("DECIMAL"):
        return "numeric"
    return _PG_TYPES.get(base)


def holes(query: str) -> list[tuple[str, int]]:
    """(column, offset) of each `{col}` outside quoted text, in order."""
    found = []
    for match in _HOLE.finditer(query):
        if not _quoted(query, match.start()):
            found.append((match.group(1), match.start()))
    return found


def _quoted(text: str, at: int) -> bool:
    """Whether `at` lies inside a '...' string, a "..." name or a comment of `text`."""
    i, quote = 0, None
    while i < at:
        ch = text[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif text.startswith("--", i):
            end = text.find("\n", i)
            if end < 0 or end >= at:
                return True
            i = end
        i += 1
    return quote is not None


def compile_lookup(query: str, column_types: dict[str, str], returns: tuple[str, ...],
                   batch: bool) -> tuple[Lookup | None, list[Problem]]:
    """Check `query` against the input's columns (lower-case name -> Spark type) and the RETURNS
    names; the lookup to send, or None, and every problem found (offsets into `query`)."""
    problems: list[Problem] = []
    found = holes(query)
    names: list[str] = []
    for column, at in found:
        if column.lower() not in column_types:
            problems.append(Problem(f"unknown column '{column}' in a query placeholder", at + 1, len(column),
                                    code="E0335"))
        elif column.lower() not in [n.lower() for n in names]:
            names.append(column)
    # each {col} as a parameter of the same length, so that sqlglot's positions are the query's own
    number = {n.lower(): i + 1 for i, n in enumerate(names)}
    parsed_text = _HOLE.sub(lambda m: _padded(f"${number.get(m.group(1).lower(), 1)}", len(m.group(0)))
                            if not _quoted(query, m.start()) else m.group(0), query)
    tree = _parse(parsed_text, problems)
    if tree is None or problems:
        return None, problems
    outputs = _outputs(tree)
    if outputs is not None:
        lowered = {o.lower() for o in outputs}
        for name in returns:
            if name.lower() not in lowered:
                problems.append(Problem(f"RETURNS column '{name}' is not a column of the query's answer",
                                        -1, 0, code="E0334",
                                        hint="the query gives " + (", ".join(outputs) or "no named column")
                                        + f"; name it in the select list (... AS {name})"))
    types = tuple(pg_type(column_types[n.lower()]) or "" for n in names)
    for column, kind in zip(names, types):
        if not kind:
            at = next(o for c, o in found if c.lower() == column.lower())
            problems.append(Problem(f"column '{column}' of type {column_types[column.lower()]} cannot be a "
                                    "query parameter", at + 1, len(column), code="E0335",
                                    hint="CAST it to STRING, a number, BOOLEAN, DATE or TIMESTAMP before the ENRICH"))
    text = _HOLE.sub(lambda m: f"(${number[m.group(1).lower()]}::{types[number[m.group(1).lower()] - 1]})"
                     if not _quoted(query, m.start()) and m.group(1).lower() in number else m.group(0), query)
    lookup = Lookup(text, tuple(names), types, outputs)
    if batch and not problems:
        lookup = _batched(query, parsed_text, tree, lookup, found, problems)
    return (None if problems else lookup), problems


def _padded(text: str, width: int) -> str:
    return text + " " * max(0, width - len(text))


def _parse(text: str, problems: list[Problem]) -> exp.Expression | None:
    try:
        statements = [s for s in sqlglot.parse(text, read="postgres") if s is not None]
    except ParseError as exc:
        detail = exc.errors[0] if exc.errors else {}
        highlight = detail.get("highlight") or ""
        offset = _offset(text, detail.get("line", 1), detail.get("col", 1)) - len(highlight) + 1
        description = str(detail.get("description", exc))
        if "<class" in description or not description:
            description = f"unexpected '{highlight.strip()}'"
        problems.append(Problem(f"SQL syntax error: {description}", max(offset, 0), len(highlight) or 1,
                                code="E0332"))
        return None
    except TokenError as exc:
        problems.append(Problem(f"SQL syntax error: {exc}", 0, len(text), code="E0332",
                                hint="a quote or a comment is not closed"))
        return None
    if len(statements) != 1:
        problems.append(Problem(f"a lookup is one SELECT, got {len(statements)} statements", 0, len(text),
                                hint="keep one SELECT; a lookup never writes"))
        return None
    tree = statements[0]
    writes = next(iter(tree.find_all(*_WRITES)), None)
    if not isinstance(tree, exp.Query) or writes is not None:
        what = type(writes or tree).__name__.upper()
        problems.append(Problem(f"a lookup must be a read-only SELECT, not {what}", 0, len(text),
                                hint="ENRICH ... WITH SQL reads; write with SINK ... TO DATABASE"))
        return None
    return tree


def _offset(text: str, line: int, col: int) -> int:
    """The offset of 1-based (line, col) in `text`."""
    lines = text.split("\n")
    return sum(len(lines[i]) + 1 for i in range(min(line - 1, len(lines)))) + col - 1


def _outputs(tree: exp.Expression) -> tuple[str, ...] | None:
    """The query's output column names; None when it selects `*` (known only to the database)."""
    select = tree
    while isinstance(select, exp.SetOperation):
        select = select.this
    if not isinstance(select, exp.Select):
        return None
    names = []
    for item in select.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and item.is_star):
            return None
        names.append(item.alias_or_name)
    return tuple(names)


def _batched(query: str, parsed_text: str, tree: exp.Expression, lookup: Lookup,
             found: list[tuple[str, int]], problems: list[Problem]) -> Lookup:
    """The batch form of a lookup (`column = ANY($1::type[])`, key selected), or a problem saying why not."""
    def refuse(why: str, offset: int = 0, length: int = 0, hint: str | None = None) -> Lookup:
        problems.append(Problem(f"this query cannot be batched: {why}", offset, length or len(query), code="E0333",
                                hint=hint or "drop BATCH (one query per element), or write the lookup as "
                                              "SELECT ... FROM t WHERE key_column = {col}"))
        return lookup

    if len(lookup.params) != 1 or len(found) != 1:
        return refuse(f"it has {len(found)} placeholders; a batch sends the distinct values of one column")
    column, at = found[0]
    if not isinstance(tree, exp.Select):
        return refuse("it is not one plain SELECT (a UNION answers the batch as a whole)")
    for kind, what in _UNBATCHABLE:
        node = next(iter(tree.find_all(kind)), None)
        if node is not None and (kind is not exp.Distinct or tree.args.get("distinct") is node):
            return refuse(f"{what} would answer the batch as a whole, not each key")
    parameter = next(iter(tree.find_all(exp.Parameter)))
    compare = parameter.parent
    other = compare.expression if compare is not None and compare.this is parameter else \
        (compare.this if compare is not None else None)
    if not isinstance(compare, exp.EQ) or not isinstance(other, exp.Column):
        return refuse("the placeholder is not compared with a column by '='", at, len(column) + 2)
    node = compare.parent
    while isinstance(node, (exp.And, exp.Paren)):
        node = node.parent
    if not isinstance(node, exp.Where) or node.parent is not tree:
        return refuse("the comparison is not a condition of the WHERE clause (joined by AND)", at, len(column) + 2)
    span = _comparison_span(parsed_text, at, len(column) + 2, other)
    if span is None:
        return refuse("the comparison could not be located in the query", at, len(column) + 2)
    start, end = span
    key_sql = other.sql(dialect="postgres")
    batch_text = query[:start] + f"{key_sql} = ANY($1::{lookup.param_types[0]}[])" + query[end:]
    select_end = _select_list_end(parsed_text)
    if select_end is None:
        return refuse("it has no FROM clause")
    if select_end > start:      # the comparison is not in the select list; keep offsets right
        return refuse("the placeholder stands before FROM")
    batch_text = batch_text[:select_end].rstrip() + f", {key_sql} AS {BATCH_KEY} " + batch_text[select_end:]
    return Lookup(lookup.query, lookup.params, lookup.param_types, lookup.outputs, batch_text, column)


def _comparison_span(text: str, at: int, width_of_hole: int, other: exp.Column) -> tuple[int, int] | None:
    """Start and end offsets of `column = $1` or `$1 = column` in the (placeholder-padded) text."""
    tokens = Postgres().tokenize(text)
    index = next((i for i, t in enumerate(tokens) if t.start == at), None)
    if index is None:
        return None
    width = 2 * len(other.parts) - 1
    after = tokens[index + 2:index + 3]     # $ and the number are two tokens
    if after and after[0].text == "=":
        last = tokens[index + 2 + width] if index + 2 + width < len(tokens) else None
        return (at, last.end + 1) if last is not None else None
    before = tokens[index - 1] if index >= 1 else None
    if before is not None and before.text == "=" and index - 1 - width >= 0:
        return tokens[index - 1 - width].start, at + width_of_hole
    return None


def _select_list_end(text: str) -> int | None:
    """Offset of the outermost SELECT's FROM (where its select list ends)."""
    depth = 0
    for token in Postgres().tokenize(text):
        if token.text == "(":
            depth += 1
        elif token.text == ")":
            depth -= 1
        elif depth == 0 and token.token_type.name == "FROM":
            return token.start
    return None
