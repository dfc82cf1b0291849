"""The optimiser: logical plan → physical plan, one named pass at a time."""
from __future__ import annotations

from dataclasses import dataclass

from dslc.compiler.optimizer import physical
from dslc.compiler.plan import logical as plan
from dslc.compiler.optimizer.rules import chaining, pushdown


@dataclass(frozen=True, slots=True)
class Options:
    """Switches for the passes (benchmarks compare with and without each)."""

    chaining: bool = True
    pushdown: bool = True
    pruning: bool = True


def optimize(p: plan.Plan, options: Options = Options()) -> physical.Physical:
    """Run the passes in order: pushdown first (it changes which rows reach a chain), then
    chaining with pruning (both read the final shape of the plan)."""
    passes: list[tuple[str, str]] = []
    if options.pushdown:
        p, notes = pushdown.pushdown_filters(p)
        passes += [(pushdown.NAME, n) for n in notes] or [(pushdown.NAME, "nothing to push")]
    steps = chaining.chain_operators(p, chaining=options.chaining, pruning=options.pruning)
    for chain in (s for s in steps if isinstance(s, physical.Chain)):
        if chain.input_columns is not None:
            passes.append(("prune_columns", f"chain#{chain.index} reads only ({', '.join(chain.input_columns)}) "
                                            f"of '{chain.input}'"))
        names = " -> ".join(op.name for op in chain.operators)
        passes.append((chaining.NAME, f"chain#{chain.index} [{names}]"))
    return physical.Physical(p, tuple(steps), tuple(passes))
