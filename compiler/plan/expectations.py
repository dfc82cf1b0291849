"""EXPECT ON name CONSTRAINT c CHECK (condition) [ON VIOLATION ...] ...: checked, and planned.

Each condition goes through the SQL checker as the one item of `SELECT (condition) FROM name`
(names with did-you-mean hints, functions, types), then must be a BOOLEAN, deterministic, and
judge one row at a time (no aggregate, window function or subquery). Constraints without an
ON VIOLATION of their own take the statement's default (WARN when there is none).

The plan keeps each EXPECT beside the relation it judges (`Plan.expects`): the relation `name`
*is* the rows that pass, so every reader of `name` (queries, chains, sinks, states) reads only
them. Which rows reach the EXPECT never changes: the optimiser moves no filter of a reader
before it (rules/pushdown.py), and prunes no column it needs (rules/pruning.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlglot import exp

from dslc.compiler.diagnostics import error
from dslc.compiler.frontend import ast
from dslc.compiler.plan import expect_arrow
from dslc.compiler.plan import logical as plan
from dslc.compiler.plan.expect_python import Translation, translate
from dslc.compiler.plan.names import sql_name
from dslc.compiler.source import Span
from dslc.compiler.sparksql.sql import analyze_query, parse_sql
from dslc.compiler.sparksql.sqltypes import UNKNOWN
from dslc.runtime.config import ACTIONS

if TYPE_CHECKING:
    from dslc.compiler.plan.planner import _Planner as Planner

#: Functions whose value changes from one evaluation to the next, or with where and when a row is
#: read: a constraint calling one would judge the same row differently in BATCH and STREAMING.
NON_DETERMINISTIC = frozenset({
    "rand", "random", "randn", "randstr", "uniform", "uuid", "shuffle", "now", "current_timestamp",
    "current_date", "curdate", "current_time", "localtimestamp", "localtime", "current_timezone",
    "monotonically_increasing_id", "spark_partition_id", "input_file_name", "input_file_block_start",
    "input_file_block_length", "reflect", "java_method", "try_reflect", "raise_error", "assert_true",
    "unix_timestamp",
})
_ITEM = "__dslc_check"


@dataclass(frozen=True, slots=True, kw_only=True)
class Constraint:
    """One checked CONSTRAINT: its condition as written (parentheses kept) and as sqlglot's tree,
    the columns it reads, its action, and its Python and Arrow forms for running inside a chain
    (per row, per batch of rows)."""

    name: str
    condition: str
    tree: exp.Expression = field(compare=False, repr=False)
    columns: tuple[str, ...]
    action: str                       # WARN | DROP | QUARANTINE | FAIL
    path: str | None                  # QUARANTINE's folder
    line: int
    span: Span
    python: Translation = field(compare=False)
    arrow: Translation = field(compare=False, default=Translation(None, "no Python form"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Expect:
    """A checked EXPECT ON `on` (the relation's name as defined)."""

    on: str
    constraints: tuple[Constraint, ...]
    line: int
    span: Span

    @property
    def strictest(self) -> str:
        return max((c.action for c in self.constraints), key=ACTIONS.index)

    @property
    def removes(self) -> bool:
        """True when some row may not pass (DROP or QUARANTINE; FAIL stops the job instead)."""
        return any(c.action in ("DROP", "QUARANTINE") for c in self.constraints)

    @property
    def quarantine_paths(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.path for c in self.constraints if c.path is not None))

    def columns(self) -> set[str] | None:
        """The columns (lower case) the EXPECT needs of its relation; None: all of them (a
        quarantined row holds every column, FAIL's message shows the whole row)."""
        if any(c.action in ("QUARANTINE", "FAIL") for c in self.constraints):
            return None
        return {name.lower() for c in self.constraints for name in c.columns}

    @property
    def python(self) -> bool:
        """True when every constraint has a Python form (it may run inside a chain)."""
        return all(c.python.python is not None for c in self.constraints)

    @property
    def why_not_python(self) -> str:
        return next((f"constraint {c.name}: {c.python.why_not}" for c in self.constraints
                     if c.python.python is None), "")


@dataclass(frozen=True, slots=True)
class _Sql:
    """The condition as a query the checker knows (spans shifted so that errors point at it)."""

    text: str
    span: Span


def check_all(planner: "Planner", statements: list[ast.Expect], taken_paths: dict[str, str]) -> tuple[Expect, ...]:
    """Every EXPECT checked, every problem reported; the ones that check. `taken_paths`: folders
    that sinks and dead letters write (path → what writes it)."""
    found: list[Expect] = []
    seen: dict[str, ast.Expect] = {}
    for stmt in statements:
        key = stmt.target.value.lower()
        if key in seen:
            planner.add(error("E0350", stmt.target.span, name=stmt.target.value,
                              hint=f"put every constraint in the EXPECT on line {planner.line(seen[key].span)}"))
            continue
        seen[key] = stmt
        expect = _check(planner, stmt, taken_paths)
        if expect is not None:
            found.append(expect)
    return tuple(found)


