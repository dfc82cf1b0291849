"""The optimiser: logical rules in order, then chaining as the one step to the physical plan."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from dslc.compiler.optimizer import physical
from dslc.compiler.optimizer.rules import chaining, nearest, pushdown, sharing
from dslc.compiler.plan import logical as plan

Rule = Callable[[plan.Plan], plan.Plan]

# Logical rules, each `rule(plan) -> plan` noting what it did on the plan, in the order they run.
RULES: tuple[Rule, ...] = (
    pushdown.pushdown_filters,   # first: it changes which rows, and which relation, reach a chain
    nearest.index_nearest,       # NEAREST BY over a bounded right side: an index, not a cross product
)


@dataclass(frozen=True, slots=True)
class Options:
    """Switches for the passes (benchmarks compare with and without each)."""

    chaining: bool = True
    pushdown: bool = True
    pruning: bool = True
    nearest: bool = True

    def enabled(self, rule: Rule) -> bool:
        """False for a rule switched off (each option is named after the rule's module)."""
        return getattr(self, rule.__module__.rsplit(".", 1)[-1], True)


def optimize(p: plan.Plan, options: Options = Options()) -> physical.Physical:
    """Run the enabled rules on the logical plan, then build the physical plan from it (chains
    and pruning read the final shape of the plan)."""
    for rule in RULES:
        if options.enabled(rule):
            p = rule(p)
    phys = chaining.chain_operators(p, chaining=options.chaining, pruning=options.pruning)
    return sharing.keep_shared(phys)
