"""Database sources in STREAMING: a table has no offsets to follow, so a STREAMING job reads it
once, when it starts, and holds its rows for the run (joined with the streams, or as rules),
except where a BROADCAST re-reads it with REFRESH EVERY d.

`dslc check` says so with a note per database source read once, and refuses what has nothing to
stream: an ENRICH, PROCESS, MATCH or SINK whose rows all come from database tables (a streaming
query needs a stream among its inputs; run such a pipeline in MODE BATCH).
"""
from __future__ import annotations

from dslc.compiler.diagnostics import Diagnostic, error, note
from dslc.compiler.plan import logical as plan
from dslc.compiler.source import Span


def _database(node: plan.PlanNode) -> bool:
    return isinstance(node, plan.Source) and node.read_once


def notes(p: plan.Plan) -> list[Diagnostic]:
    """A note per database source that STREAMING reads once (not only by refreshed BROADCASTs)."""
    if p.settings.mode != "STREAMING":
        return []
    found = []
    for node in p.nodes:
        if not _database(node):
            continue
        readers = p.consumers(node.name)
        refreshed = [r for r in readers if isinstance(r, plan.BroadcastState) and r.refresh_s]
        if readers and len(refreshed) == len(readers):
            continue
        states = [r.name for r in readers if isinstance(r, plan.BroadcastState)]
        what = f"the table of BROADCAST {', '.join(states)}" if readers and len(states) == len(readers) \
            else f"SOURCE {node.name}"
        found.append(note("N0301", node.span, what=what,
                          why="a table has no offsets to follow; rows it gets later reach the next run",
                          hint="to follow a table of rules, BROADCAST ... FROM DATABASE ... KEY col REFRESH EVERY d"))
    return found


def static_only(p: plan.Plan, sinks: list[tuple[plan.Sink, Span]]) -> list[Diagnostic]:
    """Errors for the operators and sinks of a STREAMING plan that read database tables only."""
    if p.settings.mode != "STREAMING" or not any(_database(n) for n in p.nodes):
        return []
    static: set[str] = set()
    problems = []
    for node in p.nodes:
        if isinstance(node, plan.BroadcastState):
            continue
        inputs = [p.node(i) for i in node.inputs if not isinstance(p.node(i), plan.BroadcastState)]
        if _database(node) or (inputs and all(i.name.lower() in static for i in inputs)):
            static.add(node.name.lower())
            if isinstance(node, (plan.Enrich, plan.Process, plan.Match)):
                problems.append(_nothing_to_stream(f"{type(node).__name__.upper()} {node.name}", node.span))
    for sink, span in sinks:
        if sink.input.lower() in static:
            problems.append(_nothing_to_stream(f"SINK {sink.input}", span.sub(0, 4)))
    return problems


def _nothing_to_stream(what: str, span: Span) -> Diagnostic:
    return error("E0311", span, feature=f"{what}, which reads database tables only,", mode="STREAMING",
                 why="a table has no offsets to follow: STREAMING reads it once, so there is no stream to run on",
                 hint="run the pipeline in MODE BATCH, or join the table with a stream (a file or Kafka SOURCE)")
