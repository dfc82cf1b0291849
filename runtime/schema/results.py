"""Does a value a user function returned fit its declared RETURNS type?

Checked per element, so that a bad value fails (or dead-letters) that element with its column
named, instead of failing the whole task later when the chain builds its Arrow batch. ISO 8601
text for a TIMESTAMP or DATE is parsed (JSON carries time as text); text that is not a time, and
anything but a list for an ARRAY (a string is not an array of its characters), is a mismatch.
"""
from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from dslc.runtime.config import Column
from dslc.runtime.schema.type_names import BOOLEANS, FLOAT_BITS, INTEGER_BITS

_TIME_TYPES = {"TIMESTAMP": "timestamp", "TIMESTAMP_LTZ": "timestamp", "TIMESTAMP_NTZ": "timestamp_ntz",
               "DATE": "date"}


@functools.lru_cache(maxsize=256)
def _kind(spark_type: str) -> tuple[str, int]:
    """('int', bits) | ('number', 0) | ('bool', 0) | ('timestamp' | 'timestamp_ntz' | 'date', 0) |
    ('array', 0) | ('object', 0) | ('any', 0) for a RETURNS type."""
    base = spark_type.strip().upper()
    if base in INTEGER_BITS:
        return "int", INTEGER_BITS[base]
    if base in FLOAT_BITS or base.startswith(("DECIMAL", "DEC(", "NUMERIC")) or base == "DEC":
        return "number", 0
    if base in BOOLEANS:
        return "bool", 0
    if base in _TIME_TYPES:
        return _TIME_TYPES[base], 0
    if base.startswith("ARRAY<") and base.endswith(">"):
        return "array", 0
    if base.startswith(("MAP<", "STRUCT<")):
        return "object", 0
    return "any", 0


def _element_type(spark_type: str) -> str:
    """ARRAY<T> -> T."""
    return spark_type.strip()[len("ARRAY<"):-1]


def parse_time(text: str, kind: str) -> dt.datetime | dt.date | None:
    """ISO 8601 text as the value of a `timestamp` (UTC; text without an offset is UTC, as a naive
    datetime from a PYTHON function is), `timestamp_ntz` (wall-clock time) or `date` column
    (a date, or the date of a date-time); None when it is not ISO 8601."""
    text = text.strip()
    try:
        if kind == "date":
            return dt.date.fromisoformat(text) if len(text) <= 10 else dt.datetime.fromisoformat(text).date()
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        return None
    if kind == "timestamp_ntz":
        return moment.replace(tzinfo=None)
    return moment.replace(tzinfo=dt.timezone.utc) if moment.tzinfo is None else moment.astimezone(dt.timezone.utc)


def conform(value: Any, spark_type: str) -> tuple[bool, Any]:
    """(fits, the value to store): ISO text for a time column becomes its datetime/date, the
    items of an ARRAY are conformed to its element type; everything else is stored as it is."""
    if value is None:
        return True, None
    kind, _ = _kind(spark_type)
    if kind in ("timestamp", "timestamp_ntz", "date"):
        if isinstance(value, str):
            parsed = parse_time(value, kind)
            return parsed is not None, parsed if parsed is not None else value
        return not isinstance(value, (bool, list, dict)), value
    if kind == "array":
        if not isinstance(value, (list, tuple)):
            return False, value
        element = _element_type(spark_type)
        if _kind(element)[0] == "any":
            return True, value
        items = [conform(item, element) for item in value]
        if not all(fits for fits, _ in items):
            return False, value
        return True, [stored for _, stored in items]
    if kind == "object":
        return isinstance(value, (dict, list, tuple)), value
    return _fits(value, spark_type), value


def _fits(value: Any, spark_type: str) -> bool:
    """Can the chain store `value` in a column of this scalar type? Other types are not checked."""
    if value is None:
        return True
    kind, bits = _kind(spark_type)
    if kind not in ("int", "number", "bool"):
        return conform(value, spark_type)[0]
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
            fits, stored = conform(value, column.type)
            if not fits:
                return _message(column, value)
            if stored is not value and isinstance(row, dict):
                row[name] = stored          # ISO text parsed: what the Arrow batch gets
        return None
    return check


# the type of a value that fits a column of this kind whatever it is (an int must be in range;
# an array's items may need a look)
_USUAL = {"number": float, "bool": bool, "timestamp": dt.datetime, "timestamp_ntz": dt.datetime, "date": dt.date}


def _message(column: Column, value: Any) -> str:
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"field '{column.name}' is declared {column.type} but got {type(value).__name__} {shown}"
