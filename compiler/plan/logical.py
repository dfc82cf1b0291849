"""The logical plan: one typed, frozen node per operator, each with its output schema and span.

Nodes name their inputs (the plan is a DAG: a stream may feed several others); `Plan.nodes`
is in dependency order. `render` gives the stable text form used by `dslc explain` and the
snapshot tests.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Union

from sqlglot import exp

from dslc.compiler.source import Span

# One vocabulary for an operator's settings: the plan holds the runtime's own configuration types
# (a schema's Column, with `?` as the type when it could not be inferred; the call; a source's
# Watermark), so what the checker accepted is what the job's operators are built from.
from dslc.runtime.config import (
    Batch,
    Budget,
    Cache,
    Ceiling,
    Column,
    DatabaseTable,
    EmbeddingCall,
    HttpCall,
    Mode,
    ModelCall,
    Outage,
    Outcome,
    Price,
    PythonCall,
    Rate,
    Retry,
    SqlCall,
    Store,
    Watermark,
)

Schema = tuple[Column, ...]


def _check_unique(schema: Schema, where: str) -> None:
    names = [f.name.lower() for f in schema]
    if len(names) != len(set(names)):
        raise ValueError(f"{where}: duplicate column in schema {names}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    """Common part of every plan node."""

    name: str
    schema: Schema
    line: int
    span: Span

    @property
    def inputs(self) -> tuple[str, ...]:
        """Names of the nodes this one reads."""
        return ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Source(Node):
    """Read rows from a connector."""

    connector: str
    path: str | None
    options: tuple[tuple[str, str], ...]
    watermark: Watermark | None = None
    database: DatabaseTable | None = None     # FROM DATABASE db TABLE | QUERY
    read_once: bool = False   # a table: STREAMING reads it when the job starts (dslc test's stand-in too)

    def __post_init__(self) -> None:
        _check_unique(self.schema, self.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class BroadcastState:
    """Named map state built from a source's rows (KEY/OP changelog or a user function)."""

    name: str
    source: str
    key: str | None
    op: str | None
    using: str | None
    schema: Schema            # the columns of one state entry
    line: int
    span: Span
    refresh_s: float | None = None   # REFRESH EVERY d: a database source re-read every d (STREAMING)

    @property
    def inputs(self) -> tuple[str, ...]:
        return (self.source,)


@dataclass(frozen=True, slots=True, kw_only=True)
class Query(Node):
    """A Spark SQL query over sources and streams: `sql` is the text the job runs (the user's own
    until a rule rewrites it), `tree` its sqlglot tree, which rules read and rebuild (never edit
    it in place: copy, or build a new one with sqlglot's builders)."""

    sql: str
    tree: exp.Expression = field(compare=False, repr=False)
    reads: tuple[str, ...]
    aggregates: bool          # GROUP BY, window or aggregate function: a shuffle boundary
    origin: str | None = None  # why a rule made this query (None: the user wrote it)

    @property
    def inputs(self) -> tuple[str, ...]:
        return self.reads

    def __post_init__(self) -> None:
        if not self.reads:
            raise ValueError(f"{self.name}: a query must read at least one source or stream")


