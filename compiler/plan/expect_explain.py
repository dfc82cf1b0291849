"""What `dslc explain` says of each EXPECT in the logical plan: its constraints and actions, and
what a MODEL is asked to keep (where they run is the physical plan's: optimizer/expect_placement.py)."""
from __future__ import annotations

from dslc.compiler.plan import logical as plan
from dslc.compiler.plan.expect_model import pushable
from dslc.compiler.plan.expectations import Expect


def action(constraint) -> str:
    """A constraint's action as written."""
    return f"QUARANTINE {constraint.path!r}" if constraint.path else constraint.action


def logical_lines(p: plan.Plan, node: plan.PlanNode) -> list[str]:
    """The EXPECT on `node`, one line per constraint, then what its MODEL is asked to keep."""
    expect = p.expectation(node.name)
    if expect is None:
        return []
    lines = [f"    expect (line {expect.line}):"]
    lines += [f"      {c.name} CHECK {' '.join(c.condition.split())} -> {action(c)}  -- line {c.line}"
              for c in expect.constraints]
    lines += [f"      asks the model: {item.describe()}" for item in model_asks(p, expect)]
    return lines


def model_asks(p: plan.Plan, expect: Expect) -> list:
    """What of `expect` is sent to the model of the ENRICH it judges (expect_model.py)."""
    node = p.node(expect.on)
    return pushable(expect, node) if isinstance(node, plan.Enrich) else []
