"""Cutting a plan down to what one relation needs, for exploring without side effects.

`:show NAME` (and `dslc test`) must compute only NAME and what it reads, and call no service
NAME does not depend on. `lineage` keeps those nodes; `row_limit` finds where a limit of n rows
can go so that only about n rows reach the first external call: before the first ENRICH or
PROCESS of a run of row-by-row operators that ends in NAME.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from dslc.compiler.plan import logical as plan


def ancestors(p: plan.Plan, names: list[str] | tuple[str, ...]) -> set[str]:
    """`names` and every relation they read, transitively (lower case)."""
    return {node.name.lower() for node in p.upstream(names)}


def lineage(p: plan.Plan, names: list[str] | tuple[str, ...] | None = None) -> plan.Plan:
    """The plan with only the nodes that `names` read (default: the sinks' inputs), and only the
    sinks of those names. Nothing else is computed, so nothing else is called."""
    wanted = [k.input for k in p.sinks] if names is None else list(names)
    keep = ancestors(p, wanted)
    wanted_lower = {w.lower() for w in wanted}
    return dataclasses.replace(
        p, nodes=tuple(n for n in p.nodes if n.name.lower() in keep),
        sinks=tuple(k for k in p.sinks if k.input.lower() in wanted_lower))


@dataclass(frozen=True, slots=True)
class RowLimit:
    """Where n rows can be cut: before `operator` (an ENRICH or PROCESS), or nowhere (`operator`
    None) and `reason` says why every input row is read."""

    operator: str | None
    reason: str


def _main_input(node: plan.PlanNode) -> str | None:
    if isinstance(node, (plan.Enrich, plan.Process, plan.Match)):
        return node.input
    if isinstance(node, plan.Query) and len(node.reads) == 1:
        return node.reads[0]
    return None


def not_row_by_row(node: plan.PlanNode) -> str | None:
    """Why a node's output rows are not each made from one input row alone (None when they are)."""
    if isinstance(node, (plan.Enrich, plan.Process, plan.Match)):
        return None
    if isinstance(node, plan.Source):
        return None
    if not isinstance(node, plan.Query):
        return f"{node.name} is a broadcast state"
    if node.aggregates:
        return f"{node.name} aggregates"
    if len(node.reads) != 1:
        return f"{node.name} reads {len(node.reads)} relations"
    try:
        tree = sqlglot.parse_one(node.sql, dialect="spark")
    except sqlglot.errors.ParseError:
        return f"{node.name}'s query could not be read"
    if not isinstance(tree, exp.Select):
        return f"{node.name} is not a plain SELECT"
    for key, what in (("joins", "joins"), ("distinct", "uses DISTINCT"), ("order", "sorts"),
                      ("group", "groups"), ("having", "groups"), ("limit", "has a LIMIT"),
                      ("with_", "uses WITH"), ("with", "uses WITH")):
        if tree.args.get(key):
            return f"{node.name} {what}"
    if tree.find(exp.Window):
        return f"{node.name} uses a window function"
    if tree.find(exp.Subquery):
        return f"{node.name} has a subquery"
    return None


def row_limit(p: plan.Plan, name: str) -> RowLimit:
    """Where to cut the input so that about n rows reach the external calls of `name`'s lineage.

    Walks from `name` towards its source through row-by-row operators that nothing else reads;
    the limit goes before the last ENRICH/PROCESS met (the one nearest the source)."""
    current = p.node(name)
    first_call: str | None = None
    while True:
        reason = not_row_by_row(current)
        if reason is not None:
            break
        if isinstance(current, (plan.Enrich, plan.Process)):
            first_call = current.name
        upstream = _main_input(current)
        if upstream is None:
            reason = None
            break
        readers = [r for r in p.consumers(upstream) if not isinstance(r, plan.Sink)]
        if len(readers) != 1:
            reason = f"{upstream} is read by {len(readers)} relations"
            break
        current = p.node(upstream)
    if first_call is not None:
        return RowLimit(first_call, "every operator from the source to it is row-by-row")
    calls = [n.name for n in p.nodes if isinstance(n, (plan.Enrich, plan.Process))
             and n.name.lower() in ancestors(p, [name])]
    if not calls:
        return RowLimit(None, "no external calls: Spark reads only what it shows")
    return RowLimit(None, f"every input row is read ({reason or 'no row-by-row path'}): "
                          f"{', '.join(calls)} run{'s' if len(calls) == 1 else ''} on all of it")
