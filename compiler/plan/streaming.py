"""The STREAMING checks, as one pass over the finished plan: what Spark would refuse when the
job starts is reported by `dslc check`, with Spark's rule and the ways out.

Everything else that BATCH runs, STREAMING runs too (docs/streaming.md): MATCH and PROCESS WITH
BROADCAST are ordinary operators of the streaming query, and shared results go through stage
folders, so no operator is confined to a micro-batch any more.
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dslc.compiler.diagnostics import Diagnostic, error
from dslc.compiler.frontend import ast
from dslc.compiler.plan import logical as plan
from dslc.compiler.plan import streaming_sql
from dslc.compiler.plan.connectors import SINKS
from dslc.compiler.source import Span

_APPEND_RULE = ("Spark's rule (STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION): \"Invalid streaming output mode: "
                "append. This output mode is not supported for streaming aggregations without watermark on "
                "streaming DataFrames/DataSets\"")
_COMPLETE_RULE = ("Spark's rule (STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION): \"Invalid streaming output mode: "
                  "complete. This output mode is not supported for no streaming aggregations on streaming "
                  "DataFrames/DataSets\"")


def watermarks(p: plan.Plan) -> dict[str, plan.Watermark | None]:
    """Each relation's source WATERMARK, as long as its column is still there; one pass in
    dependency order (no recursion, so a lineage of any length works)."""
    return _propagate(p, through_windows=False)


def event_times(p: plan.Plan) -> dict[str, plan.Watermark | None]:
    """`watermarks`, and where a query drops the column but keeps `window(ts, ...) AS w`, the
    window column `w`: Spark's window struct carries the event time (so `window(window_time(w),
    ...)` of a later query groups by event time). For the checks only: a stage declares its
    WATERMARK on a timestamp column (`watermarks`)."""
    return _propagate(p, through_windows=True)


def _propagate(p: plan.Plan, through_windows: bool) -> dict[str, plan.Watermark | None]:
    """The event-time mark of each relation, from its sources down, in dependency order."""
    found: dict[str, plan.Watermark | None] = {}
    for node in p.nodes:
        if isinstance(node, plan.Source):
            found[node.name.lower()] = node.watermark
            continue
        if isinstance(node, plan.BroadcastState):
            continue
        columns = {f.name.lower() for f in node.schema}
        parents = [found.get(i.lower()) for i in node.inputs if not isinstance(p.node(i), plan.BroadcastState)]
        mark = next((w for w in parents if w and w.column.lower() in columns), None)
        if mark is None and through_windows and isinstance(node, plan.Query):
            mark = _window_mark(node, {w.column.lower(): w for w in parents if w})
        found[node.name.lower()] = mark
    return found


def _window_mark(query: plan.Query, marked: dict[str, plan.Watermark]) -> plan.Watermark | None:
    """`window(ts, ...) AS w` (or session_window) over a marked column: `w` carries its event time."""
    for select in query.tree.find_all(exp.Alias):
        call = select.this
        if isinstance(call, exp.Anonymous) and call.name.lower() in ("window", "session_window") \
                and any(c.name.lower() in marked for c in call.find_all(exp.Column)):
            used = next(c.name.lower() for c in call.find_all(exp.Column) if c.name.lower() in marked)
            return plan.Watermark(select.alias, marked[used].delay_s)
    return None


def groups_by_event_time(query: plan.Query, marks: dict[str, plan.Watermark | None]) -> bool:
    """True when a streaming aggregation can emit in APPEND mode: it groups by a watermarked
    event-time column of its input (directly or through window(...))."""
    columns = {marks[r.lower()].column.lower() for r in query.reads if marks.get(r.lower())}
    group = query.tree.find(exp.Group)
    distinct = _distinct_select(query)
    keys = group.expressions if group is not None else distinct.expressions if distinct is not None else None
    if not columns or keys is None:
        return False
    return any(c.name.lower() in columns for e in keys for c in e.find_all(exp.Column))


def _distinct_select(query: plan.Query) -> exp.Select | None:
    """The SELECT DISTINCT of a query, if any: Spark runs it as an aggregation."""
    return next((s for s in query.tree.find_all(exp.Select) if s.args.get("distinct")), None)


def _aggregating(query: plan.Query) -> bool:
    """GROUP BY, aggregate functions (not in a window function: Spark refuses those on their
    own, streaming_sql.py), window(...), or DISTINCT: an aggregation for Spark."""
    tree = query.tree
    return (tree.find(exp.Group) is not None or _distinct_select(query) is not None
            or any(f.find_ancestor(exp.Window) is None for f in tree.find_all(exp.AggFunc))
            or any(f.name.lower() in ("window", "session_window") for f in tree.find_all(exp.Anonymous)))


def aggregated_without_watermark(p: plan.Plan) -> set[str]:
    """Relations (lower case) whose rows come from an aggregation that cannot emit in APPEND,
    directly or through the statements that read it."""
    marks = event_times(p)
    found: set[str] = set()
    for node in p.nodes:
        if isinstance(node, plan.BroadcastState):
            continue
        if isinstance(node, plan.Query) and _aggregating(node) and not groups_by_event_time(node, marks):
            found.add(node.name.lower())
        elif any(i.lower() in found for i in node.inputs):
            found.add(node.name.lower())
    return found


@dataclass(frozen=True, slots=True)
class Checked:
    """A SINK for the STREAMING checks: where it is written, where its MODE is (or its keyword),
    and whether the stream it writes was built (else only the checks that need no stream run)."""

    sink: plan.Sink
    span: Span
    mode_span: Span
    known: bool


def check(p: plan.Plan, checked: list[Checked], sql_of: dict[str, ast.Sql] | None = None) -> list[Diagnostic]:
    """Every STREAMING problem of the plan at once (nothing in BATCH); `sql_of`: each SELECT's
    text, by lower-case name, for Spark's rules on the SQL (streaming_sql.py)."""
    if p.settings.mode != "STREAMING":
        return []
    problems: list[Diagnostic] = []
    if p.settings.checkpoint is None:
        for c in checked:
            if SINKS[c.sink.connector].needs_checkpoint:
                problems.append(error("E0308", c.span.sub(0, 4),
                                      why=f"SINK {c.sink.input} TO {c.sink.connector} keeps its progress in it",
                                      hint=f"add CHECKPOINT 'target/chk/{p.settings.name}' to PIPELINE"))
    sinks = [(c.sink, c.span) for c in checked if c.known]
    unbounded = aggregated_without_watermark(p)
    for c in checked:
        if c.sink.mode == "OVERWRITE":
            problems.append(_overwrite(c, c.known and c.sink.input.lower() in unbounded))
    for sink, span in sinks:
        aggregate = sink.input.lower() in unbounded
        if sink.mode == "APPEND" and aggregate:
            problems.append(error(
                "E0311", span.sub(0, 4), feature=f"SINK {sink.input} in MODE APPEND (the default) of an "
                "aggregation without a WATERMARK", mode="STREAMING", why=_APPEND_RULE,
                hint="declare a WATERMARK on the source and GROUP BY its column or window(...) over it "
                     "(a group is written once the watermark passes it), or write the whole result "
                     "after each micro-batch with MODE COMPLETE"))
        if sink.mode == "COMPLETE" and not _aggregates(p, sink.input):
            problems.append(error("E0311", span.sub(0, 4), feature=f"SINK {sink.input} in MODE COMPLETE "
                                  "of a stream that does not aggregate", mode="STREAMING", why=_COMPLETE_RULE,
                                  hint="use MODE APPEND (the default), or sink a GROUP BY"))
    return problems + streaming_sql.check(p, sinks, sql_of or {}, event_times(p))


def _overwrite(c: Checked, aggregate: bool) -> Diagnostic:
    """MODE OVERWRITE in STREAMING, with the mode that writes what the SINK means to."""
    hint = ("use MODE COMPLETE: the whole result of the aggregation, replaced after each micro-batch" if aggregate
            else "drop MODE OVERWRITE: a streaming SINK appends each micro-batch's new rows")
    return error("E0304", c.mode_span, first="MODE OVERWRITE", second="a STREAMING pipeline", hint=hint)


def _aggregates(p: plan.Plan, name: str) -> bool:
    """True when `name` or a stream it reads aggregates (Spark looks at the whole query)."""
    return any(isinstance(node, plan.Query) and _aggregating(node)
               for node in p.upstream([name], stop=lambda node: isinstance(node, plan.BroadcastState)))
