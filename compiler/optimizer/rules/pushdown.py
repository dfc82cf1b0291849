"""Predicate pushdown: move WHERE conjuncts that read only an ENRICH's input columns before it.

    STREAM e = ENRICH paid WITH HTTP ...;            e__filter := SELECT * FROM paid WHERE amount > 100
    STREAM big = SELECT * FROM e WHERE amount > 100  =>  STREAM e = ENRICH e__filter WITH HTTP ...;
                                                     STREAM big = SELECT * FROM e;

Fewer rows reach the enrichment, so fewer external calls are made. An ENRICH with an EXPECT on
its output keeps its filters after it: the EXPECT judges, counts and quarantines every row the
ENRICH makes, and a filter moved before it would hide rows from it (an EXPECT on the ENRICH's
input is no obstacle: the filter moves between the two). An ENRICH passes its input
columns through unchanged (a list result repeats them), so a row filter on them commutes with it.
The rule works on the queries' sqlglot trees and builds the new SQL with sqlglot's builders, the
relation's name quoted as Spark needs it.
"""
from __future__ import annotations

import dataclasses

from sqlglot import exp

from dslc.compiler.plan import logical as plan
from dslc.compiler.plan import names

NAME = "pushdown_filters"

# What in the filtering query blocks the rewrite, and why (each has a case in
# tests/optimizer/fixtures/pushdown_filters.txt). The query must also read one relation, and
# that relation be an ENRICH: a PROCESS returns new columns only, a MATCH's rows depend on its
# join (Spark's own pushdown handles it), SQL over SQL is Catalyst's, a SOURCE has nothing
# before it, and a kind of node added later is not passed until it is known to commute.
BLOCKERS = (
    exp.Join,       # the WHERE filters joined rows, which the ENRICH alone never sees
    exp.With,       # the relation read may be a CTE's, not the ENRICH's
    exp.Subquery,   # a subquery's columns and correlation are its own
)

# Functions whose result changes from one evaluation to the next: a conjunct calling one keeps
# its place, since moving it would change which rows it sees and when.
NON_DETERMINISTIC = frozenset({"rand", "random", "randn", "uuid", "shuffle", "now", "current_timestamp",
                               "monotonically_increasing_id", "spark_partition_id", "input_file_name"})


def pushdown_filters(p: plan.Plan) -> plan.Plan:
    """Apply the rewrite everywhere it is safe; a note per rewrite (or that there was none)."""
    notes: list[str] = []
    nodes = list(p.nodes)
    by_name = {n.name.lower(): n for n in reversed(nodes)}
    for node in list(nodes):
        if not isinstance(node, plan.Query):
            continue
        target = by_name.get(node.reads[0].lower())
        if not isinstance(target, plan.Enrich):
            continue
        if len(p.consumers(target.name)) != 1:
            continue    # another reader needs the unfiltered rows (a rewrite never adds readers of it)
        expect = p.expectation(target.name)
        if expect is not None:      # the EXPECT judges (and counts) every row the ENRICH makes
            notes.append(f"nothing moved from '{node.name}' (line {node.line}) before ENRICH '{target.name}': "
                         f"the EXPECT on line {expect.line} judges every row of '{target.name}'")
            continue
        split = _split(node, target)
        if split is None:
            continue
        movable, kept = split
        pushed, new_enrich, new_query = _rewrite(node, target, by_name[target.input.lower()], movable, kept)
        at = nodes.index(target)
        nodes[at] = new_enrich
        nodes.insert(at, pushed)
        nodes[nodes.index(node)] = new_query
        by_name.update({pushed.name.lower(): pushed, target.name.lower(): new_enrich, node.name.lower(): new_query})
        notes.append(pushed.origin)
    found = tuple((NAME, n) for n in notes) or ((NAME, "nothing to push"),)
    return dataclasses.replace(p, nodes=tuple(nodes), notes=p.notes + found)


def _single_table_filter(query: plan.Query) -> tuple[exp.Select, exp.Expression] | None:
    """The query's SELECT and WHERE, when it is a plain filter over one relation."""
    tree = query.tree
    if not isinstance(tree, exp.Select) or query.aggregates or len(query.reads) != 1:
        return None
    if tree.find(*BLOCKERS):
        return None
    where = tree.args.get("where")
    return (tree, where.this) if where is not None else None


def _split(query: plan.Query, target: plan.Enrich) -> tuple[list[exp.Expression], list[exp.Expression]] | None:
    """The WHERE conjuncts that may move before `target`, and those that stay; None if none moves."""
    found = _single_table_filter(query)
    if found is None:
        return None
    tree, condition = found
    passthrough = {f.name.lower() for f in target.schema} - {f.name.lower() for f in target.returns}
    alias = tree.args["from_" if "from_" in tree.args else "from"].this.alias_or_name.lower()
    movable, kept = [], []
    for part in _conjuncts(condition):
        columns = list(part.find_all(exp.Column))
        reads_input = bool(columns) and all(c.name.lower() in passthrough and c.table.lower() in ("", alias)
                                            for c in columns)
        deterministic = not any(_function_name(f) in NON_DETERMINISTIC for f in part.find_all(exp.Func))
        (movable if reads_input and deterministic else kept).append(part)
    return (movable, kept) if movable else None


def _rewrite(query: plan.Query, target: plan.Enrich, upstream: plan.PlanNode, movable: list[exp.Expression],
             kept: list[exp.Expression]) -> tuple[plan.Query, plan.Enrich, plan.Query]:
    """The filter before the ENRICH, the ENRICH reading it, and the query with what stayed."""
    moved = [_unqualified(c) for c in movable]
    moved_sql = " AND ".join(c.sql(dialect="spark") for c in moved)
    filter_tree = exp.select("*").from_(exp.Table(this=names.identifier(target.input))).where(exp.and_(*moved))
    note = (f"{moved_sql} moved from '{query.name}' (line {query.line}) before ENRICH "
            f"'{target.name}' (line {target.line})")
    pushed = plan.Query(name=f"{target.name}__filter", schema=upstream.schema, line=query.line, span=query.span,
                        sql=filter_tree.sql(dialect="spark"), tree=filter_tree, reads=(target.input,),
                        aggregates=False, origin=note)
    remaining = query.tree.copy()
    remaining.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)
    new_query = dataclasses.replace(query, sql=remaining.sql(dialect="spark"), tree=remaining)
    return pushed, dataclasses.replace(target, input=pushed.name), new_query


def _function_name(function: exp.Func) -> str:
    """`rand` for sqlglot's Rand, `now` for a function sqlglot does not know (Anonymous)."""
    return (function.name if isinstance(function, exp.Anonymous) else function.sql_name()).lower()


def _conjuncts(condition: exp.Expression) -> list[exp.Expression]:
    return list(condition.flatten()) if isinstance(condition, exp.And) else [condition]


def _unqualified(condition: exp.Expression) -> exp.Expression:
    copy = condition.copy()
    for column in copy.find_all(exp.Column):
        column.set("table", None)
    return copy
