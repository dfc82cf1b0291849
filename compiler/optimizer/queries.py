"""How a STREAMING job is split into Spark streaming queries, and what connects them, for
`dslc explain --physical` (the job itself is written by codegen/lower.py with the same names).

One query per BROADCAST state (its rules), per stage (a kept chain computed once into an
exactly-once folder under the CHECKPOINT), per dead-letter folder, and per SINK. A query reads
sources and stage folders; MATCH and PROCESS WITH BROADCAST read the state snapshot pinned for
each micro-batch.
"""
from __future__ import annotations

from dataclasses import dataclass

from dslc.compiler.optimizer import physical
from dslc.compiler.plan import logical as plan


@dataclass(frozen=True, slots=True)
class StreamingQuery:
    """One Spark streaming query of the job."""

    name: str                     # its checkpoint folder's name, as the job names it
    computes: str                 # what it runs
    reads: tuple[str, ...]        # sources, stage folders and pinned states it reads
    writes: str                   # where its output goes


def _stages(phys: physical.Physical) -> dict[str, str]:
    """Kept relation (lower case) -> its stage name."""
    return {k.name.lower(): k.stage for k in phys.kept if k.stage}


def _reads(phys: physical.Physical, name: str, stages: dict[str, str], own: str | None = None) -> tuple[str, ...]:
    """What a query computing relation `name` reads: sources, stage folders, pinned states."""
    def staged(node: plan.PlanNode) -> bool:
        return node.name.lower() in stages and node.name.lower() != own

    def ends_walk(node: plan.PlanNode) -> bool:
        return staged(node) or isinstance(node, (plan.Source, plan.BroadcastState))

    found: set[str] = set()
    for node in phys.plan.upstream([name], stop=ends_walk):
        if staged(node):
            found.add(f"stage folder {stages[node.name.lower()]}")
        elif isinstance(node, plan.Source):
            found.add(f"source {node.name}")
        elif isinstance(node, plan.BroadcastState):
            found.add(f"state {node.name} (snapshot pinned per micro-batch)")
    return tuple(sorted(found))


def streaming_queries(phys: physical.Physical) -> list[StreamingQuery]:
    """The queries of a STREAMING job, in the order the job starts them."""
    p = phys.plan
    stages = _stages(phys)
    found: list[StreamingQuery] = []
    for step in phys.steps:
        if isinstance(step, physical.State):
            node = step.node
            if getattr(p.node(node.source), "database", None) is not None:
                continue        # a database table, read by the driver itself (refreshed_state.py): no query
            found.append(StreamingQuery(f"state/{node.name}/query", f"BROADCAST {node.name} (line {node.line})",
                                        _reads(phys, node.source, stages),
                                        f"CHECKPOINT/state/{node.name} (a snapshot per applied rules batch)"))
        if isinstance(step, physical.MatchJoin) and step.name.lower() in stages:
            node = step.node
            found.append(StreamingQuery(f"stages/{stages[node.name.lower()]}/query",
                                        f"MATCH {node.name} (line {node.line}) once",
                                        _reads(phys, node.name, stages, own=node.name.lower()),
                                        f"CHECKPOINT/stages/{stages[node.name.lower()]}/data (parquet, exactly once)"))
        if not isinstance(step, physical.Chain):
            continue
        stage = stages.get(step.name.lower())
        ops = " -> ".join(op.name for op in step.operators)
        if stage:
            found.append(StreamingQuery(f"stages/{stage}/query", f"chain#{step.index} [{ops}] once",
                                        _reads(phys, step.name, stages, own=step.name.lower()),
                                        f"CHECKPOINT/stages/{stage}/data (parquet, exactly once)"))
        folders = sorted({op.dead_letter for op in step.operators if isinstance(op, plan.Enrich) and op.dead_letter})
        for number, path in enumerate(folders, start=1):
            name = f"dead_letters{step.index}" + (f"_{number}" if len(folders) > 1 else "")
            reads = (f"stage folder {stage}",) if stage else _reads(phys, step.name, stages)
            found.append(StreamingQuery(name, f"dead letters of chain#{step.index} [{ops}]", reads,
                                        f"{path!r} (text, exactly once)"))
    for index, sink in enumerate(p.sinks):
        where = f"{sink.connector} {sink.path!r}" if sink.path else sink.connector
        found.append(StreamingQuery(f"sink{index}", f"SINK {sink.input} (line {sink.line}) MODE {sink.mode}",
                                    _reads(phys, sink.input, stages), where))
    return found


def render(phys: physical.Physical) -> list[str]:
    """The `queries:` section of `explain --physical` (empty in BATCH)."""
    if phys.plan.settings.mode != "STREAMING":
        return []
    out = ["queries (STREAMING: one Spark streaming query each; with AVAILABLE NOW a query others read ends first):"]
    for query in streaming_queries(phys):
        out.append(f"  {query.name}: {query.computes}")
        out.append(f"      reads {', '.join(query.reads) or 'nothing'}")
        out.append(f"      writes {query.writes}")
    return out
