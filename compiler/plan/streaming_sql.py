"""Spark's rules on the SQL of a streaming query (its UnsupportedOperationChecker), reported by
`dslc check` in STREAMING with Spark's own words and a way out.

Each rule was seen refused by PySpark 4.3 when the query starts (tests/sql/test_streaming_rules.py
starts each shape on real Spark and compares the messages):

- an outer or semi join of two streams needs a watermarked column among the equality keys, or a
  WATERMARK on the side that may have no match and an ON condition bounding that side's time by
  the other side's (e.g. `b.ts BETWEEN a.ts AND a.ts + INTERVAL 1 HOUR` for `a LEFT JOIN b`);
- a join of two streams needs an equality condition (no CROSS JOIN); LEFT ANTI of two streams is
  refused; a join of two streams cannot feed a MODE COMPLETE sink;
- a COMPLETE sink's query with two stateful operators (aggregation after aggregation, DISTINCT or
  UNION) is refused for the global watermark's 'correctness issue';
- count(DISTINCT ...), window functions (OVER), INTERSECT and EXCEPT of streams, ORDER BY except on
  an aggregation written in MODE COMPLETE.

Only what the plan can decide is checked: a join side that is a subquery is left to Spark.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

from sqlglot import exp

from dslc.compiler.diagnostics import Diagnostic, error
from dslc.compiler.frontend import ast
from dslc.compiler.plan import logical as plan
from dslc.compiler.plan.nearest_shape import lowerable
from dslc.compiler.plan.nearest_states import reads_state
from dslc.compiler.source import Span
from dslc.compiler.sparksql.nearest import nearest_joins
from dslc.compiler.sparksql.sql import extent

_CORRECTNESS_CONF = "spark.sql.streaming.statefulOperator.checkCorrectness.enabled"
_SPARK_JOIN = {("LEFT", ""): "LeftOuter", ("LEFT", "OUTER"): "LeftOuter", ("RIGHT", ""): "RightOuter",
               ("RIGHT", "OUTER"): "RightOuter", ("FULL", ""): "FullOuter", ("FULL", "OUTER"): "FullOuter",
               ("LEFT", "SEMI"): "LeftSemi", ("", "SEMI"): "LeftSemi"}
_WRITTEN = {"LeftOuter": "LEFT JOIN", "RightOuter": "RIGHT JOIN", "FullOuter": "FULL JOIN", "LeftSemi": "LEFT SEMI JOIN",
            "LeftAnti": "LEFT ANTI JOIN", "Cross": "CROSS JOIN", "Inner": "JOIN"}


def _problem(span: Span, feature: str, rule: str, hint: str) -> Diagnostic:
    return error("E0311", span, feature=feature, mode="STREAMING", why=f"Spark's rule: \"{rule}\"", hint=hint)


@dataclass(frozen=True)
class _Join:
    """A join of two plan relations named in one SELECT (the FROM table and the joined table)."""

    node: exp.Join
    left: str                 # relation names, as the plan spells them
    right: str
    left_names: frozenset     # how the query refers to each side (alias and name, lower case)
    right_names: frozenset
    spark_type: str          # Spark's name of the join type: Inner, LeftOuter, LeftAnti, Cross, ...
    aliases: tuple[str, str]  # how the query names the left and the right side


def _relation(table: exp.Expression, p: plan.Plan) -> str | None:
    if not isinstance(table, exp.Table) or not table.name:
        return None
    node = next((n for n in p.nodes if n.name.lower() == table.name.lower()), None)
    if node is None or isinstance(node, plan.BroadcastState) or _static(p, node.name):
        return None
    return node.name


def _static(p: plan.Plan, name: str) -> bool:
    """True when every source `name` reads is a table read once (database_streaming.py): a static
    side, which Spark joins to each micro-batch of a stream without state."""
    sources = [n for n in p.upstream([name], stop=lambda n: isinstance(n, plan.BroadcastState))
               if isinstance(n, plan.Source)]
    return bool(sources) and all(s.read_once for s in sources)


def _spark_type(join: exp.Join) -> str:
    side, kind = (join.args.get("side") or "").upper(), (join.args.get("kind") or "").upper()
    if kind == "CROSS" or (not join.args.get("on") and not join.args.get("using")):
        return "Cross"
    if kind == "ANTI":
        return "LeftAnti"
    return _SPARK_JOIN.get((side, kind), "Inner")


def stream_joins(tree: exp.Expression, p: plan.Plan) -> Iterator[_Join]:
    """The joins of two relations (every relation is a stream in STREAMING) a query writes."""
    for select in tree.find_all(exp.Select):
        source = select.args.get("from_") or select.args.get("from")
        joins = select.args.get("joins") or []
        if source is None or len(joins) != 1:       # one join per SELECT is what can be decided here
            continue
        left, right = _relation(source.this, p), _relation(joins[0].this, p)
        if left is None or right is None:
            continue
        names = lambda t: frozenset({t.name.lower(), t.alias_or_name.lower()})    # noqa: E731
        yield _Join(joins[0], left, right, names(source.this), names(joins[0].this), _spark_type(joins[0]),
                    (source.this.alias_or_name, joins[0].this.alias_or_name))


def _conjuncts(condition: exp.Expression | None) -> list[exp.Expression]:
    if condition is None:
        return []
    if isinstance(condition, exp.And):
        return _conjuncts(condition.this) + _conjuncts(condition.expression)
    if isinstance(condition, exp.Paren):
        return _conjuncts(condition.this)
    if isinstance(condition, exp.Between):          # x BETWEEN lo AND hi: lo <= x and x <= hi
        return [exp.LTE(this=condition.args["low"], expression=condition.this),
                exp.LTE(this=condition.this, expression=condition.args["high"])]
    return [condition]


def _side(expression: exp.Expression, join: _Join, p: plan.Plan) -> str | None:
    """'left' or 'right' when every column of `expression` belongs to that side, else None."""
    sides = set()
    for column in expression.find_all(exp.Column):
        if column.table:
            qualifier = column.table.lower()
            sides.add("left" if qualifier in join.left_names else "right" if qualifier in join.right_names else "?")
        else:
            owners = [s for s, r in (("left", join.left), ("right", join.right))
                      if column.name.lower() in {f.name.lower() for f in p.node(r).schema}]
            sides.add(owners[0] if len(owners) == 1 else "?")
    return sides.pop() if len(sides) == 1 and "?" not in sides else None


def _is_column(expression: exp.Expression, name: str | None) -> bool:
    return name is not None and isinstance(expression, exp.Column) and expression.name.lower() == name.lower()


def _mentions(expression: exp.Expression, name: str | None) -> bool:
    return name is not None and any(c.name.lower() == name.lower() for c in expression.find_all(exp.Column))


def _ordered(comparison: exp.Expression) -> tuple[exp.Expression, exp.Expression] | None:
    """A comparison as (smaller, larger)."""
    if isinstance(comparison, (exp.LT, exp.LTE)):
        return comparison.this, comparison.expression
    if isinstance(comparison, (exp.GT, exp.GTE)):
        return comparison.expression, comparison.this
    return None


def _bounds_state(join: _Join, p: plan.Plan, kept: str, marks: dict) -> bool:
    """True when the ON condition gives the `kept` side's time a lower bound from the other
    side's watermark (Spark can then drop the kept side's rows from its state)."""
    other = "right" if kept == "left" else "left"
    mark = marks.get((join.right if other == "right" else join.left).lower())
    for conjunct in _conjuncts(join.node.args.get("on")):
        pair = _ordered(conjunct)
        if pair and _side(pair[0], join, p) == other and _mentions(pair[0], mark and mark.column) \
                and _side(pair[1], join, p) == kept:
            return True
    return False


def _equality_keys(join: _Join, p: plan.Plan) -> list[tuple[exp.Expression, exp.Expression]]:
    """Equality conjuncts with one side's columns on each side, as (left expr, right expr)."""
    if join.node.args.get("using"):
        return [(exp.column(u.name, join.left), exp.column(u.name, join.right)) for u in join.node.args["using"]]
    keys = []
    for conjunct in _conjuncts(join.node.args.get("on")):
        if isinstance(conjunct, exp.EQ):
            sides = (_side(conjunct.this, join, p), _side(conjunct.expression, join, p))
            if sides == ("left", "right"):
                keys.append((conjunct.this, conjunct.expression))
            elif sides == ("right", "left"):
                keys.append((conjunct.expression, conjunct.this))
    return keys


