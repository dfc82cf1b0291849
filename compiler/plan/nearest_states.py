"""A query reads a BROADCAST state only as the right side of a NEAREST BY join that dslc runs with
an index (optimizer/rules/nearest.py): Spark has no table of a state's entries, so such a join is
lowered or refused here, in both modes, with the conditions it must meet."""
from __future__ import annotations

from sqlglot import exp

from dslc.compiler.diagnostics import Diagnostic, error
from dslc.compiler.frontend import ast
from dslc.compiler.plan import logical as plan
from dslc.compiler.plan.nearest_shape import lowerable
from dslc.compiler.sparksql.nearest import nearest_joins
from dslc.compiler.sparksql.sql import extent


def nearest_rights(tree: exp.Expression) -> frozenset[str]:
    """The names (lower case) of the tables a query joins NEAREST BY, as right sides."""
    return frozenset(j.this.name.lower() for j in nearest_joins(tree) if isinstance(j.this, exp.Table))


def reads_state(p: plan.Plan, query: plan.Query) -> bool:
    """True when `query` reads a broadcast state (it can only have named one as a NEAREST BY side)."""
    return any(_is_state(p, r) for r in query.reads)


def _is_state(p: plan.Plan, name: str) -> bool:
    try:
        return isinstance(p.node(name), plan.BroadcastState)
    except KeyError:
        return False


def state_problems(p: plan.Plan, sql_of: dict[str, ast.Sql]) -> list[Diagnostic]:
    """E0209 on each NEAREST BY join over a broadcast state that dslc cannot run with an index."""
    problems: list[Diagnostic] = []
    for node in p.nodes:
        sql = sql_of.get(node.name.lower())
        if not isinstance(node, plan.Query) or sql is None or not reads_state(p, node) or lowerable(p, node):
            continue
        for join in nearest_joins(node.tree):
            state = join.this.name if isinstance(join.this, exp.Table) else "?"
            if not _is_state(p, state):
                continue
            problems.append(error(
                "E0209", extent(join, sql), name=state, actual="broadcast state",
                statement="this NEAREST BY join", expected="source or stream",
                hint=f"a query reads {state} only in a NEAREST BY join dslc runs with an index: the query's only "
                     "join, FROM a source or stream, the ranking vector_l2_distance, vector_cosine_similarity or "
                     f"vector_inner_product of a left column and a column of {state} (KEY/OP state, not USING "
                     "PYTHON)"))
    return problems
