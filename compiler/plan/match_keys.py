"""The equality keys of a MATCH condition, for the STREAMING lookup's index.

In STREAMING, MATCH runs inside the streaming query against the snapshot pinned for the
micro-batch (runtime/spark/state.py): with keys, each row is paired only with the entries whose
key values are equal (a dict lookup) instead of every entry; Spark still evaluates the whole
condition on the pairs, so the keys only have to let through every pair SQL equality keeps.
That holds for a conjunct `input.c = alias.s` of the top-level AND when both columns have the
same type and the type's Python equality is SQL's: not for FLOAT/DOUBLE (SQL has NaN = NaN),
nor for mixed types (SQL casts, e.g. '1' = 1), nor for ARRAY/MAP/STRUCT. NULL keys never match,
as in SQL.
"""
from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from dslc.compiler.plan import logical as plan

_INEXACT = ("FLOAT", "DOUBLE", "REAL")


def _conjuncts(condition: exp.Expression) -> list[exp.Expression]:
    if isinstance(condition, exp.Paren):
        return _conjuncts(condition.this)
    if isinstance(condition, exp.And):
        return _conjuncts(condition.this) + _conjuncts(condition.expression)
    return [condition]


def equality_keys(match: plan.Match, input_schema: plan.Schema, state_schema: plan.Schema) -> tuple[tuple[str, str], ...]:
    """(input column, state column) pairs the runtime may index on; () when none."""
    try:
        tree = sqlglot.parse_one(match.predicate, read="spark")
    except SqlglotError:
        return ()
    inputs = {f.name.lower(): f for f in input_schema}
    states = {f.name.lower(): f for f in state_schema}

    def side(column: exp.Expression) -> tuple[str, plan.Column] | None:
        if not isinstance(column, exp.Column):
            return None
        name, qualifier = column.name.lower(), column.table.lower()
        if qualifier == match.input.lower() or (not qualifier and name in inputs):
            return ("input", inputs[name]) if name in inputs else None
        if qualifier == match.alias.lower() or (not qualifier and name in states):
            return ("state", states[name]) if name in states else None
        return None

    keys: list[tuple[str, str]] = []
    for conjunct in _conjuncts(tree):
        if not isinstance(conjunct, exp.EQ):
            continue
        sides = dict(filter(None, (side(conjunct.this), side(conjunct.expression))))
        if set(sides) != {"input", "state"}:
            continue
        left, right = sides["input"], sides["state"]
        kind = left.type.upper()
        if kind != right.type.upper() or kind in _INEXACT or kind == "?" or kind.startswith(("ARRAY", "MAP", "STRUCT")):
            continue
        if (left.name, right.name) not in keys:
            keys.append((left.name, right.name))
    return tuple(keys)