@dataclass(frozen=True, slots=True, kw_only=True)
class Enrich(Node):
    """Call an external function per row; append its RETURNS columns."""

    input: str
    call: HttpCall | PythonCall | ModelCall | EmbeddingCall | SqlCall   # PYTHON's search_path empty: the job adds its folder
    returns: Schema
    mode: Mode
    capacity: int
    timeout_s: float
    retry: Retry | None
    cache: Cache | None
    rate: Rate | None
    on_miss: Outcome
    on_timeout: Outcome
    on_error: Outcome
    dead_letter: str | None   # path of the dead-letter sink
    key_columns: tuple[str, ...]
    ceiling: Ceiling | None = None   # DEAD LETTER 'path' UP TO n% | n ROWS (None: the default)
    order_by: tuple[str, ...] = ()   # ASYNC ORDERED BY: input order per value of these columns
    adaptive: bool = False           # CAPACITY n ADAPTIVE
    batch: Batch | None = None   # BATCH n WITHIN d
    paths: tuple[tuple[str, str], ...] = ()   # RETURNS (col TYPE PATH 'jmespath')
    outage: Outage | None = None              # ON OUTAGE PAUSE d | FAIL (None: CONTINUE)
    store: Store | None = None   # STORE [TTL d], its location the pipeline's ANSWERS (or the default)
    budget: Budget | None = None  # BUDGET n CALLS | n TOKENS | n USD
    provenance: str | None = None  # PROVENANCE AS col: the struct column, last in `schema`
    tier: str = "STANDARD"        # TIER STANDARD | FLEX | BATCH (MODEL, EMBEDDING)
    price: Price | None = None    # PRICE: what a call of its TIER costs
    batch_failure: str = "BATCH"  # ON BATCH FAILURE ONLINE

    @property
    def inputs(self) -> tuple[str, ...]:
        return (self.input,)

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ValueError("CAPACITY must be >= 1")
        if not isinstance(self.mode, Mode):
            raise ValueError(f"bad mode {self.mode}")
        if self.order_by and self.mode is not Mode.ORDERED:
            raise ValueError("ORDERED BY needs mode ORDERED")
        _check_unique(self.schema, self.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Match(Node):
    """One row per (input row, matching state entry)."""

    input: str
    state: str
    alias: str
    predicate: str
    state_columns: tuple[tuple[str, str], ...]   # (state column, output name)

    @property
    def inputs(self) -> tuple[str, ...]:
        return (self.input, self.state)


@dataclass(frozen=True, slots=True, kw_only=True)
class Process(Node):
    """A user function per row, reading broadcast states; emits RETURNS rows."""

    input: str
    states: tuple[str, ...]
    call: PythonCall

    @property
    def inputs(self) -> tuple[str, ...]:
        return (self.input, *self.states)


@dataclass(frozen=True, slots=True, kw_only=True)
class NearestJoin(Node):
    """NEAREST BY run with an index (optimizer/rules/nearest.py): `left`'s rows, each with its k
    best rows of `right` (read once, or a BROADCAST's entries; indexed) as a struct column named `right_alias`, and the
    right columns `left` lacks under their own names; the query that wrote the join reads this."""

    left: str
    right: str
    right_alias: str
    left_vector: str            # left column holding the query vectors
    right_vector: str           # right column indexed
    function: str               # vector_l2_distance | vector_cosine_similarity | vector_inner_product
    similarity: bool            # BY SIMILARITY: the largest values are the best
    approx: bool
    k: int
    outer: bool                 # LEFT OUTER
    state: bool = False         # `right` is a BROADCAST state: its entries, indexed once per version

    @property
    def inputs(self) -> tuple[str, ...]:
        return (self.left, self.right)


@dataclass(frozen=True, slots=True, kw_only=True)
class Sink:
    """Write a stream to a connector."""

    input: str
    connector: str
    path: str | None
    options: tuple[tuple[str, str], ...]
    mode: str                 # APPEND | OVERWRITE | COMPLETE | UPSERT
    partition_by: tuple[str, ...]
    line: int
    span: Span
    database: DatabaseTable | None = None     # TO DATABASE db TABLE 't' [KEY (...)]

    @property
    def inputs(self) -> tuple[str, ...]:
        return (self.input,)


PlanNode = Union[Source, BroadcastState, Query, Enrich, Match, Process, NearestJoin]


@dataclass(frozen=True, slots=True)
class Settings:
    """PIPELINE options and SET configuration."""

    name: str = "pipeline"
    mode: str = "BATCH"
    checkpoint: str | None = None
    trigger: str | None = None          # None, "available-now" or "every=<seconds>s"
    conf: tuple[tuple[str, str], ...] = ()
    answers: str | None = None          # ANSWERS 'location': the answer store of every STORE


@dataclass(frozen=True, slots=True)
class Plan:
    """A checked pipeline: settings, nodes in dependency order, sinks."""

    source_path: str
    settings: Settings
    nodes: tuple[PlanNode, ...]
    sinks: tuple[Sink, ...]
    folder: str = field(default="", compare=False)
    # DATABASE statements: (name, URL as written, `${NAME}` secrets unfilled)
    databases: tuple[tuple[str, str], ...] = ()
    # (rule name, what it did), in the order the optimiser's rules ran; empty before optimize()
    notes: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    # what `dslc check` says that is not an error (diagnostics of severity "note")
    remarks: tuple = field(default=(), compare=False)
    # EXPECT statements (compiler/plan/expectations.Expect), each beside the relation it judges
    expects: tuple = ()
    # indexes built once, so that lookups do not make compile time quadratic
    _by_name: dict = field(init=False, repr=False, compare=False, hash=False)
    _readers: dict = field(init=False, repr=False, compare=False, hash=False)
    _expects: dict = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_expects", {e.on.lower(): e for e in self.expects})
        by_name = {n.name.lower(): n for n in reversed(self.nodes)}    # the first of a name wins
        readers: dict[str, list] = {}
        for reader in (*self.nodes, *self.sinks):
            for name in dict.fromkeys(i.lower() for i in reader.inputs):
                readers.setdefault(name, []).append(reader)
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "_readers", readers)

    def node(self, name: str) -> PlanNode:
        """The node called `name` (case-insensitive, as in Spark SQL)."""
        try:
            return self._by_name[name.lower()]
        except KeyError:
            raise KeyError(name) from None

    def upstream(self, names: Iterable[str],
                 stop: Callable[[PlanNode], bool] = lambda node: False) -> Iterator[PlanNode]:
        """`names` and every node they read, transitively, each once (depth first, no recursion,
        so a lineage of any length works); the walk yields a node for which `stop` is true but
        does not go on to what it reads."""
        stack, seen = [n.lower() for n in names], set()
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            node = self.node(current)
            yield node
            if not stop(node):
                stack.extend(i.lower() for i in node.inputs)

    def expectation(self, name: str):
        """The EXPECT on relation `name` (None: none); its readers read only the rows that pass."""
        return self._expects.get(name.lower())

    def consumers(self, name: str) -> list[PlanNode | Sink]:
        """Nodes and sinks that read `name`."""
        return list(self._readers.get(name.lower(), ()))
