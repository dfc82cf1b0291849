"""EXPECT inside a chain: an operator after the one whose rows it judges, in the same Python pass.

Each constraint's condition arrives as a Python expression over the row `r` (translated at
compile time, compiler/plan/expect_python.py; None is SQL's NULL, which passes). All of them are
compiled into one function that says whether any constraint is broken, so a good row costs one
call; a row that breaks something is judged again constraint by constraint, for the counts and
the names. The constraints that also have an Arrow form (compiler/plan/expect_arrow.py) are
judged once per batch of rows instead (expect_batch.py): the operator holds the rows it gets
until the end of the chain's chunk (`flush`, called by the chain; no more rows than the chain's
collector holds for a chunk anyway), before a watermark and at the end of input, then judges
them together and passes them on in their order. The strictest action of the broken constraints decides: FAIL stops the job
(ExpectationFailed, which the job turns into exit code 4), QUARANTINE sends the row, with
`_constraints`, `_operator` and `_line`, out of the chain with the dead letters (as a
quarantine letter, written to its folder with them), DROP forgets it, WARN passes it on.
"""
from __future__ import annotations

import functools
import json
import operator
import re
from decimal import Decimal
from typing import Any, Callable

import pyarrow.compute as pc

from dslc.runtime import config as C
from dslc.runtime.core import expect_batch
from dslc.runtime.core.operator import Output, Row, Watermark

#: A quarantine letter among a chain's dead letters: {QUARANTINE: path, LINE: the JSON line}.
QUARANTINE, LINE = "quarantine", "line"
_STRICTNESS = {action: rank for rank, action in enumerate(C.ACTIONS)}
_COMPACT = (",", ":")       # JSON as Spark's to_json writes it


#: The exit code of a job stopped by an EXPECT's FAIL constraint (runtime/spark/failure.py).
EXIT_CODE = 4


class ExpectationFailed(RuntimeError):
    """An EXPECT's FAIL constraint broken by a row: the job stops (exit code 4)."""


def failure_prefix(expect: C.Expect, constraint: C.Constraint) -> str:
    """What a FAIL says before the row, the same from Python and from Spark."""
    return f"EXPECT ON {expect.name}: constraint {constraint.name} (line {constraint.line}) is broken by row "


def failure_message(expect: C.Expect, constraint: C.Constraint, row_json: str) -> str:
    """What a FAIL says, on one line."""
    return failure_prefix(expect, constraint) + row_json


@functools.lru_cache(maxsize=256)
def _like(pattern: str) -> Callable[[str], Any]:
    """Spark's LIKE as a compiled full match: `%` any text, `_` one character, `\\` escapes."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.compile("".join(out), re.S).fullmatch


_OPERATORS = {"==": operator.eq, "!=": operator.ne, ">": operator.gt, ">=": operator.ge, "<": operator.lt,
              "<=": operator.le}


def _fcmp(a: Any, b: Any, op: str) -> bool:
    """A comparison of floating-point values as Spark makes it: NaN equals NaN and is above every number."""
    if a != a or b != b:     # a NaN on either side (only NaN differs from itself)
        a, b = (1, 0.0) if a != a else (0, a), (1, 0.0) if b != b else (0, b)
    return _OPERATORS[op](a, b)


_NAMESPACE = {"_like": _like, "_fcmp": _fcmp, "Decimal": Decimal, "__builtins__": {"len": len, "abs": abs, "float": float}}


def compiled(python: str) -> Callable[[Row], Any]:
    """A constraint's Python expression as a function of the row."""
    return eval(compile(f"lambda r: {python}", "<constraint>", "eval"), dict(_NAMESPACE))  # noqa: S307 - made by the compiler


