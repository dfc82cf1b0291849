"""Where each EXPECT runs in the physical plan, for `dslc explain --physical`: inside which chain
and after which operator (Python, in the chain's pass: each constraint per batch with Arrow, or
per row where it has no Arrow form, and why), or as Spark expressions after which step (in the
same stage: no second pass over the rows)."""
from __future__ import annotations

from dslc.compiler.optimizer import physical
from dslc.compiler.plan.expect_explain import action, model_asks


def placement(phys, name: str) -> str | None:
    """Where the EXPECT on relation `name` runs in the physical plan (None: there is none)."""
    from dslc.compiler.optimizer import physical  # the physical plan is the optimiser's

    expect = phys.plan.expectation(name)
    if expect is None:
        return None
    for step in phys.steps:
        if isinstance(step, physical.Chain) and any(n.lower() == name.lower() for n in step.expects):
            nxt = step.operators[[op.name.lower() for op in step.operators].index(name.lower()) + 1]
            return (f"inside chain#{step.index}, after '{expect.on}' and before '{nxt.name}' "
                    "(Python, in the chain's pass)")
    step = phys.step(name)
    if isinstance(step, physical.Chain):
        return f"as Spark expressions on the output of chain#{step.index} (after '{expect.on}', in the same stage)"
    kind = {physical.Read: "the read of", physical.Sql: "the query", physical.MatchJoin: "the MATCH"}[type(step)]
    return f"as Spark expressions after {kind} '{expect.on}' (in the same stage)"


def in_chain(phys, name: str) -> bool:
    """True when the EXPECT on `name` runs inside a chain's Python pass."""
    return any(isinstance(step, physical.Chain) and any(n.lower() == name.lower() for n in step.expects)
               for step in phys.steps)


def judged(constraint) -> str:
    """How a constraint inside a chain is judged: per batch of rows with Arrow, or per row (why)."""
    if constraint.arrow.python is not None:
        return "per batch (Arrow)"
    return f"per row ({constraint.arrow.why_not})"


def physical_lines(phys, step) -> list[str]:
    """The EXPECTs a step makes run: where, and what they do."""
    names = [op.name for op in step.operators] if isinstance(step, physical.Chain) else [step.name]
    lines = []
    for name in names:
        expect = phys.plan.expectation(name)
        if expect is None:
            continue
        lines.append(f"      expect on '{expect.on}' (line {expect.line}) runs {placement(phys, name)}")
        inside = in_chain(phys, name)
        lines += [f"        {c.name} -> {action(c)}" + (f", judged {judged(c)}" if inside else "")
                  for c in expect.constraints]
        lines += [f"        asks the model: {item.describe()}" for item in model_asks(phys.plan, expect)]
    return lines


def as_json(phys) -> list[dict]:
    """Each EXPECT's placement, constraints and what it asks of a model, for `explain --format json`."""
    out = []
    for expect in phys.plan.expects:
        inside = in_chain(phys, expect.on)
        out.append({"on": expect.on, "line": expect.line, "runs": placement(phys, expect.on),
                    "constraints": [{"name": c.name, "action": c.action, "path": c.path, "line": c.line,
                                     "condition": c.condition, **({"judged": judged(c)} if inside else {})}
                                    for c in expect.constraints],
                    "asks_the_model": [item.describe() for item in model_asks(phys.plan, expect)]})
    return out
