"""Which NEAREST BY joins dslc runs with an index (optimizer/rules/nearest.py lowers them; in
STREAMING, plan/streaming_sql.py accepts only those): a query whose FROM is `left [alias] JOIN
right [alias] (APPROX | EXACT) NEAREST ...` with no other join, both names of the pipeline, the
ranking `vector_l2_distance`, `vector_cosine_similarity` or `vector_inner_product` of a left
column and a right column, and the right side a SOURCE (read once, also in STREAMING, where its
connector must be one Spark reads as a batch), a BROADCAST state (KEY/OP: its entries, indexed once
per version) or, in BATCH, any stream."""
from __future__ import annotations

import dataclasses

from sqlglot import exp

from dslc.compiler.plan import logical as plan
from dslc.compiler.sparksql.nearest import join_type
from dslc.compiler.sparksql.spark_nodes import NearestBy

FUNCTIONS = ("vector_l2_distance", "vector_cosine_similarity", "vector_inner_product")
READ_ONCE = ("JSON", "CSV", "PARQUET", "TEXT", "KAFKA")     # STREAMING: sources read once as a batch


@dataclasses.dataclass(frozen=True)
class Shape:
    select: exp.Select
    join: exp.Join
    left: plan.PlanNode
    right: plan.PlanNode
    left_alias: str
    right_alias: str
    left_vector: str
    right_vector: str
    function: str


def lowerable(p: plan.Plan, query: plan.Query) -> Shape | None:
    """The parts of `query`'s nearest-by join when it can run with an index, else None."""
    select = query.tree
    if not isinstance(select, exp.Select) or select.args.get("with_") or select.args.get("with"):
        return None
    joins = select.args.get("joins") or []
    source = select.args.get("from_") or select.args.get("from")
    if len(joins) != 1 or not isinstance(joins[0].args.get("nearest"), NearestBy) or source is None:
        return None
    join = joins[0]
    left_table, right_table = source.this, join.this
    if not (isinstance(left_table, exp.Table) and isinstance(right_table, exp.Table)) or join.method \
            or join_type(join) not in ("INNER", "LEFT OUTER"):
        return None
    try:
        left, right = p.node(left_table.name), p.node(right_table.name)
    except KeyError:
        return None
    streaming = p.settings.mode == "STREAMING"
    if isinstance(left, plan.BroadcastState) or (streaming and not isinstance(right, plan.BroadcastState) and not (
            isinstance(right, plan.Source) and right.connector in READ_ONCE)):
        return None
    left_alias, right_alias = left_table.alias_or_name, right_table.alias_or_name
    vectors = _vector_columns(join.args["nearest"].this, left_alias, right_alias, left, right)
    if vectors is None or right_alias.lower() in {c.name.lower() for c in left.schema}:
        return None
    return Shape(select, join, left, right, left_alias, right_alias, *vectors)


def _vector_columns(ranking: exp.Expression, left_alias: str, right_alias: str, left: plan.PlanNode,
                    right: plan.PlanNode) -> tuple[str, str, str] | None:
    """(left column, right column, function) of `f(left.col, right.col)` in either order."""
    if not isinstance(ranking, exp.Anonymous) or ranking.name.lower() not in FUNCTIONS \
            or len(ranking.expressions) != 2 or not all(isinstance(a, exp.Column) for a in ranking.expressions):
        return None
    sides = []
    for column in ranking.expressions:
        side = _side_of(column, left_alias, right_alias, left, right)
        if side is None:
            return None
        sides.append((side, column.name))
    if {s for s, _ in sides} != {"left", "right"}:
        return None
    named = dict(sides)
    return _column(left, named["left"]), _column(right, named["right"]), ranking.name.lower()


def _side_of(column: exp.Column, left_alias: str, right_alias: str, left: plan.PlanNode,
             right: plan.PlanNode) -> str | None:
    qualifier = column.table.lower()
    if qualifier:
        return {left_alias.lower(): "left", right_alias.lower(): "right"}.get(qualifier)
    in_left = column.name.lower() in {c.name.lower() for c in left.schema}
    in_right = column.name.lower() in {c.name.lower() for c in right.schema}
    return "left" if in_left and not in_right else "right" if in_right and not in_left else None


def _column(node: plan.PlanNode, name: str) -> str:
    return next(c.name for c in node.schema if c.name.lower() == name.lower())
