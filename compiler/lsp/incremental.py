"""Incremental checking: what one edit leaves unchanged is not checked again.

A check of a 300-statement file spends its time in three pure steps: Lark parsing each
statement, sqlglot parsing each STREAM's query, and sqlglot analysing that query against the
schemas it reads. Each is a function of its inputs only, so an `EditorCache` remembers its
results by exactly those inputs:

- a statement's syntax tree and syntax errors by its text (and whether ';' ends it);
- a query's sqlglot tree and syntax errors by its text;
- a query's analysis (output schema, errors) by its text and options, and by the schemas it
  looked up while it ran: every lookup is recorded, and a remembered analysis is used only when
  each of those lookups gives the same answer now (a schema upstream changed: analysed again).

Everything else of the check (names, order, ENRICH/PROCESS/SINK rules, which user modules exist
beside the file, the STREAMING pass) runs in full on every version, so the diagnostics are those
of `dslc check` by construction (tests/lsp/test_incremental.py compares both over random edits).

Positions: results are remembered with the offset the text had; when the same text has moved
(an edit above it), every span in them is moved by the difference (`shifted`)."""
from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from dslc.compiler.diagnostics import Diagnostic
from dslc.compiler.frontend import ast
from dslc.compiler.frontend.lexical import Chunk
from dslc.compiler.frontend.parser import parse_statement
from dslc.compiler.plan.planner import SqlSteps
from dslc.compiler.source import Span

ENTRIES = 4096      # remembered results of each kind, at least (a 300-statement file needs 300 to 600)
ENTRIES_PER_STATEMENT = 3   # and at least this many per statement of the longest version parsed
_MISSING = object()


def _always() -> bool:
    return True


class Superseded(Exception):
    """A newer version of the document arrived: this check is abandoned (nothing half-done is
    remembered, each step is stored only once it is complete)."""


class EditorCache:
    """The remembered steps of one open document. Used from one thread at a time (the server's
    checking thread); `current` tells a check whether its version is still the newest."""

    def __init__(self, entries: int = ENTRIES) -> None:
        self.statements = _Lru(entries)
        self.sql = RememberedSql(self, entries)
        self.current: Callable[[], bool] = _always
        self.hits = self.misses = 0     # for tests: was anything reused?
        self._parsed = 0                # statements of the parse under way

    @contextmanager
    def parsing(self) -> Iterator[None]:
        """Around the parse of one whole version: the cache grows to hold a few versions of a
        file of any length (a fixed size would forget everything of a long one, each time)."""
        self._parsed = 0
        yield

    def _grow(self) -> None:
        wanted = ENTRIES_PER_STATEMENT * self._parsed
        for remembered in (self.statements, self.sql.trees, self.sql.analyses):
            if remembered.size and remembered.size < wanted:
                remembered.size = wanted

    @contextmanager
    def checking(self, current: Callable[[], bool]) -> Iterator[None]:
        """While one version is checked: `current` says whether it is still the newest."""
        self.current = current
        try:
            yield
        finally:
            self.current = _always

    def go_on(self) -> None:
        """Raise Superseded when a newer version is waiting (called between steps)."""
        if not self.current():
            raise Superseded()

    def statement(self, chunk: Chunk) -> tuple[ast.Statement | None, list[Diagnostic]]:
        """`parse_statement`, remembered by the chunk's text."""
        self.go_on()
        self._parsed += 1
        self._grow()
        key = (chunk.text, chunk.terminated)
        found = self.statements.get(key)
        if found is None:
            self.misses += 1
            statement, problems = parse_statement(chunk)
            self.statements.put(key, (chunk.start, statement, problems))
            return statement, list(problems)
        self.hits += 1
        start, statement, problems = found
        delta = chunk.start - start
        return shifted(statement, delta), [shifted(p, delta) for p in problems]


