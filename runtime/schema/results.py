"""Does a value a user function returned fit its declared RETURNS type?

Checked per element, so that a bad value fails (or dead-letters) that element with its column
named, instead of failing the whole task later when the chain builds its Arrow batch.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from dslc.runtime.config import Column

_INTEGER_BITS = {"INT": 32, "INTEGER": 32, "BIGINT": 64, "LONG": 64, "SMALLINT": 16, "SHORT": 16,
                 "TINYINT": 8, "BYTE": 8}
_FLOAT_TYPES = {"DOUBLE", "FLOAT", "REAL"}
_BOOLEAN_TYPES = {"BOOLEAN", "BOOL"}


@functools.lru_cache(maxsize=256)
def _kind(spark_type: str) -> tuple[str, int]:
    """('int', bits) | ('number', 0) | ('bool', 0) | ('any', 0) for a RETURNS type."""
    base = spark_type.strip().upper()
    if base in _INTEGER_BITS:
        return "int", _INTEGER_BITS[base]
    if base in _FLOAT_TYPES or base.startswith(("DECIMAL", "DEC(", "NUMERIC")) or base == "DEC":
        return "number", 0
    if base in _BOOLEAN_TYPES:
        return "bool", 0
    return "any", 0


def _fits(value: Any, spark_type: str) -> bool:
    """Can the chain store `value` in a column of this scalar type? Other types are not checked."""
    if value is None:
        return True
    kind, bits = _kind(spark_type)
    if kind == "any":
        return True
    if kind == "bool":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "int":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return isinstance(value, int) and -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)
    if isinstance(value, (int, float, Decimal)):
        return True
    if isinstance(value, str):
        try:
            Decimal(value.strip())
        except ArithmeticError:
            return False
        return True
    return False


def mismatch(row: Mapping[str, Any], returns: tuple[Column, ...]) -> str | None:
    """"field 'x' is declared DOUBLE but got str 'high'" for the first value that does not fit, else None."""
    for column in returns:
        value = row.get(column.name)
        if not _fits(value, column.type):
            return _message(column, value)
    return None


def checker(returns: tuple[Column, ...]) -> Callable[[Mapping[str, Any]], str | None] | None:
    """`mismatch` for these RETURNS, decided once per operator rather than per row: None when no
    column has a checked type (strings, arrays...); the usual value of a column passes at once
    (a float for a DOUBLE, a bool for a BOOLEAN), anything else is looked at by `_fits`."""
    checked = tuple((c.name, _USUAL.get(_kind(c.type)[0]), c) for c in returns if _kind(c.type)[0] != "any")
    if not checked:
        return None

    def check(row: Mapping[str, Any]) -> str | None:
        for name, usual, column in checked:
            value = row.get(name)
            if value is None or type(value) is usual:
                continue
            if not _fits(value, column.type):
                return _message(column, value)
        return None
    return check


# the type of a value that fits a column of this kind whatever it is (an int must be in range)
_USUAL = {"number": float, "bool": bool}


def _message(column: Column, value: Any) -> str:
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"field '{column.name}' is declared {column.type} but got {type(value).__name__} {shown}"