def _check(planner: "Planner", stmt: ast.Expect, taken_paths: dict[str, str]) -> Expect | None:
    target = planner._lookup(stmt.target, "source or stream", (ast.Source, ast.Select, ast.Enrich, ast.Match,
                                                                ast.Process), "EXPECT ON")
    if not stmt.constraints:
        planner.add(error("E0351", stmt.target.span, name=stmt.target.value,
                          hint="add CONSTRAINT name CHECK (condition)"))
    for extra in stmt.repeated:
        planner.add(error("E0352", extra.span, hint="keep one ON VIOLATION for the statement, one per constraint"))
    default = _action(planner, stmt.default, stmt.target.value, taken_paths) if stmt.default else ("WARN", None)
    names: dict[str, ast.Constraint] = {}
    built: list[Constraint] = []
    for item in stmt.constraints:
        if item.name.value.lower() in names:
            first = planner.line(names[item.name.value.lower()].span)
            planner.add(error("E0202", item.name.span, name=item.name.value,
                              hint=f"constraint '{item.name.value}' is on line {first}; pick another name"))
            continue
        names[item.name.value.lower()] = item
        action, path = _action(planner, item.violation, stmt.target.value, taken_paths) if item.violation else default
        if target in (None, False):
            continue
        constraint = _constraint(planner, item, target, action, path)
        if constraint is not None:
            built.append(constraint)
    if target in (None, False) or len(built) != len(stmt.constraints) or not built:
        return None
    return Expect(on=target.name, constraints=tuple(built), line=planner.line(stmt.span), span=stmt.span)


def _action(planner: "Planner", violation: ast.Violation, target: str,
            taken_paths: dict[str, str]) -> tuple[str, str | None]:
    action = violation.action.value
    if violation.path is None:
        return action, None
    path = violation.path.value
    if not path.strip():
        planner.add(error("E0309", violation.path.span, text=path, what="QUARANTINE folder",
                          hint=f"name a folder, e.g. 'target/quarantine/{target}'"))
        return action, path
    owner = taken_paths.get(path.rstrip("/"))
    if owner is not None and owner != f"EXPECT ON {target}":
        planner.add(error("E0353", violation.path.span, path=path, other=owner,
                          hint=f"give it a folder of its own, e.g. 'target/quarantine/{target}'"))
    taken_paths.setdefault(path.rstrip("/"), f"EXPECT ON {target}")
    return action, path


def _constraint(planner: "Planner", item: ast.Constraint, target: plan.PlanNode, action: str,
                path: str | None) -> Constraint | None:
    """One condition checked as a query over the target's columns."""
    prefix = "SELECT "
    text = f"{prefix}{item.check.text} AS {_ITEM} FROM {sql_name(target.name)}"
    sql = _Sql(text, Span(max(0, item.check.span.start - len(prefix)), item.check.span.start + len(text)))
    problems: list = []
    tree = parse_sql(sql, problems)
    planner.problems.extend(problems)
    if tree is None:
        return None
    condition = tree.expressions[0].this if isinstance(tree.expressions[0], exp.Alias) else tree.expressions[0]
    if not _one_row_at_a_time(planner, item, condition):
        return None
    info = analyze_query(sql, tree, {target.name.lower(): target.schema}, planner.problems)
    if info is None or info.schema is None:
        return None
    if info.aggregates:
        planner.add(error("E0355", item.check.span, name=item.name.value, what="an aggregate", hint=_ONE_ROW))
        return None
    kind = info.schema[0].type
    if kind not in ("BOOLEAN", UNKNOWN):
        planner.add(error("E0354", item.check.span, name=item.name.value, type=kind,
                          hint=_boolean_hint(kind)))
        return None
    spelled = {f.name.lower(): (f.name, f.type) for f in target.schema}
    columns = tuple(dict.fromkeys(spelled[c.name.lower()][0] for c in condition.find_all(exp.Column, bfs=False)
                                  if c.name.lower() in spelled))
    return Constraint(name=item.name.value, condition=item.check.text, tree=condition, columns=columns,
                      action=action, path=path, line=planner.line(item.span), span=item.span,
                      python=(python := translate(condition, spelled)),
                      arrow=expect_arrow.translate(condition, spelled) if python.python is not None else python)


_ONE_ROW = "a constraint judges one row on its own; compute the figure in a STREAM and put the constraint on that stream"


def _one_row_at_a_time(planner: "Planner", item: ast.Constraint, condition: exp.Expression) -> bool:
    """No aggregate, window function or subquery; nothing non-deterministic."""
    what = None
    if condition.find(exp.Select, exp.Subquery) is not None:
        what = "a subquery"
    elif condition.find(exp.Window) is not None:
        what = "a window function"
    elif condition.find(exp.AggFunc) is not None:
        what = "an aggregate"
    if what is not None:
        planner.add(error("E0355", item.check.span, name=item.name.value, what=what, hint=_ONE_ROW))
        return False
    for function in condition.find_all(exp.Func):
        name = (function.name if isinstance(function, exp.Anonymous) else function.sql_name()).lower()
        if name in NON_DETERMINISTIC:
            planner.add(error("E0356", item.check.span, name=item.name.value, function=name,
                              hint="a constraint must judge a row the same way every time it is read "
                                   "(BATCH and STREAMING, a rerun); compute the value in a STREAM first"))
            return False
    return True


def _boolean_hint(kind: str) -> str:
    if kind in ("STRING",):
        return "compare it: CHECK (col = 'value'), CHECK (col IS NOT NULL)"
    return "compare it: CHECK (col > 0), CHECK (col IS NOT NULL)"