class RememberedSql(SqlSteps):
    """The planner's sqlglot steps (compiler/plan/planner.SqlSteps), remembered."""

    def __init__(self, cache: EditorCache, entries: int) -> None:
        self.cache = cache
        self.trees = _Lru(entries)
        self.analyses = _Lru(entries)
        self._tables: dict[int, tuple[object, list]] = {}     # id(tree) → (tree, its tables)

    def parse(self, sql: ast.Sql, problems: list[Diagnostic], **options: Any):
        self.cache.go_on()
        key = (sql.text, tuple(sorted(options.items())))
        found = self.trees.get(key)
        if found is None:
            self.cache.misses += 1
            mine: list[Diagnostic] = []
            tree = SqlSteps.parse(sql, mine, **options)
            self.trees.put(key, (sql.span.start, tree, mine))
            problems.extend(mine)
            return tree
        self.cache.hits += 1
        start, tree, mine = found
        problems.extend(shifted(p, sql.span.start - start) for p in mine)
        return tree

    def tables(self, tree) -> list:
        """relations(tree), remembered for the trees `parse` remembers (they are never changed)."""
        found = self._tables.get(id(tree))
        if found is None or found[0] is not tree:
            if len(self._tables) > 2 * self.trees.size:
                self._tables = {id(t): v for k, (_, t, _) in self.trees.data.items()
                                if (v := self._tables.get(id(t))) is not None and v[0] is t}
            found = self._tables[id(tree)] = (tree, SqlSteps.tables(tree))
        return found[1]

    def analyze(self, sql: ast.Sql, tree, schemas: Mapping, problems: list[Diagnostic], **options: Any):
        """analyze_query; `tree` is the sqlglot tree of `sql.text` (the planner's `parse`)."""
        self.cache.go_on()
        key = (sql.text, tuple(sorted(options.items())))
        earlier = self.analyses.get(key) or ()
        for start, reads, info, mine in earlier:
            if reads.same_in(schemas):
                self.cache.hits += 1
                delta = sql.span.start - start
                problems.extend(shifted(p, delta) for p in mine)
                return shifted(info, delta)
        self.cache.misses += 1
        reads = _Recording(schemas)
        mine: list[Diagnostic] = []
        info = SqlSteps.analyze(sql, tree, reads, mine, **options)
        # the newest first; two kept per query (an edit upstream and its undo)
        self.analyses.put(key, ((sql.span.start, reads.freeze(), info, mine),) + tuple(earlier[:1]))
        problems.extend(mine)
        return info


class _Recording(Mapping):
    """A view of the schemas a query may read that notes every question asked of it."""

    def __init__(self, schemas: Mapping) -> None:
        self._schemas = schemas
        self.looked_up: dict[str, object] = {}
        self.listed: tuple[str, ...] | None = None

    def __getitem__(self, key: str):
        try:
            value = self._schemas[key]
        except KeyError:
            self.looked_up[key] = _MISSING
            raise
        self.looked_up[key] = value
        return value

    def __iter__(self) -> Iterator[str]:
        self.listed = tuple(self._schemas)
        return iter(self.listed)

    def __len__(self) -> int:
        self.listed = tuple(self._schemas)
        return len(self.listed)

    def freeze(self) -> "_Reads":
        return _Reads(tuple(self.looked_up.items()), self.listed)


@dataclasses.dataclass(frozen=True)
class _Reads:
    """What an analysis asked of the schemas, and the answers it got."""

    looked_up: tuple[tuple[str, object], ...]
    listed: tuple[str, ...] | None

    def same_in(self, schemas: Mapping) -> bool:
        """True when every question gets the same answer from `schemas` now."""
        for key, value in self.looked_up:
            try:
                now = schemas[key]
            except KeyError:
                now = _MISSING
            if now is not value and now != value:
                return False
        return self.listed is None or tuple(schemas) == self.listed


class _Lru:
    """At most `size` entries; the least recently used goes first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict = OrderedDict()

    def get(self, key):
        value = self.data.get(key)
        if value is not None:
            self.data.move_to_end(key)
        return value

    def put(self, key, value) -> None:
        self.data[key] = value
        self.data.move_to_end(key)
        while len(self.data) > self.size:
            self.data.popitem(last=False)

    def __len__(self) -> int:
        return len(self.data)


# ---- moving results to where their text is now

def shifted(value, delta: int):
    """`value` with every Span in it (through dataclasses, tuples, lists and dicts) moved by
    `delta` characters; anything else (sqlglot trees, strings, numbers) is shared, not copied."""
    return value if delta == 0 else _shift(value, delta)


def _shift(value, delta: int):
    kind = type(value)
    if kind is Span:
        return Span(value.start + delta, value.end + delta)
    if kind in _SHARED:
        return value
    mover = _MOVERS.get(kind)
    if mover is None:
        mover = _MOVERS[kind] = _mover(kind)
    return mover(value, delta)


_SHARED = frozenset({str, int, float, bool, type(None)})
_MOVERS: dict[type, Callable] = {}


def _mover(kind: type) -> Callable:
    """How to move the spans in a value of one type (found once per type)."""
    if kind is tuple:
        return lambda value, delta: tuple([_shift(v, delta) for v in value])
    if kind is list:
        return lambda value, delta: [_shift(v, delta) for v in value]
    if kind is dict:
        return lambda value, delta: {k: _shift(v, delta) for k, v in value.items()}
    if not dataclasses.is_dataclass(kind):
        return lambda value, delta: value
    fields = dataclasses.fields(kind)
    if any(not f.init for f in fields):
        raise TypeError(f"{kind.__name__} has fields outside __init__: cannot move its spans")
    names = tuple(f.name for f in fields)
    return lambda value, delta: kind(*[_shift(getattr(value, name), delta) for name in names])
