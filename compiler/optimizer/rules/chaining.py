"""Operator chaining (seed 003): consecutive Python operators with no shuffle and no other
reader between them fuse into one chain, run as one mapInArrow pass.

    enriched = ENRICH paid ...; scored = PROCESS enriched ...   =>   chain#1 [enriched -> scored]

An EXPECT on an operator inside a chain runs inside it, after that operator, when its conditions
have a Python form (compiler/plan/expect_python.py); one on the chain's last operator runs as
Spark expressions on the chain's output, in the same stage (no second pass over the rows).

This is the one step from the logical plan to the physical plan; each chain's pruned input
(rules/pruning.py) is decided, and noted, here, where the chain is made.
"""
from __future__ import annotations

from dslc.compiler.optimizer import physical
from dslc.compiler.optimizer.rules.pruning import NAME as PRUNING
from dslc.compiler.optimizer.rules.pruning import pruned_input
from dslc.compiler.plan import logical as plan

NAME = "chain_operators"

PYTHON_OPERATORS = (plan.Enrich, plan.Process)


def _own_chain(node: plan.PlanNode) -> bool:
    """A TIER BATCH ENRICH starts a chain: the provider's batch answers its rows before its pass
    (runtime/spark/provider_batches.py), which then reads them from Spark, not from a chain."""
    return isinstance(node, plan.Enrich) and node.tier == "BATCH"


# What a chain's neighbour is, as the chain's input and as its reader: why the chain starts or
# ends there (a Query by whether it aggregates; None: the other side has nothing to say of it).
_NEIGHBOURS: dict[object, tuple[str | None, str | None]] = {
    plan.Source: ("a source", None),
    (plan.Query, True): ("an aggregation (shuffle)", "a shuffle (GROUP BY / window)"),
    (plan.Query, False): ("Spark SQL (Catalyst runs it)", "Spark SQL"),
    plan.Match: ("a MATCH join", "a MATCH (a join)"),
    plan.NearestJoin: ("a NEAREST BY probe", "a NEAREST BY probe"),
    plan.BroadcastState: (None, "a broadcast state"),
}


def _what(node: plan.PlanNode, *, as_input: bool) -> str | None:
    key = (plan.Query, node.aggregates) if isinstance(node, plan.Query) else type(node)
    said = _NEIGHBOURS.get(key, (None, None))
    return said[0] if as_input else said[1]


def _start_reason(p: plan.Plan, op: plan.PlanNode, chaining: bool) -> str:
    if not chaining:
        return "chaining is disabled"
    if _own_chain(op):
        return "TIER BATCH: the provider's batch answers its rows before the pass"
    upstream = p.node(op.inputs[0])
    what = _what(upstream, as_input=True)
    if what is not None:
        return f"input '{upstream.name}' is {what}"
    if len(p.consumers(upstream.name)) == 1 and not _expect_fuses(p, upstream):
        return f"the EXPECT on input '{upstream.name}' (line {p.expectation(upstream.name).line}) runs in Spark"
    return f"input '{upstream.name}' has {len(p.consumers(upstream.name))} readers"


def _expect_fuses(p: plan.Plan, op: plan.PlanNode) -> bool:
    """True when `op` has no EXPECT, or one whose every condition has a Python form: it then runs
    inside the chain, between `op` and the next operator (else the chain ends at `op` and the
    EXPECT runs in Spark on the chain's output)."""
    expect = p.expectation(op.name)
    return expect is None or expect.python


def _end_reason(p: plan.Plan, op: plan.PlanNode, chaining: bool) -> str:
    readers = p.consumers(op.name)
    if not chaining:
        return "chaining is disabled"
    if len(readers) == 1 and isinstance(readers[0], PYTHON_OPERATORS) and not _expect_fuses(p, op):
        expect = p.expectation(op.name)
        return f"the EXPECT on '{op.name}' (line {expect.line}) runs in Spark: {expect.why_not_python}"
    if len(readers) != 1:
        return f"'{op.name}' has {len(readers)} readers" if readers else f"'{op.name}' is not read"
    reader = readers[0]
    if isinstance(reader, plan.Sink):
        return f"written by SINK (line {reader.line})"
    what = _what(reader, as_input=False)
    return f"'{reader.name}' is {what}" if what is not None else f"'{reader.name}' cannot join the chain"


def chain_operators(p: plan.Plan, *, chaining: bool = True, pruning: bool = True) -> physical.Physical:
    """The physical plan: steps in run order with Python operators grouped into chains; the
    plan's rule notes, then a pruning note (if any) and a chain note per chain."""
    groups: list[list[plan.Enrich | plan.Process]] = []
    owner: dict[str, list] = {}
    for node in p.nodes:
        if not isinstance(node, PYTHON_OPERATORS):
            continue
        upstream = owner.get(node.inputs[0].lower())
        if chaining and upstream is not None and len(p.consumers(upstream[-1].name)) == 1 \
                and _expect_fuses(p, upstream[-1]) and not _own_chain(node):
            upstream.append(node)
            owner[node.name.lower()] = upstream
        else:
            group = [node]
            groups.append(group)
            owner[node.name.lower()] = group
    chains = {}
    for index, group in enumerate(groups, start=1):
        ops = tuple(group)
        chains[ops[-1].name.lower()] = physical.Chain(
            index=index, input=ops[0].inputs[0], operators=ops,
            input_columns=pruned_input(p, ops) if pruning else None,
            starts_because=_start_reason(p, ops[0], chaining), ends_because=_end_reason(p, ops[-1], chaining),
            expects=tuple(op.name for op in ops[:-1] if p.expectation(op.name) is not None))
    steps: list[physical.Step] = []
    for node in p.nodes:
        if isinstance(node, plan.Source):
            steps.append(physical.Read(node))
        elif isinstance(node, plan.BroadcastState):
            steps.append(physical.State(node))
        elif isinstance(node, plan.Query):
            steps.append(physical.Sql(node))
        elif isinstance(node, plan.Match):
            steps.append(physical.MatchJoin(node))
        elif isinstance(node, plan.NearestJoin):
            steps.append(physical.Nearest(node))
        elif node.name.lower() in chains:
            steps.append(chains[node.name.lower()])
    return physical.Physical(p, tuple(steps), p.notes + _notes(steps))


def _notes(steps: list[physical.Step]) -> tuple[tuple[str, str], ...]:
    notes: list[tuple[str, str]] = []
    for chain in (s for s in steps if isinstance(s, physical.Chain)):
        if chain.input_columns is not None:
            notes.append((PRUNING, f"chain#{chain.index} reads only ({', '.join(chain.input_columns)}) "
                                   f"of '{chain.input}'"))
        notes.append((NAME, f"chain#{chain.index} [{' -> '.join(op.name for op in chain.operators)}]"))
    return tuple(notes)
