"""Column lineage, derived at compile time: for every column of every stream and sink, the source
columns it is made from.

Through SQL it is sqlglot's lineage of each output column of the query; through ENRICH the input
columns pass as they are and each RETURNS column (and the PROVENANCE column) comes from the
columns the request reads (the URL's and BODY's for HTTP, SYSTEM and PROMPT for MODEL, INPUT for
EMBEDDING, the query's parameters for SQL, the whole row for PYTHON); through MATCH and NEAREST
BY the columns of both sides pass; a PROCESS's RETURNS come from every column it is given.
OpenLineage's column-lineage facet (`dslc run --lineage`) and `dslc explain --lineage` read it.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.lineage import lineage as sql_lineage

from dslc.compiler.plan import logical as plan
from dslc.runtime.calls.url import placeholders

#: one source column: (source or broadcast-source name, column)
Origin = tuple[str, str]
#: a node's columns: its column name (as spelled) -> the source columns it comes from
Columns = dict[str, frozenset[Origin]]


@dataclass(frozen=True)
class SinkLineage:
    """One sink's columns and where each comes from."""

    sink: plan.Sink
    columns: Columns


def request_columns(node: plan.Enrich, inputs: Iterable[str]) -> tuple[str, ...]:
    """The input columns an ENRICH's request reads (a `${NAME}` secret is no column)."""
    names = {c.lower(): c for c in inputs}
    call = node.call
    if isinstance(call, plan.HttpCall):
        read = placeholders(call.url) + (tuple(call.body) if call.body else ())
        if call.method == "POST" and not call.body:
            return tuple(names.values())           # the whole row is the body
    elif isinstance(call, plan.ModelCall):
        read = placeholders(call.system or "") + placeholders(call.prompt)
    elif isinstance(call, plan.EmbeddingCall):
        read = placeholders(call.input)
    elif isinstance(call, plan.SqlCall):
        read = tuple(call.params)
    else:                                          # PYTHON: the function gets the row
        return tuple(names.values())
    return tuple(dict.fromkeys(names[r.lower()] for r in read if r.lower() in names))


def _lookup(columns: Columns, name: str) -> frozenset[Origin]:
    """A column's origins, its name matched as Spark matches it (case-insensitive)."""
    if name in columns:
        return columns[name]
    lowered = name.lower()
    return next((v for k, v in columns.items() if k.lower() == lowered), frozenset())


def _everything(columns: Columns) -> frozenset[Origin]:
    return frozenset().union(*columns.values()) if columns else frozenset()


def _query(node: plan.Query, known: dict[str, Columns]) -> Columns:
    """Each output column of a query: the source columns sqlglot's lineage finds under it."""
    inputs = {name.lower(): known.get(name.lower(), {}) for name in node.reads}
    schema = {name: {c: "STRING" for c in cols} for name, cols in inputs.items()}
    out: Columns = {}
    for column in node.schema:
        try:
            root = sql_lineage(exp.to_identifier(column.name), node.sql, schema=schema, dialect="spark")
            leaves = [n for n in root.walk() if not n.downstream]
        except (SqlglotError, KeyError, ValueError, AttributeError):
            out[column.name] = frozenset().union(*(_everything(c) for c in inputs.values()))
            continue
        found: set[Origin] = set()
        for leaf in leaves:
            table = leaf.source.name.lower() if isinstance(leaf.source, exp.Table) else ""
            if table in inputs:
                found |= _lookup(inputs[table], leaf.name.rsplit(".", 1)[-1])
        out[column.name] = frozenset(found)
    return out


def _enrich(node: plan.Enrich, upstream: Columns) -> Columns:
    out = dict(upstream)
    read = frozenset().union(*(_lookup(upstream, c) for c in request_columns(node, upstream)))
    for column in node.schema[len(upstream):]:     # RETURNS, then PROVENANCE's column
        out[column.name] = read
    return out


def _match(node: plan.Match, upstream: Columns, state: Columns) -> Columns:
    out = dict(upstream)
    for state_column, name in node.state_columns:
        out[name] = _lookup(state, state_column)
    return out


def _nearest(node: plan.NearestJoin, left: Columns, right: Columns) -> Columns:
    out: Columns = {}
    for column in node.schema:
        origins = _lookup(left, column.name) or _lookup(right, column.name)
        if not origins and column.name.lower().startswith(f"{node.right_alias.lower()}_"):
            origins = _lookup(right, column.name[len(node.right_alias) + 1:])
        out[column.name] = origins or (_lookup(left, node.left_vector) | _lookup(right, node.right_vector))
    return out


def columns_of(p: plan.Plan) -> dict[str, Columns]:
    """Every stream's (and source's and broadcast state's) columns and their origins, by lower-case name."""
    known: dict[str, Columns] = {}
    for node in p.nodes:
        if isinstance(node, plan.Source):
            cols = {c.name: frozenset({(node.name, c.name)}) for c in node.schema}
        elif isinstance(node, plan.BroadcastState):
            source = known.get(node.source.lower(), {})
            cols = {c.name: _lookup(source, c.name) or frozenset({(node.source, c.name)}) for c in node.schema}
        elif isinstance(node, plan.Query):
            cols = _query(node, known)
        elif isinstance(node, plan.Enrich):
            cols = _enrich(node, known.get(node.input.lower(), {}))
        elif isinstance(node, plan.Match):
            cols = _match(node, known.get(node.input.lower(), {}), known.get(node.state.lower(), {}))
        elif isinstance(node, plan.Process):
            given = [known.get(node.input.lower(), {})] + [known.get(s.lower(), {}) for s in node.states]
            every = frozenset().union(*(_everything(g) for g in given))
            cols = {c.name: every for c in node.schema}
        else:
            cols = _nearest(node, known.get(node.left.lower(), {}), known.get(node.right.lower(), {}))
        known[node.name.lower()] = cols
    return known


def sinks_of(p: plan.Plan) -> list[SinkLineage]:
    """Each sink's columns (its input's) and their origins, in the order the sinks are written."""
    known = columns_of(p)
    return [SinkLineage(sink, known.get(sink.input.lower(), {})) for sink in p.sinks]


def render_table(p: plan.Plan) -> str:
    """`dslc explain --lineage`: one line per sink column, with the source columns it comes from."""
    rows = [("sink", "column", "comes from")]
    for item in sinks_of(p):
        for column, origins in item.columns.items():
            shown = ", ".join(f"{source}.{col}" for source, col in sorted(origins)) or "-"
            rows.append((f"{item.sink.input} (line {item.sink.line})", column, shown))
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    return "".join(f"{r[0].ljust(widths[0])}  {r[1].ljust(widths[1])}  {r[2]}".rstrip() + "\n" for r in rows)

