"""NEAREST BY with an index: a query's nearest-by join whose right side is bounded becomes a probe
of that side's index (runtime/vectors/) instead of Spark's rewrite, a cross product of both sides.

    STREAM m = SELECT q.id, d.title FROM questions q JOIN docs d APPROX NEAREST 3 BY DISTANCE
               vector_l2_distance(q.embedding, d.embedding);
    =>  m__nearest := NearestJoin[questions x docs AS d] ...      (docs read once and indexed)
        m := SELECT q.id, d.title FROM m__nearest q               (d: the matched row, a struct)

The probe's output holds the left columns, the right row as a struct named after the right alias
(so `d.title` reads it unchanged) and the right columns the left lacks under their own names (so
an unqualified `title` does too); a `*` is written out as the columns Spark's join gives, and an
unaliased computed item gets the name the checker gave it (Spark would name `upper(d.title)` after
the struct). Lowered: a query whose FROM is `left [alias] JOIN right [alias] NEAREST ...` with no
other join, both names of the pipeline, the ranking `vector_l2_distance`, `vector_cosine_similarity`
or `vector_inner_product` of a left column and a right column, and the right side a SOURCE (read
once, also in STREAMING) or, in BATCH, any stream. Anything else is left to Spark.
"""
from __future__ import annotations

import dataclasses

from sqlglot import exp

from dslc.compiler.plan import logical as plan
from dslc.compiler.plan.nearest_shape import Shape, lowerable
from dslc.compiler.sparksql.nearest import join_type
from dslc.compiler.sparksql.spark_nodes import NearestBy
from dslc.compiler.sparksql.sqltypes import UNKNOWN

NAME = "index_nearest"


def index_nearest(p: plan.Plan) -> plan.Plan:
    """Every lowerable NEAREST BY query as a NearestJoin and the query over it."""
    nodes: list[plan.PlanNode] = []
    notes: list[str] = []
    for node in p.nodes:
        shape = lowerable(p, node) if isinstance(node, plan.Query) else None
        if shape is None:
            nodes.append(node)
            continue
        probe = _probe(node, shape)
        nodes += [probe, _rewritten(node, shape, probe)]
        notes.append(f"{node.name}: {shape.right.name} indexed by {shape.right_vector}, probed by "
                     f"{shape.left.name}.{shape.left_vector} ({probe.name})")
    if not notes:
        return p
    return dataclasses.replace(p, nodes=tuple(nodes), notes=p.notes + tuple((NAME, n) for n in notes))


def _probe(query: plan.Query, shape: Shape) -> plan.NearestJoin:
    nearest: NearestBy = shape.join.args["nearest"]
    taken = {c.name.lower() for c in shape.left.schema} | {shape.right_alias.lower()}
    struct = ", ".join(f"`{c.name}`: {c.type}" for c in shape.right.schema)
    unknown = any(c.type == UNKNOWN for c in shape.right.schema)
    schema = (*shape.left.schema, plan.Column(shape.right_alias, UNKNOWN if unknown else f"STRUCT<{struct}>"),
              *(c for c in shape.right.schema if c.name.lower() not in taken))
    return plan.NearestJoin(name=f"{query.name}__nearest", schema=schema, line=query.line, span=query.span,
                            left=shape.left.name, right=shape.right.name, right_alias=shape.right_alias,
                            left_vector=shape.left_vector, right_vector=shape.right_vector,
                            function=shape.function, similarity=bool(nearest.args.get("similarity")),
                            approx=bool(nearest.args.get("approximate")), k=nearest.k,
                            outer=join_type(shape.join) == "LEFT OUTER",
                            state=isinstance(shape.right, plan.BroadcastState))


def _rewritten(query: plan.Query, shape: Shape, probe: plan.NearestJoin) -> plan.Query:
    """The query over the probe's output: FROM it under the left alias, no join, stars written
    out, computed items named as the checker named them."""
    tree = shape.select.copy()
    tree.set("joins", None)
    tree.args["from_" if "from_" in tree.args else "from"].set(
        "this", exp.to_table(probe.name).as_(shape.left_alias))
    items: list[exp.Expression] = []
    names = iter(query.schema)
    left = [c.name for c in shape.left.schema]
    right = [c.name for c in shape.right.schema]
    for item in tree.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            whose = item.table.lower() if isinstance(item, exp.Column) else ""
            if whose in ("", shape.left_alias.lower()):
                items += [exp.column(c, table=shape.left_alias, quoted=True) for c in left]
            if whose in ("", shape.right_alias.lower()):
                items += [exp.column(c, table=shape.right_alias, quoted=True) for c in right]
            for _ in (left if whose in ("", shape.left_alias.lower()) else []) + \
                    (right if whose in ("", shape.right_alias.lower()) else []):
                next(names, None)
            continue
        field = next(names, None)
        if not isinstance(item, (exp.Alias, exp.Column)) and field is not None:
            item = exp.alias_(item, exp.to_identifier(field.name, quoted=True))
        items.append(item)
    tree.set("expressions", items)
    from dslc.compiler.sparksql.spark_dialect import SPARK_SQL

    return dataclasses.replace(query, sql=tree.sql(dialect=SPARK_SQL), tree=tree, reads=(probe.name,))