def _event_time(relation: str, p: plan.Plan, marks: dict) -> str:
    """A relation's WATERMARK column, else its first TIMESTAMP column (for a hint)."""
    mark = marks.get(relation.lower())
    if mark:
        return mark.column
    return next((f.name for f in p.node(relation).schema if f.type.upper() == "TIMESTAMP"), "<event time>")


def join_problems(name: str, tree: exp.Expression, sql: ast.Sql, p: plan.Plan, marks: dict) -> list[Diagnostic]:
    """Spark's rules on the joins of two streams in the query `name`."""
    problems = []
    for join in stream_joins(tree, p):
        span = extent(join.node, sql)
        keys = _equality_keys(join, p)
        what = f"{_WRITTEN[join.spark_type]} of the streams {join.left} and {join.right}"
        if join.spark_type == "LeftAnti":
            problems.append(_problem(span, f"LEFT ANTI JOIN of the streams {join.left} and {join.right}",
                                     "LeftAnti joins with a streaming DataFrame/Dataset on the right are not supported",
                                     "keep the rows that found no match with a LEFT JOIN (with a WATERMARK and a time "
                                     f"bound) and WHERE {join.aliases[1]}.<key> IS NULL"))
            continue
        if join.spark_type == "Cross" or not keys:
            problems.append(_problem(span, f"{what} without an equality condition",
                                     "Stream-stream join without equality predicate is not supported",
                                     f"join ON {join.aliases[0]}.<key> = {join.aliases[1]}.<key> (and a time bound)"))
            continue
        if join.spark_type == "Inner":
            continue
        left_mark, right_mark = marks.get(join.left.lower()), marks.get(join.right.lower())
        in_keys = any(_is_column(e, m and m.column) for l_key, r_key in keys
                      for e, m in ((l_key, left_mark), (r_key, right_mark)))
        kept = {"LeftOuter": ("left",), "LeftSemi": ("left",), "RightOuter": ("right",),
                "FullOuter": ("left", "right")}[join.spark_type]
        if in_keys or any(_bounds_state(join, p, side, marks) for side in kept):
            continue
        nullable, other = (join.right, join.left) if kept[0] == "left" else (join.left, join.right)
        n_alias, o_alias = join.aliases if kept[0] == "right" else join.aliases[::-1]
        n_time, o_time = (_event_time(r, p, marks) for r in (nullable, other))
        problems.append(_problem(
            span, what + " without watermarks and a time range",
            f"Stream-stream {join.spark_type} join between two streaming DataFrame/Datasets is not supported "
            "without a watermark in the join keys, or a watermark on the nullable side and an appropriate "
            "range condition",
            f"declare a WATERMARK on the source of {nullable} and bound its time in ON, e.g. AND {n_alias}.{n_time} "
            f"BETWEEN {o_alias}.{o_time} AND {o_alias}.{o_time} + INTERVAL 1 HOUR (a row without a match is "
            "written once the watermark passes the bound); or use an inner JOIN"))
    return problems


