"""Values of a test file against Spark types: typing case rows by a SCHEMA, and putting expected
and actual rows in one comparable form.

YAML gives str, int, float, bool, None, dates and timestamps; a SCHEMA says what each column
holds. `typed` converts a YAML value to the Python value Spark stores for the type, or raises
`DoesNotFit` saying why; `comparable` turns a value read back from Spark (or an expected value
already typed) into plain data that compares equal exactly when the rows agree.
"""
from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from pyspark.sql import types as T

_INT_RANGE = {T.ByteType: 8, T.ShortType: 16, T.IntegerType: 32, T.LongType: 64}


class DoesNotFit(ValueError):
    """A value that the column's type cannot hold."""


def _type_name(data_type: T.DataType) -> str:
    return data_type.simpleString().upper()


def _timestamp(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        stamp = value
    elif isinstance(value, dt.date):
        stamp = dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        text = value.strip().replace("T", " ", 1)
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            stamp = dt.datetime.fromisoformat(text)
        except ValueError:
            raise DoesNotFit("expected a timestamp such as 2024-05-01 10:00:00") from None
    else:
        raise DoesNotFit("expected a timestamp such as 2024-05-01 10:00:00")
    # naive means UTC (the session time zone dslc pins); aware ones are converted
    return stamp.replace(tzinfo=dt.timezone.utc) if stamp.tzinfo is None else stamp.astimezone(dt.timezone.utc)


def typed(value: Any, data_type: T.DataType) -> Any:
    """`value` as Spark holds a `data_type` value; raise DoesNotFit when it cannot. Each type has
    its rule in `_TYPED` (a type none has, VARIANT say, takes the value as it is)."""
    if value is None:
        return None
    rule = next((_TYPED[kind] for kind in type(data_type).__mro__ if kind in _TYPED), None)
    return value if rule is None else rule(value, data_type)


def _string(value: Any, data_type: T.StringType) -> str:
    if isinstance(value, bool):
        raise DoesNotFit(f"{value!r} is not a STRING (quote it: YAML reads yes/no/true/false as booleans)")
    if isinstance(value, (dict, list)):
        raise DoesNotFit(f"{value!r} is not a STRING")
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    return str(value)


def _integer(value: Any, data_type: T.IntegralType) -> int:
    name = _type_name(data_type)
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise DoesNotFit(f"{value!r} is not an integer ({name})")
    bits = _INT_RANGE[type(data_type)]
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise DoesNotFit(f"{value} is out of the range of {name}")
    return value


def _floating(value: Any, data_type: T.FractionalType) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DoesNotFit(f"{value!r} is not a number ({_type_name(data_type)})")
    return float(value)


def _decimal(value: Any, data_type: T.DecimalType) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)):
        raise DoesNotFit(f"{value!r} is not a number ({_type_name(data_type)})")
    try:
        return Decimal(str(value))
    except InvalidOperation:
        raise DoesNotFit(f"{value!r} is not a number ({_type_name(data_type)})") from None


def _boolean(value: Any, data_type: T.BooleanType) -> bool:
    if not isinstance(value, bool):
        raise DoesNotFit(f"{value!r} is not a BOOLEAN (write true or false)")
    return value


def _stamp(value: Any, data_type: T.DataType) -> dt.datetime:
    stamp = _timestamp(value)
    return stamp.replace(tzinfo=None) if isinstance(data_type, T.TimestampNTZType) else stamp


def _date(value: Any, data_type: T.DateType) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        raise DoesNotFit(f"{value!r} is not a DATE (write 2024-05-01)") from None


def _array(value: Any, data_type: T.ArrayType) -> list:
    if not isinstance(value, list):
        raise DoesNotFit(f"{value!r} is not a list ({_type_name(data_type)})")
    return [typed(v, data_type.elementType) for v in value]


def _map(value: Any, data_type: T.MapType) -> dict:
    if not isinstance(value, dict):
        raise DoesNotFit(f"{value!r} is not a mapping ({_type_name(data_type)})")
    return {typed(k, data_type.keyType): typed(v, data_type.valueType) for k, v in value.items()}


def _struct(value: Any, data_type: T.StructType) -> dict:
    if not isinstance(value, dict):
        raise DoesNotFit(f"{value!r} is not a mapping ({_type_name(data_type)})")
    fields = {f.name: f for f in data_type.fields}
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise DoesNotFit(f"field {unknown[0]!r} is not in {_type_name(data_type)}")
    return {f.name: typed(value.get(f.name), f.dataType) for f in data_type.fields}


def _binary(value: Any, data_type: T.BinaryType) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


# Spark type -> how a YAML value becomes the value Spark holds for it (see typed).
_TYPED = {
    T.StringType: _string, **dict.fromkeys(_INT_RANGE, _integer), T.DoubleType: _floating,
    T.FloatType: _floating, T.DecimalType: _decimal, T.BooleanType: _boolean, T.TimestampType: _stamp,
    T.TimestampNTZType: _stamp, T.DateType: _date, T.ArrayType: _array, T.MapType: _map, T.StructType: _struct,
    T.BinaryType: _binary,
}


def comparable(value: Any) -> Any:
    """Plain data for comparing and printing: timestamps as UTC text, structs as dicts."""
    if value is None:
        return None
    if isinstance(value, T.Row):
        return {k: comparable(v) for k, v in value.asDict(recursive=False).items()}
    if isinstance(value, dict):
        return {str(k): comparable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [comparable(v) for v in value]
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


_ISO_STAMP = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?$")


def stamps_as_text(value: Any) -> Any:
    """JSON data (dead letters) with timestamp-looking text put in the form `comparable` gives."""
    if isinstance(value, dict):
        return {k: stamps_as_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [stamps_as_text(v) for v in value]
    if isinstance(value, dt.datetime) or (isinstance(value, str) and _ISO_STAMP.match(value)):
        return comparable(_timestamp(value))
    return value


def same(a: Any, b: Any) -> bool:
    """Equal as data; floating-point numbers within a relative 1e-9."""
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
                and not isinstance(b, bool):
            return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
        return False
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b
