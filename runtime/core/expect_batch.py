"""EXPECT's constraints judged once per batch of rows with pyarrow.compute, not once per row.

Each constraint with an Arrow form (compiled at compile time, compiler/plan/expect_arrow.py)
reads the columns it needs as Arrays built from the batch's rows (each column once per batch,
in the type Spark gives it) and gives a BooleanArray; a row breaks it where that is false (NULL
passes, as in SQL's CHECK). A batch whose values do not fit their declared types (an answer's
int where a DECIMAL is declared), or whose arithmetic overflows a checked integer or decimal,
raises `Unjudged`: the operator then judges that batch per row with the Python forms, which give
the same answers on every batch that does fit. When Arrow has no kernel for the columns' types
(`Unjudged.structural`), no batch would fit: the operator judges every later batch per row too.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dslc.runtime.core.operator import Row
from dslc.runtime.schema.arrow import to_arrow_type

_NULL = pa.scalar(None, pa.bool_())


class Unjudged(Exception):
    """The batch has no Arrow judgement (a value that does not fit, an overflow): judge it per row.
    `structural`: Arrow has no kernel for the columns' types, so no later batch will have one either."""

    def __init__(self, message: str, structural: bool = False) -> None:
        super().__init__(message)
        self.structural = structural


def _fcmp(a: pa.Array, b: pa.Array, op: str) -> pa.Array:
    """Two columns of doubles compared as Spark compares them: NaN equals NaN and is above every
    number. Each side becomes (is NaN, the value with NaN as 0), compared in that order."""
    a_nan, b_nan = pc.is_nan(a), pc.is_nan(b)
    either = pc.or_(a_nan, b_nan)
    plain = getattr(pc, op)(a, b)
    nan_side = getattr(pc, op)(pc.cast(a_nan, pa.int8()), pc.cast(b_nan, pa.int8()))
    return pc.if_else(either, nan_side, plain)


def _in(subject: pa.Array, values: Sequence[Any], has_null: bool) -> pa.Array:
    """SQL's `subject IN (values[, NULL])`: NULL for a NULL subject, true when found, else false
    (NULL when the list holds a NULL)."""
    if isinstance(values[0], str):
        found = pc.is_in(subject, value_set=pa.array(values, pa.string()))
    else:
        found = functools.reduce(pc.or_, (pc.equal(subject, v) for v in values))
    found = pc.if_else(pc.is_valid(subject), found, _NULL)
    return pc.if_else(found, True, _NULL) if has_null else found


_NAMESPACE = {"pc": pc, "pa": pa, "Decimal": Decimal, "_fcmp": _fcmp, "_in": _in, "__builtins__": {}}


def compiled(arrow: str) -> Callable[["Columns"], pa.Array]:
    """A constraint's Arrow expression as a function of a batch's columns."""
    return eval(compile(f"lambda b: {arrow}", "<constraint>", "eval"), dict(_NAMESPACE))  # noqa: S307 - made by the compiler


@functools.lru_cache(maxsize=64)
def _arrow_type(spark_type: str) -> pa.DataType:
    """The Arrow type a column is judged in: FLOAT as a double, as its Python form reads it."""
    if spark_type in ("FLOAT", "REAL"):
        return pa.float64()
    return to_arrow_type(spark_type)


class Columns:
    """A batch's columns, each built from the rows when a constraint first reads it."""

    __slots__ = ("rows", "built")

    def __init__(self, rows: list[Row]) -> None:
        self.rows = rows
        self.built: dict[str, pa.Array] = {}

    def __call__(self, name: str, spark_type: str) -> pa.Array:
        array = self.built.get(name)
        if array is None:
            array = self.built[name] = pa.array([row[name] for row in self.rows], _arrow_type(spark_type))
        return array


_UNFIT = (pa.ArrowException, ValueError, TypeError, NotImplementedError, ArithmeticError, KeyError)


def broken(checks: Sequence[Callable[[Columns], pa.Array]], rows: list[Row]) -> list[pa.Array]:
    """For each check, where `rows` break it (true where its condition is false, never null)."""
    columns = Columns(rows)
    try:
        return [pc.fill_null(pc.invert(check(columns)), False) for check in checks]
    except _UNFIT as exc:
        # pyarrow's ArrowNotImplementedError is a NotImplementedError: a type, not a value, did not fit
        raise Unjudged(str(exc), structural=isinstance(exc, NotImplementedError)) from exc