def _own(select: exp.Select, kind) -> Iterator[exp.Expression]:
    """Nodes of `kind` that belong to `select` itself (not to a nested query)."""
    for node in select.find_all(kind):
        if node.find_ancestor(exp.Select) is select:
            yield node


def stateful_operators(tree: exp.Expression, p: plan.Plan) -> int:
    """How many stateful operators (aggregation, DISTINCT, UNION, join of two streams) Spark
    makes of one query."""
    count = sum(1 for _ in stream_joins(tree, p))
    count += sum(1 for u in tree.find_all(exp.Union) if u.args.get("distinct"))
    for select in tree.find_all(exp.Select):
        if select.args.get("group") or select.args.get("distinct") or next(_own(select, exp.AggFunc), None):
            count += 1
    return count


def query_problems(name: str, tree: exp.Expression, sql: ast.Sql, p: plan.Plan) -> list[Diagnostic]:
    """The rules of one query that need nothing but its own SQL."""
    problems = []
    for aggregate in tree.find_all(exp.AggFunc):
        if isinstance(aggregate.this, exp.Distinct):
            problems.append(_problem(extent(aggregate, sql), f"{aggregate.sql(dialect='spark')} in STREAM {name}",
                                     "Distinct aggregations are not supported on streaming DataFrames/Datasets. "
                                     "Consider using approx_count_distinct() instead.",
                                     "use approx_count_distinct(...), or count the DISTINCT rows of a stream first "
                                     "(SELECT DISTINCT ... with a WATERMARK), then count them in another STREAM"))
    for window in tree.find_all(exp.Window):
        problems.append(_problem(extent(window, sql), f"the window function {window.this.sql(dialect='spark')} "
                                 f"OVER (...) in STREAM {name}",
                                 f"Window function is not supported in {window.this.sql(dialect='spark').upper()} "
                                 "on streaming DataFrames/Datasets (NON_TIME_WINDOW_NOT_SUPPORTED_IN_STREAMING)",
                                 "group by event time with window(ts, '1 minute') instead, or run in BATCH"))
    for setop in tree.find_all(exp.Intersect, exp.Except):
        if any(_relation(t, p) for t in setop.right.find_all(exp.Table)):
            word = "INTERSECT" if isinstance(setop, exp.Intersect) else "EXCEPT"
            rule = ("Intersect of streaming DataFrames/Datasets is not supported" if word == "INTERSECT"
                    else "Except on a streaming DataFrame/Dataset on the right is not supported")
            problems.append(_problem(extent(setop.right, sql), f"{word} of two streams in STREAM {name}", rule,
                                     "join the streams ON their columns (with a WATERMARK and a time bound)"))
    return problems


