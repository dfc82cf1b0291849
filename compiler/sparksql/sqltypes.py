"""Spark SQL types as written in SCHEMA/RETURNS: validated and canonicalised with sqlglot."""
from __future__ import annotations

import re
from functools import lru_cache

from sqlglot import exp
from sqlglot.errors import ParseError

UNKNOWN = "?"

# The type words Spark's own DDL parser knows. sqlglot also accepts other dialects' types
# (DATETIME, UUID, JSON, ...) and maps them silently, which Spark would reject.
SPARK_TYPE_WORDS = frozenset("""
    BOOLEAN TINYINT BYTE SMALLINT SHORT INT INTEGER BIGINT LONG FLOAT REAL DOUBLE DATE TIMESTAMP
    TIMESTAMP_NTZ TIMESTAMP_LTZ STRING CHAR CHARACTER VARCHAR BINARY DECIMAL DEC NUMERIC
    INTERVAL YEAR MONTH DAY HOUR MINUTE SECOND TO VOID VARIANT ARRAY MAP STRUCT
""".split())
_FIELD_NAME = re.compile(r"`(?:[^`]|``)*`\s*:|[A-Za-z_][A-Za-z0-9_]*\s*:")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_VOID = re.compile(r"\bVOID\b", re.I)
_NULL_TYPE = re.compile(r"(?:^|(?<=<)|(?<=, )|(?<=: ))NULL(?=$|[>,])")


@lru_cache(maxsize=4096)
def canonical(text: str) -> str | None:
    """The canonical Spark spelling of a type (`DECIMAL(10, 2)`), or None when it is not one.
    Remembered: a long pipeline spells the same few types again and again (sqlglot is slow)."""
    words = _WORD.findall(_FIELD_NAME.sub(":", text))
    if any(w.upper() not in SPARK_TYPE_WORDS for w in words):
        return None
    try:
        data_type = exp.DataType.build(_VOID.sub("NULL", text), dialect="spark", udt=False)
    except (ParseError, ValueError, TypeError):
        return None
    if data_type.this == exp.DataType.Type.USERDEFINED or data_type.is_type(exp.DataType.Type.UNKNOWN):
        return None
    return spark_spelling(data_type.sql(dialect="spark"))


def sqlglot_spelling(text: str) -> str:
    """A canonical type as sqlglot reads it: VOID is its NULL."""
    return _VOID.sub("NULL", text)


def spark_spelling(text: str) -> str:
    """sqlglot's spelling of a type made Spark's: the type of NULL is VOID (`ARRAY<VOID>`)."""
    return _NULL_TYPE.sub("VOID", text)


def is_timestamp(type_text: str) -> bool:
    """True for TIMESTAMP and TIMESTAMP_NTZ."""
    return type_text.upper().startswith("TIMESTAMP")
