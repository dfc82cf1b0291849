"""Predicate pushdown: move WHERE conjuncts that read only an ENRICH's input columns before it.

    STREAM e = ENRICH paid WITH HTTP ...;            STREAM e__filter = SELECT * FROM paid WHERE amount > 100;
    STREAM big = SELECT * FROM e WHERE amount > 100  =>  STREAM e = ENRICH e__filter WITH HTTP ...;
                                                     STREAM big = SELECT * FROM e;

Fewer rows reach the enrichment, so fewer external calls are made. An ENRICH passes its input
columns through unchanged (a list result repeats them), so a row filter on them commutes with it.
"""
from __future__ import annotations

import dataclasses

import sqlglot
from sqlglot import exp

from dslc.compiler.plan import logical as plan, names

NAME = "pushdown_filters"

# What blocks the rewrite, and why:
BLOCKERS = (
    plan.Process,   # PROCESS returns new columns only: nothing passes through it unchanged
    plan.Match,     # MATCH's output depends on the join; handled by Spark's own pushdown
    plan.Query,     # SQL over SQL: Catalyst pushes filters itself
    plan.Source,    # nothing to push past
)


def _single_table_filter(query: plan.Query) -> tuple[exp.Select, exp.Expression] | None:
    """The query's SELECT and WHERE, when it is a plain filter over one relation."""
    tree = sqlglot.parse_one(query.sql, dialect="spark")
    if not isinstance(tree, exp.Select) or query.aggregates or len(query.reads) != 1:
        return None
    if tree.args.get("joins") or tree.args.get("with_") or tree.args.get("with") or tree.find(exp.Subquery):
        return None
    where = tree.args.get("where")
    return (tree, where.this) if where is not None else None


def _conjuncts(condition: exp.Expression) -> list[exp.Expression]:
    return list(condition.flatten()) if isinstance(condition, exp.And) else [condition]


def pushdown_filters(p: plan.Plan) -> tuple[plan.Plan, list[str]]:
    """Apply the rewrite everywhere it is safe; return the plan and a note per rewrite."""
    notes: list[str] = []
    nodes = list(p.nodes)
    by_name = {n.name.lower(): n for n in reversed(nodes)}
    for index, node in enumerate(list(nodes)):
        if not isinstance(node, plan.Query):
            continue
        target = by_name.get(node.reads[0].lower())
        if not isinstance(target, plan.Enrich) or isinstance(target, BLOCKERS):
            continue
        if len(p.consumers(target.name)) != 1:
            continue    # another reader needs the unfiltered rows (a rewrite never adds readers of it)
        found = _single_table_filter(node)
        if found is None:
            continue
        tree, condition = found
        passthrough = {f.name.lower() for f in target.schema} - {f.name.lower() for f in target.returns}
        alias = tree.args["from_" if "from_" in tree.args else "from"].this.alias_or_name.lower()
        movable, kept = [], []
        for part in _conjuncts(condition):
            columns = list(part.find_all(exp.Column))
            reads_input = columns and all(c.name.lower() in passthrough and c.table.lower() in ("", alias)
                                          for c in columns)
            deterministic = not any(f.name.lower() in ("rand", "random", "uuid", "now", "current_timestamp")
                                    for f in part.find_all(exp.Func))
            (movable if reads_input and deterministic else kept).append(part)
        if not movable:
            continue
        filter_name = f"{target.name}__filter"
        moved = [_unqualified(c) for c in movable]
        moved_sql = " AND ".join(c.sql(dialect="spark") for c in moved)
        upstream = by_name[target.input.lower()]
        pushed_tree = exp.select("*").from_(exp.Table(this=names.identifier(target.input))).where(exp.and_(*moved))
        pushed = plan.Query(name=filter_name, schema=upstream.schema, line=node.line, span=node.span,
                            sql=pushed_tree.sql(dialect="spark"), reads=(target.input,), aggregates=False)
        new_enrich = dataclasses.replace(target, input=filter_name)
        remaining = tree.copy()
        if kept:
            remaining.set("where", exp.Where(this=exp.and_(*kept)))
        else:
            remaining.set("where", None)
        new_query = dataclasses.replace(node, sql=remaining.sql(dialect="spark"))
        target_index = nodes.index(target)
        nodes[target_index] = new_enrich
        nodes.insert(target_index, pushed)
        nodes[nodes.index(node)] = new_query
        by_name.update({filter_name.lower(): pushed, target.name.lower(): new_enrich, node.name.lower(): new_query})
        notes.append(f"{moved_sql} moved from '{node.name}' (line {node.line}) before ENRICH "
                     f"'{target.name}' (line {target.line})")
    return dataclasses.replace(p, nodes=tuple(nodes)), notes


def _unqualified(condition: exp.Expression) -> exp.Expression:
    copy = condition.copy()
    for column in copy.find_all(exp.Column):
        column.set("table", None)
    return copy