def _readers(p: plan.Plan, name: str) -> list[plan.PlanNode]:
    return [n for n in p.nodes if name.lower() in (i.lower() for i in getattr(n, "inputs", ()))]


def order_problems(query: plan.Query, sql: ast.Sql, p: plan.Plan) -> list[Diagnostic]:
    """ORDER BY: only on an aggregation written in MODE COMPLETE, and nothing else reads it."""
    order = query.tree.args.get("order")
    if order is None:
        return []
    sinks = [s for s in p.sinks if s.input.lower() == query.name.lower()]
    if query.aggregates and sinks and all(s.mode == "COMPLETE" for s in sinks) and not _readers(p, query.name):
        return []
    return [_problem(extent(order, sql), f"ORDER BY in STREAM {query.name}",
                     "Sorting is not supported on streaming DataFrames/Datasets, unless it is on aggregated "
                     "DataFrame/Dataset in Complete output mode",
                     "sort when you read the sink; or sink an aggregation with MODE COMPLETE and sort that")]


def _lineage(p: plan.Plan, name: str) -> Iterable[plan.Query]:
    """The queries Spark runs as one query with `name`: up through SELECTs (a chain or a MATCH
    may be a stage boundary, so the walk stops there)."""
    stack, seen = [name.lower()], set()
    while stack:
        current = stack.pop()
        node = p.node(current)
        if current in seen or not isinstance(node, plan.Query):
            continue
        seen.add(current)
        yield node
        stack.extend(i.lower() for i in node.inputs)