class ExpectOperator:
    """The chain operator of one EXPECT (see the module)."""

    def __init__(self, config: C.Expect) -> None:
        missing = [c.name for c in config.constraints if c.python is None]
        if missing:
            raise ValueError(f"EXPECT ON {config.name}: constraint(s) {', '.join(missing)} have no Python form")
        self.config = config
        self.name = config.key
        self.constraints = config.constraints
        self.checks = [compiled(c.python) for c in config.constraints]
        self.any_broken = compiled(" or ".join(f"({c.python}) is False" for c in config.constraints))
        self.failed = [0] * len(config.constraints)
        self.rows = self.dropped = self.quarantined = 0
        self.output: Output | None = None
        # the constraints with an Arrow form are judged per batch (expect_batch.py), the others per row
        self.batched = [i for i, c in enumerate(config.constraints) if c.arrow is not None]
        self.pending: list[Row] = []
        self.per_row = False    # the Arrow forms met a type they have no kernel for: judge every batch per row
        if self.batched:
            self.batch_checks = [expect_batch.compiled(config.constraints[i].arrow) for i in self.batched]
            per_row = [c.python for c in config.constraints if c.arrow is None]
            self.row_broken = compiled(" or ".join(f"({p}) is False" for p in per_row)) if per_row else None
            # a row waits for its batch: one list append (the chain binds this once, so the list stays)
            self.process_element = self.pending.append      # type: ignore[method-assign]

    def open(self, output: Output) -> None:
        self.output = output

    def process_element(self, row: Row) -> None:
        self.rows += 1
        if not self.any_broken(row):
            self.output.emit(row)
            return
        self.judged(row, [i for i, check in enumerate(self.checks) if check(row) is False])

    def flush(self) -> None:
        """Judge the rows held, in order: the good ones pass on, each bad one as its strictest
        broken constraint says (a batch without an Arrow judgement is judged per row)."""
        if not self.pending:
            return
        rows = self.pending.copy()
        self.pending.clear()
        try:
            if self.per_row:
                raise expect_batch.Unjudged("judged per row since an earlier batch", structural=True)
            masks = expect_batch.broken(self.batch_checks, rows)
        except expect_batch.Unjudged as unjudged:
            self.per_row = unjudged.structural    # a type that has no kernel: no later batch tries again
            for row in rows:
                ExpectOperator.process_element(self, row)
            return
        self.rows += len(rows)
        bad = functools.reduce(pc.or_, masks)
        emit = self.output.emit
        if self.row_broken is None and not pc.any(bad).as_py():
            for row in rows:
                emit(row)
            return
        bad_rows = bad.to_pylist()
        # each constraint's flags only at the broken rows, in order: a few broken rows in 10,000 no
        # longer make a Python list of every row per constraint (~8% of the flush, bench/expect_flags.py)
        at = pc.indices_nonzero(bad)
        flagged = zip(*(mask.take(at).to_pylist() for mask in masks))
        for n, row in enumerate(rows):
            if bad_rows[n]:
                flags = next(flagged)
            elif self.row_broken is None or not self.row_broken(row):
                emit(row)
                continue
            else:
                flags = ()      # broken by a constraint judged per row only
            broken = {self.batched[k] for k, flag in enumerate(flags) if flag}
            broken.update(i for i, c in enumerate(self.constraints)
                          if c.arrow is None and self.checks[i](row) is False)
            self.judged(row, sorted(broken))

    def judged(self, row: Row, broken: list[int]) -> None:
        """A row that breaks the constraints `broken` (their indexes, in order): counted, and
        passed on, dropped, quarantined or the job stopped, as the strictest of them says."""
        for i in broken:
            self.failed[i] += 1
        worst = max((self.constraints[i] for i in broken), key=lambda c: _STRICTNESS[c.action])
        if worst.action == "WARN":
            self.output.emit(row)
        elif worst.action == "DROP":
            self.dropped += 1
        elif worst.action == "QUARANTINE":
            self.quarantined += 1
            first = next(self.constraints[i] for i in broken if self.constraints[i].action == "QUARANTINE")
            self.output.emit_dead_letter({QUARANTINE: first.path, LINE: self.line(row, broken)})
        else:
            raise ExpectationFailed(failure_message(self.config, worst, json.dumps(row, default=str, separators=_COMPACT)))

    def line(self, row: Row, broken: list[int]) -> str:
        """The JSON line a quarantined row becomes: its columns, then what it broke, where."""
        return json.dumps({**row, "_constraints": [self.constraints[i].name for i in broken],
                           "_operator": self.config.name, "_line": self.config.line}, default=str, separators=_COMPACT)

    def process_watermark(self, watermark: Watermark) -> None:
        self.flush()
        self.output.emit_watermark(watermark)

    def finish(self) -> None:
        self.flush()

    def close(self) -> None:
        pass

    def dispose(self) -> None:
        pass

    def metrics(self) -> dict[str, Any]:
        """Rows in and out, and each constraint's failures (`failed.<name>`; passed = in - failed)."""
        return {"operator": self.name, "elements_in": self.rows,
                "elements_out": self.rows - self.dropped - self.quarantined, "dropped": self.dropped,
                "quarantined": self.quarantined,
                **{f"failed.{c.name}": n for c, n in zip(self.constraints, self.failed)}}
