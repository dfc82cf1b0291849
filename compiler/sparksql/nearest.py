"""Spark 4.2's nearest-by join (`JOIN r (APPROX | EXACT) NEAREST [k] BY (DISTANCE | SIMILARITY)
ranking`) checked as Spark checks it, with its own error conditions (Spark 4.3's
error-conditions.json, NEAREST_BY_JOIN.*):

- Spark's parser: only an inner or LEFT OUTER join (else UNSUPPORTED_JOIN_TYPE, naming the join
  as Spark does: RIGHT OUTER, FULL OUTER, CROSS, LEFT SEMI, LEFT ANTI); k between 1 and 100000
  (NUM_RESULTS_OUT_OF_RANGE); no LATERAL (UNSUPPORTED_FEATURE.LATERAL_JOIN_NEAREST_BY); a
  NATURAL join is a syntax error at the APPROX or EXACT.
- Spark's analyzer: the ranking must be orderable (a MAP or VARIANT is not:
  NON_ORDERABLE_RANKING_EXPRESSION) and hold no aggregate, window or generator function
  (UNSUPPORTED_EXPR_FOR_OPERATOR).

Each is E0212 (E0206 for the syntax error) at the words Spark's message is about.
"""
from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from dslc.compiler.diagnostics import Diagnostic, error
from dslc.compiler.source import Span
from dslc.compiler.sparksql.aggregation import AGGREGATES
from dslc.compiler.sparksql.spark_nodes import NearestBy

MIN_RESULTS, MAX_RESULTS = 1, 100_000        # Spark's bounds of k
_SUPPORTED = "'INNER', 'LEFT OUTER'"
_UNORDERABLE = (exp.DataType.Type.MAP, exp.DataType.Type.VARIANT)
_GENERATORS = frozenset({"explode", "explode_outer", "posexplode", "posexplode_outer", "inline", "inline_outer",
                         "stack", "json_tuple"})

Where = Callable[[int, int], Span]            # (start, end) offsets in the query -> the file's span


def nearest_joins(tree: exp.Expression) -> list[exp.Join]:
    """Every join of the query with a nearest-by clause."""
    return [join for join in tree.find_all(exp.Join) if isinstance(join.args.get("nearest"), NearestBy)]


def join_type(join: exp.Join) -> str:
    """The join type as Spark names it in its messages (INNER, LEFT OUTER, RIGHT OUTER, ...)."""
    side, kind = join.side, join.kind
    if kind in ("SEMI", "ANTI"):
        return f"LEFT {kind}"
    if kind == "CROSS":
        return "CROSS"
    if side:
        return f"{side} OUTER"
    return "INNER"


def clause_errors(tree: exp.Expression, text: str, where: Where) -> list[Diagnostic]:
    """What Spark's parser refuses in the query's nearest-by clauses."""
    found = []
    for join in nearest_joins(tree):
        nearest: NearestBy = join.args["nearest"]
        start, first = nearest.meta["start"], nearest.meta["join_start"]
        word = text[start:start + 6].split()[0]
        if join.method:
            found.append(error("E0206", where(start, start + len(word)),
                               detail=f"Syntax error at or near '{word}': a {join.method} join takes no {word} "
                                      "NEAREST", hint="join by NEAREST BY without NATURAL"))
            continue
        if isinstance(join.this, exp.Lateral):
            found.append(error("E0212", where(first, start), condition="UNSUPPORTED_FEATURE.LATERAL_JOIN_NEAREST_BY",
                               detail="LATERAL correlation with a NEAREST BY clause is not supported",
                               hint="join the relation without LATERAL: the ranking may read both sides"))
        kind = join_type(join)
        if kind not in ("INNER", "LEFT OUTER"):
            words = text[first:_table_start(join, start)].rstrip()
            found.append(error("E0212", where(first, first + len(words)), condition="NEAREST_BY_JOIN.UNSUPPORTED_JOIN_TYPE",
                               detail=f"unsupported nearest-by join type {kind}; supported types: {_SUPPORTED}",
                               hint="write JOIN (inner: left rows with no match are dropped) or LEFT JOIN (kept)"))
        count = nearest.args.get("count")
        if count is not None and not MIN_RESULTS <= int(count.name) <= MAX_RESULTS:
            found.append(error("E0212", where(count.meta["start"], count.meta["end"] + 1),
                               condition="NEAREST_BY_JOIN.NUM_RESULTS_OUT_OF_RANGE",
                               detail=f"the number of results {count.name} must be between {MIN_RESULTS} and "
                                      f"{MAX_RESULTS}", hint=f"write a k from {MIN_RESULTS} to {MAX_RESULTS} "
                                                              f"in `{word} NEAREST k BY ...`"))
    return found


def _table_start(join: exp.Join, fallback: int) -> int:
    starts = [n.meta["start"] for n in join.this.walk() if n.meta.get("start") is not None]
    return min(starts) if starts else fallback


def _written(node: exp.Expression, text: str) -> str:
    """The query's own text of `node` (sqlglot's spelling when it keeps no position)."""
    starts = [n.meta["start"] for n in node.walk() if n.meta.get("start") is not None]
    ends = [n.meta["end"] for n in node.walk() if n.meta.get("end") is not None]
    if not starts:
        return node.sql(dialect="spark")
    end = max(ends) + 1
    while text.count("(", min(starts), end) > text.count(")", min(starts), end) and ")" in text[end:]:
        end = text.index(")", end) + 1
    return text[min(starts):end]


def ranking_errors(typed: exp.Expression, text: str, where: Callable[[exp.Expression], Span]) -> list[Diagnostic]:
    """What Spark's analyzer refuses in the ranking expressions of an annotated query."""
    found = []
    for join in nearest_joins(typed):
        ranking = join.args["nearest"].this
        refused = next((node for node in ranking.walk() if _not_per_pair(node)), None)
        if refused is not None:
            found.append(error("E0212", where(refused), condition="UNSUPPORTED_EXPR_FOR_OPERATOR",
                               detail=f"the NEAREST BY ranking contains {_written(refused, text)}: aggregate, "
                                      "window and generator functions are not allowed there",
                               hint="rank each pair of rows by an expression of their columns"))
            continue
        data_type = ranking.type
        if data_type is not None and any(t.this in _UNORDERABLE for t in data_type.find_all(exp.DataType)):
            spelled = data_type.sql(dialect="spark").upper()
            found.append(error("E0212", where(ranking), condition="NEAREST_BY_JOIN.NON_ORDERABLE_RANKING_EXPRESSION",
                               detail=f"the ranking expression {_written(ranking, text)} of type {spelled} "
                                      "is not orderable",
                               hint="rank by a number: a distance such as vector_l2_distance(a, b), or a "
                                    "similarity score"))
    return found


def _not_per_pair(node: exp.Expression) -> bool:
    if isinstance(node, (exp.Window, exp.AggFunc)):
        return True
    if isinstance(node, exp.Anonymous):
        return node.name.lower() in AGGREGATES or node.name.lower() in _GENERATORS
    return isinstance(node, (exp.Explode, exp.Posexplode, exp.Inline))