def complete_problems(p: plan.Plan, sinks: list[tuple[plan.Sink, Span]]) -> list[Diagnostic]:
    """A COMPLETE sink's query: no join of two streams, at most one stateful operator."""
    problems = []
    correctness_off = any(k.lower() == _CORRECTNESS_CONF.lower() and v.strip("'\"").lower() == "false"
                          for k, v in p.settings.conf)
    for sink, span in sinks:
        if sink.mode != "COMPLETE":
            continue
        queries = list(_lineage(p, sink.input))
        joins = [(q, j) for q in queries for j in stream_joins(q.tree, p)]
        if joins:
            query, join = joins[0]
            problems.append(_problem(
                span.sub(0, 4), f"SINK {sink.input} in MODE COMPLETE after the join of {join.left} and {join.right} "
                f"(STREAM {query.name})",
                f"{join.spark_type} join between two streaming DataFrames/Datasets is not supported in Complete "
                "output mode, only in Append and Update output modes",
                "write the joined rows in MODE APPEND (a WATERMARK on the sources, GROUP BY window(...))"))
        elif not correctness_off and sum(stateful_operators(q.tree, p) for q in queries) > 1:
            problems.append(_problem(
                span.sub(0, 4), f"SINK {sink.input} in MODE COMPLETE of chained stateful operators "
                f"({', '.join(q.name for q in reversed(queries))})",
                "Detected pattern of possible 'correctness' issue due to global watermark. The query contains "
                "stateful operation which can emit rows older than the current watermark plus allowed late "
                "record delay, which are \"late rows\" in downstream stateful operations",
                "aggregate once per COMPLETE sink; or chain the aggregations in MODE APPEND: a WATERMARK, GROUP BY "
                "window(ts, ...) first, then GROUP BY window(window_time(w), ...); or SET "
                f"{_CORRECTNESS_CONF} = 'false' if late rows may be dropped"))
    return problems


def nearest_problems(query: plan.Query, sql: ast.Sql, p: plan.Plan) -> list[Diagnostic] | None:
    """A NEAREST BY join in STREAMING: none when dslc runs it with an index (optimizer/rules/
    nearest.py), else Spark's refusal and the ways out; None when the query has no such join."""

    joins = nearest_joins(query.tree)
    if not joins:
        return None
    if lowerable(p, query) is not None or reads_state(p, query):     # nearest_states.py: lowered or refused
        return []
    return [_problem(extent(join, sql), "a NEAREST BY join whose right side is not a SOURCE read once",
                     "[NEAREST_BY_JOIN.STREAMING_NOT_SUPPORTED] Nearest-by join is not supported with streaming "
                     "DataFrames/Datasets",
                     "dslc runs it with an index when the right side is a SOURCE (JSON, CSV, PARQUET, TEXT or "
                     "KAFKA: read once when the job starts) named in the FROM, the left side a SOURCE or STREAM, "
                     "the query's only join, and the ranking vector_l2_distance, vector_cosine_similarity or "
                     "vector_inner_product of a left column and a right column; or run it in BATCH")
            for join in joins]


def check(p: plan.Plan, sinks: list[tuple[plan.Sink, Span]], sql_of: dict[str, ast.Sql], marks: dict) -> list[Diagnostic]:
    """Spark's rules on the SQL of a STREAMING plan."""
    problems: list[Diagnostic] = []
    for node in p.nodes:
        sql = sql_of.get(node.name.lower())
        if not isinstance(node, plan.Query) or sql is None:
            continue
        nearest = nearest_problems(node, sql, p)
        if nearest is None:
            problems += join_problems(node.name, node.tree, sql, p, marks)
        else:
            problems += nearest
        problems += query_problems(node.name, node.tree, sql, p)
        problems += order_problems(node, sql, p)
    return problems + complete_problems(p, sinks)
