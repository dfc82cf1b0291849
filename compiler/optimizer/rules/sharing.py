"""Which chain outputs a job must compute once and keep, so that every row calls its service once.

Spark recomputes a DataFrame for every action (and for every reference inside one query, as in a
self-join or a UNION of two filters of it). A chain makes external calls, so its output is kept
whenever it would be computed more than once: read on more than one path to the job's outputs
(sinks, broadcast states), directly or through other statements, or split into dead letters and
rows (dead letters, and the rows an EXPECT quarantines: each quarantine folder is written by a
writer of its own that reads the relation again). BATCH keeps it in Spark's reliable checkpoint folder (`DataFrame.checkpoint(eager=True)`,
never evicted); STREAMING writes it to an exactly-once stage folder under the CHECKPOINT that the
queries reading it consume with Spark's streaming file source.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from dslc.compiler.optimizer import physical
from dslc.compiler.plan import logical as plan
from dslc.compiler.sparksql.sql import relations

NAME = "keep_shared"


@dataclass(frozen=True, slots=True)
class Kept:
    """A chain output computed once and kept; `reason` says why, for `explain --physical`;
    `stage` names its stage folder and query in STREAMING."""

    name: str
    reason: str
    stage: str = ""


def references(query: plan.Query) -> dict[str, int]:
    """How many times a query names each relation (a self-join names it twice)."""
    counts: dict[str, int] = {}
    for table in relations(query.tree):
        counts[table.name.lower()] = counts.get(table.name.lower(), 0) + 1
    return counts


def computations(p: plan.Plan) -> dict[str, int]:
    """relation (lower case) → how many times the job's outputs compute it if nothing is kept.
    A BATCH BROADCAST computes its input twice: it collects the rows in order (state.py), and
    Spark's sort samples its input in a job of its own before it sorts."""
    found: dict[str, int] = {}
    state_reads = 1 if p.settings.mode == "STREAMING" else 2
    for node in reversed(p.nodes):
        expect = p.expectation(node.name)
        total = len(expect.quarantine_paths) if expect is not None else 0   # each folder read by its own writer
        for reader in p.consumers(node.name):
            if isinstance(reader, plan.BroadcastState):
                total += state_reads
            elif isinstance(reader, plan.Sink):
                total += 1
            elif isinstance(reader, plan.Query):
                total += references(reader).get(node.name.lower(), 1) * found.get(reader.name.lower(), 0)
            else:
                total += found.get(reader.name.lower(), 0)
        found[node.name.lower()] = total
    return found


def keep_shared(phys: physical.Physical) -> physical.Physical:
    """The physical plan with its kept chains (and a note for each)."""
    kept = kept_chains(phys.plan, phys.steps)
    notes = tuple((NAME, f"keep '{k.name}': {k.reason}") for k in kept)
    return dataclasses.replace(phys, passes=phys.passes + notes, kept=kept)


def kept_chains(p: plan.Plan, steps) -> tuple[Kept, ...]:
    """The chains whose output must be kept, with the reason."""
    counts = computations(p)
    kept = []
    streaming = p.settings.mode == "STREAMING"
    matches = 0
    for step in steps:
        if streaming and isinstance(step, physical.MatchJoin):
            # each query pins its own rules version per micro-batch: a MATCH read on several
            # paths runs once, so that every reader sees the same matches
            matches += 1
            uses = counts.get(step.name.lower(), 0)
            if uses > 1:
                kept.append(Kept(step.name, f"read on {uses} paths to the outputs, which must see the same "
                                            "rules version", f"match{matches}"))
            continue
        if not isinstance(step, physical.Chain):
            continue
        uses = counts.get(step.name.lower(), 0)
        dead = {op.dead_letter for op in step.operators if isinstance(op, plan.Enrich) and op.dead_letter}
        quarantined = {path for name in step.expects for path in p.expectation(name).quarantine_paths}
        letters = sorted(dead | quarantined)
        if uses + len(letters) <= 1:
            continue
        expect = p.expectation(step.name)
        after = len(expect.quarantine_paths) if expect is not None else 0    # an EXPECT on the chain's output
        why = [f"read on {uses - after} paths to the outputs"] if uses - after > 1 else []
        why += ["the rows its EXPECT quarantines are written apart from the others"] if after or quarantined else []
        why += ["its dead letters are written apart from its rows"] if dead and uses else []
        why += [f"its dead letters go to {len(dead)} folders"] if len(dead) > 1 else []
        kept.append(Kept(step.name, "; ".join(why), f"stage{step.index}"))
    return tuple(kept)
