"""Spark SQL types as written in SCHEMA/RETURNS: validated and canonicalised with sqlglot."""
from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import ParseError

UNKNOWN = "?"


def canonical(text: str) -> str | None:
    """The canonical Spark spelling of a type (`DECIMAL(10, 2)`), or None when it is not one."""
    try:
        data_type = exp.DataType.build(text, dialect="spark", udt=False)
    except (ParseError, ValueError, TypeError):
        return None
    if data_type.this == exp.DataType.Type.USERDEFINED or data_type.is_type(exp.DataType.Type.UNKNOWN):
        return None
    return data_type.sql(dialect="spark")


def is_timestamp(type_text: str) -> bool:
    """True for TIMESTAMP and TIMESTAMP_NTZ."""
    return type_text.upper().startswith("TIMESTAMP")
