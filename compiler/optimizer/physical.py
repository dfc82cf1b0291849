"""The physical plan: the steps a job runs, with Python operators grouped into chains.

A chain is Flink's operator chain (seed 003) on Spark: consecutive Python operators with no
shuffle and no other reader between them run in one `mapInArrow` pass through the runtime's
chain runner. SQL steps stay Spark SQL, which Catalyst fuses on its own.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from dslc.compiler.plan import logical as plan


@dataclass(frozen=True, slots=True)
class _NodeStep:
    """A step that runs one logical node and produces the relation of the same name."""

    node: plan.PlanNode

    @property
    def name(self) -> str:
        return self.node.name


@dataclass(frozen=True, slots=True)
class Read(_NodeStep):
    """Read a SOURCE."""

    node: plan.Source


@dataclass(frozen=True, slots=True)
class State(_NodeStep):
    """Build a broadcast state from its source's rows."""

    node: plan.BroadcastState


@dataclass(frozen=True, slots=True)
class Sql(_NodeStep):
    """Run a Spark SQL query."""

    node: plan.Query


@dataclass(frozen=True, slots=True)
class Chain:
    """Python operators run in one mapInArrow pass; `input_columns` is the pruned projection."""

    index: int
    input: str
    operators: tuple[plan.Enrich | plan.Process, ...]
    input_columns: tuple[str, ...] | None
    starts_because: str
    ends_because: str
    expects: tuple[str, ...] = ()   # operators whose EXPECT runs inside the chain, right after them

    def __post_init__(self) -> None:
        if not self.operators:
            raise ValueError("a chain needs at least one operator")

    @property
    def name(self) -> str:
        """A chain produces the relation of its last operator."""
        return self.operators[-1].name


@dataclass(frozen=True, slots=True)
class MatchJoin(_NodeStep):
    """MATCH as a broadcast join of a stream with a state's snapshot."""

    node: plan.Match


@dataclass(frozen=True, slots=True)
class Nearest(_NodeStep):
    """NEAREST BY: the right side indexed once, the left side probed per partition."""

    node: plan.NearestJoin


Step = Union[Read, State, Sql, Chain, MatchJoin, Nearest]


@dataclass(frozen=True, slots=True)
class Physical:
    """Steps in run order, the sinks, and the optimiser passes that shaped them."""

    plan: plan.Plan
    steps: tuple[Step, ...]
    passes: tuple[tuple[str, str], ...]     # (pass name, what it did)
    kept: tuple = ()                        # sharing.Kept: chain outputs computed once and kept

    def kept_reason(self, name: str) -> str | None:
        """Why relation `name` is computed once and kept (None: it is not)."""
        return next((k.reason for k in self.kept if k.name.lower() == name.lower()), None)

    def stage(self, name: str) -> str | None:
        """STREAMING: the stage folder and query that compute relation `name` once (None: none)."""
        return next((k.stage for k in self.kept if k.name.lower() == name.lower()), None)

    def step(self, name: str) -> Step:
        """The step producing relation `name`."""
        for step in self.steps:
            if step.name.lower() == name.lower():
                return step
        raise KeyError(name)

    @property
    def chains(self) -> tuple[Chain, ...]:
        return tuple(s for s in self.steps if isinstance(s, Chain))
