"""Constraints on a MODEL's answers asked of the model itself: what JSON Schema can say of a
RETURNS column is added to the structured-output schema sent with every request.

    EXPECT ON labelled CONSTRAINT known CHECK (category IN ('billing', 'bug'))
    =>  "category": {"type": "string", "enum": ["billing", "bug"]}

`col IN (constants)` and `col = constant` become `enum`; `BETWEEN` and comparisons with a
constant `minimum` / `maximum` (`exclusiveMinimum` / `exclusiveMaximum` for `>` and `<`); a
constraint's conjuncts are read one by one (`a IN (...) AND b > 0` pushes both), anything else
(OR, NOT, functions, input columns) stays with the EXPECT alone. `col IS NOT NULL` is what the
schema already asks of every RETURNS column (each property is a non-null type), so it is listed
as pushed without a change. The answers are checked by the EXPECT all the same: a model may not
honour the schema, and an answer outside a pushed `enum` still fits RETURNS.
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dslc.compiler.plan import logical as plan
from dslc.compiler.plan.expectations import Expect
from dslc.runtime.schema.json_schema import type_schema

_BOUNDS = {exp.GTE: "minimum", exp.GT: "exclusiveMinimum", exp.LTE: "maximum", exp.LT: "exclusiveMaximum"}
_FLIPPED = {exp.GTE: exp.LTE, exp.GT: exp.LT, exp.LTE: exp.GTE, exp.LT: exp.GT}


@dataclass(frozen=True, slots=True)
class Pushed:
    """One thing asked of the model: `keyword` of `column`'s schema (`not null`: already asked)."""

    column: str
    keyword: str
    value: object
    constraint: str

    def describe(self) -> str:
        shown = list(self.value) if isinstance(self.value, tuple) else self.value
        what = "non-null type (every RETURNS column is asked non-null)" if self.keyword == "not null" \
            else f"{self.keyword} {shown!r}"
        return f"{self.column}: {what} (constraint {self.constraint})"


def pushable(expect: Expect, node: plan.Enrich) -> list[Pushed]:
    """What of `expect` the model behind `node` can be asked, in constraint order."""
    if not isinstance(node.call, plan.ModelCall):
        return []
    kinds = {}
    for column in node.returns:
        try:
            kinds[column.name.lower()] = (column.name, type_schema(column.type).get("type"))
        except ValueError:
            continue
    found: list[Pushed] = []
    for constraint in expect.constraints:
        for part in _conjuncts(constraint.tree):
            found += _of(part, kinds, constraint.name)
    return found


def limits(found: list[Pushed]) -> tuple[tuple[str, str, object], ...]:
    """The schema keywords per column, several constraints on one column merged: enums
    intersected (in the first one's order), the tightest bound of each kind."""
    merged: dict[tuple[str, str], object] = {}
    for item in found:
        key = (item.column, item.keyword)
        if item.keyword == "not null":
            continue
        if key not in merged:
            merged[key] = item.value
        elif item.keyword == "enum":
            merged[key] = tuple(v for v in merged[key] if v in item.value)
        elif item.keyword in ("minimum", "exclusiveMinimum"):
            merged[key] = max(merged[key], item.value)
        else:
            merged[key] = min(merged[key], item.value)
    return tuple((column, keyword, value) for (column, keyword), value in merged.items())


def _conjuncts(tree: exp.Expression) -> list[exp.Expression]:
    while isinstance(tree, exp.Paren):
        tree = tree.this
    if isinstance(tree, exp.And):
        return _conjuncts(tree.this) + _conjuncts(tree.expression)
    return [tree]


def _column(node: exp.Expression, kinds: dict) -> tuple[str, str] | None:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column) and not node.table and node.name.lower() in kinds:
        return kinds[node.name.lower()]
    return None


def _constant(node: exp.Expression, kind: str) -> object:
    """The value of a literal of the column's JSON kind; None when it is not one."""
    negative = isinstance(node, exp.Neg)
    node = node.this if negative else node
    if not isinstance(node, exp.Literal):
        return None
    if node.is_string:
        return node.this if kind == "string" and not negative else None
    if kind not in ("integer", "number"):
        return None
    number = float(node.this) if kind == "number" or not node.this.lstrip("-").isdigit() else int(node.this)
    if kind == "integer" and isinstance(number, float):
        return None
    return -number if negative else number


def _of(part: exp.Expression, kinds: dict, constraint: str) -> list[Pushed]:
    if isinstance(part, exp.Not) and isinstance(part.this, exp.Is) and isinstance(part.this.expression, exp.Null):
        column = _column(part.this.this, kinds)
        return [Pushed(column[0], "not null", True, constraint)] if column else []
    if isinstance(part, exp.In) and not part.args.get("query"):
        column = _column(part.this, kinds)
        values = [_constant(e, column[1]) for e in part.expressions] if column else [None]
        return [Pushed(column[0], "enum", tuple(dict.fromkeys(values)), constraint)] if None not in values else []
    if isinstance(part, exp.Between):
        column = _column(part.this, kinds)
        if column is None or column[1] not in ("integer", "number"):
            return []
        low, high = _constant(part.args["low"], column[1]), _constant(part.args["high"], column[1])
        return [Pushed(column[0], k, v, constraint) for k, v in (("minimum", low), ("maximum", high)) if v is not None]
    return _comparison(part, kinds, constraint)


def _comparison(part: exp.Expression, kinds: dict, constraint: str) -> list[Pushed]:
    kind = type(part)
    if kind not in _BOUNDS and kind is not exp.EQ:
        return []
    left, right = part.this, part.expression
    column = _column(left, kinds)
    if column is None:
        column, left, right = _column(right, kinds), right, left
        kind = _FLIPPED.get(kind, kind)
    if column is None:
        return []
    value = _constant(right, column[1])
    if value is None:
        return []
    if kind is exp.EQ:
        return [Pushed(column[0], "enum", (value,), constraint)]
    if column[1] not in ("integer", "number"):
        return []
    return [Pushed(column[0], _BOUNDS[kind], value, constraint)]
