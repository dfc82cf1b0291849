"""Spark SQL type strings to pyarrow types, so a chain's output batches match the schema Spark declared."""
from __future__ import annotations

import re
from collections.abc import Iterable

import pyarrow as pa

from dslc.runtime.config import Column
from dslc.runtime.schema.type_names import BOOLEANS, FLOAT_BITS, INTEGER_BITS, STRINGS, type_arguments

_SIMPLE: dict[str, pa.DataType] = {
    **dict.fromkeys(STRINGS, pa.string()),
    **{name: {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[bits] for name, bits in INTEGER_BITS.items()},
    **{name: pa.float32() if bits == 32 else pa.float64() for name, bits in FLOAT_BITS.items()},
    **dict.fromkeys(BOOLEANS, pa.bool_()),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
    "TIMESTAMP_LTZ": pa.timestamp("us", tz="UTC"),
    "TIMESTAMP_NTZ": pa.timestamp("us"),
    "DATE": pa.date32(),
    "BINARY": pa.binary(),
}

_DECIMAL = re.compile(r"^(?:DECIMAL|DEC|NUMERIC)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?$")
_SIZED_STRING = re.compile(r"^(?:VARCHAR|CHAR)\s*\(\s*\d+\s*\)$")


def to_arrow_type(spark_type: str) -> pa.DataType:
    """The pyarrow type for a Spark SQL type string (case-insensitive, nested types included)."""
    text = spark_type.strip()
    upper = text.upper()
    if upper in _SIMPLE:
        return _SIMPLE[upper]
    if _SIZED_STRING.match(upper):
        return pa.string()
    decimal = _DECIMAL.match(upper)
    if decimal:
        precision = int(decimal.group(1) or 10)
        scale = int(decimal.group(2) or 0)
        return pa.decimal128(precision, scale)
    if upper.startswith("ARRAY<") and upper.endswith(">"):
        return pa.list_(to_arrow_type(text[6:-1]))
    if upper.startswith("MAP<") and upper.endswith(">"):
        parts = type_arguments(text[4:-1])
        if len(parts) != 2:
            raise ValueError(f"MAP needs a key and a value type: {spark_type!r}")
        return pa.map_(to_arrow_type(parts[0]), to_arrow_type(parts[1]))
    if upper.startswith("STRUCT<") and upper.endswith(">"):
        fields = []
        for part in type_arguments(text[7:-1]):
            match = re.match(r"^`?([A-Za-z_][A-Za-z0-9_]*)`?\s*:?\s*(.+)$", part)
            if not match:
                raise ValueError(f"bad STRUCT field {part!r} in {spark_type!r}")
            fields.append(pa.field(match.group(1), to_arrow_type(match.group(2))))
        return pa.struct(fields)
    raise ValueError(f"unsupported Spark SQL type {spark_type!r}")


def to_arrow_schema(columns: Iterable[Column], extra: Iterable[tuple[str, pa.DataType]] = ()) -> pa.Schema:
    """A nullable pyarrow schema for the columns, plus any extra (name, type) fields."""
    fields = [pa.field(column.name, to_arrow_type(column.type), nullable=True) for column in columns]
    fields.extend(pa.field(name, arrow_type, nullable=True) for name, arrow_type in extra)
    return pa.schema(fields)
