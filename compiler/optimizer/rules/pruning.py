"""Projection pruning: columns nobody downstream reads are not shipped through Python.

    STREAM e = ENRICH wide WITH HTTP GET '.../{id}' RETURNS (tier STRING);
    STREAM out = SELECT id, tier FROM e;
    => the chain reads only `id` from `wide` (df.select('id') before mapInArrow)

An EXPECT needs the columns its constraints read, and every column when it quarantines or
fails (the row is written or shown whole). Only chains of HTTP, MODEL and EMBEDDING enrichments are pruned: a
Python function sees the whole row, so every column may matter to it; and not a chain with dead letters, which
hold every column of the row. Pruning is part of the step from the logical to the physical plan
(`chaining.chain_operators` asks it for each chain's input) and noted there.
"""
from __future__ import annotations

from sqlglot import exp

from dslc.compiler.plan import logical as plan

NAME = "prune_columns"
# calls whose requests carry only the columns they name (a MODEL's or EMBEDDING's placeholders)
_NAMED_CALLS = (plan.HttpCall, plan.ModelCall, plan.EmbeddingCall)

# Readers that need every column of what they read, and why:
NEEDS_ALL = (
    plan.Process,   # the user function receives the whole row
    plan.Match,     # MATCH emits every input column
)


def _query_columns(query: plan.Query) -> set[str] | None:
    tree = query.tree
    if any(isinstance(s, exp.Star) or s.is_star for s in tree.find_all(exp.Star, exp.Column)):
        return None
    return {c.name.lower() for c in tree.find_all(exp.Column)}


def required_columns(p: plan.Plan, name: str, _seen: frozenset[str] = frozenset()) -> set[str] | None:
    """Columns of `name` that its readers need; None when they need all of them."""
    if name.lower() in _seen:
        return None
    expect = p.expectation(name)
    needed: set[str] = set()
    if expect is not None:          # what its constraints read (all of it: a quarantined row is whole)
        if expect.columns() is None:
            return None
        needed |= expect.columns()
    for reader in p.consumers(name):
        if isinstance(reader, plan.Sink) or isinstance(reader, NEEDS_ALL):
            return None
        if isinstance(reader, plan.BroadcastState):
            return None
        if isinstance(reader, plan.NearestJoin):     # the left's columns pass through the probe
            downstream = None if reader.right.lower() == name.lower() else \
                required_columns(p, reader.name, _seen | {name.lower()})
            if downstream is None:                   # the right row is kept whole, as a struct
                return None
            needed |= downstream | {reader.left_vector.lower()}
            continue
        if isinstance(reader, plan.Query):
            columns = _query_columns(reader)
            if columns is None:
                return None
            needed |= columns
        elif isinstance(reader, plan.Enrich):
            if not isinstance(reader.call, _NAMED_CALLS) or reader.call.columns is None:
                return None
            downstream = required_columns(p, reader.name, _seen | {name.lower()})
            if downstream is None:
                return None
            needed |= downstream | {c.lower() for c in reader.call.columns}
    return needed


def pruned_input(p: plan.Plan, operators: tuple[plan.Enrich | plan.Process, ...]) -> tuple[str, ...] | None:
    """The input columns a chain must read, or None when it must read them all (also when one
    of its operators writes dead letters: a dead letter holds the whole row that operator got,
    so that it can be fixed and fed through the ENRICH again)."""
    if not all(isinstance(op, plan.Enrich) and isinstance(op.call, _NAMED_CALLS) and op.call.columns is not None
               for op in operators):
        return None
    if any(op.dead_letter for op in operators):
        return None
    needed = required_columns(p, operators[-1].name)
    if needed is None:
        return None
    for op in operators:
        needed |= {c.lower() for c in op.call.columns}
        expect = p.expectation(op.name)
        if expect is not None and expect.columns() is None:
            return None
        needed |= expect.columns() if expect is not None else set()
    returned = {f.name.lower() for op in operators for f in op.returns}
    upstream = p.node(operators[0].input)
    keep = tuple(f.name for f in upstream.schema if f.name.lower() in needed - returned)
    return keep if len(keep) < len(upstream.schema) else None
